#include "held_set.h"

#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

TEST(HeldSetTest, AddCopyRemove) {
  PolicyState a, b;
  EXPECT_FALSE(AnyHeld());
  EXPECT_FALSE(ReadGated());
  EXPECT_TRUE(AddToHeldSet(&a));
  EXPECT_TRUE(ReadGated());
  EXPECT_TRUE(AddToHeldSet(&a));  // once only
  EXPECT_TRUE(AddToHeldSet(&b));
  EXPECT_TRUE(AnyHeld());
  PolicyState* copy[kMaxHeldSockets];
  ASSERT_EQ(CopyHeldSet(copy), 2);
  EXPECT_TRUE((copy[0] == &a && copy[1] == &b) || (copy[0] == &b && copy[1] == &a));
  RemoveFromHeldSet(&a);
  RemoveFromHeldSet(&a);  // not there any more: nothing happens
  ASSERT_EQ(CopyHeldSet(copy), 1);
  EXPECT_EQ(copy[0], &b);
  EXPECT_TRUE(ReadGated());  // b still holds
  RemoveFromHeldSet(&b);
  EXPECT_FALSE(AnyHeld());
  EXPECT_FALSE(ReadGated());
  EXPECT_FALSE(a.in_held_set || b.in_held_set);
}

TEST(HeldSetTest, FullSetRefusesNewSocketsButKeepsMembers) {
  static PolicyState states[kMaxHeldSockets + 1];
  for (int i = 0; i < kMaxHeldSockets; ++i) ASSERT_TRUE(AddToHeldSet(&states[i]));
  EXPECT_FALSE(HeldSetHasRoom(&states[kMaxHeldSockets]));
  EXPECT_TRUE(HeldSetHasRoom(&states[0]));
  EXPECT_FALSE(AddToHeldSet(&states[kMaxHeldSockets]));
  for (int i = 0; i < kMaxHeldSockets; ++i) RemoveFromHeldSet(&states[i]);
  EXPECT_FALSE(AnyHeld());
  EXPECT_FALSE(ReadGated());
}

TEST(HeldSetTest, ClearInChildDropsEveryMember) {
  PolicyState a, b;
  AddToHeldSet(&a);
  AddToHeldSet(&b);
  static int dropped;
  dropped = 0;
  ClearHeldSetInChild([](PolicyState*) { ++dropped; });
  EXPECT_EQ(dropped, 2);
  EXPECT_FALSE(AnyHeld());
  EXPECT_FALSE(ReadGated());
  EXPECT_FALSE(a.in_held_set || b.in_held_set);
}

// Last: GateEveryRead lasts for the rest of the process.
TEST(HeldSetTest, EveryReadGatedStaysGatedWhenTheSetEmpties) {
  PolicyState a;
  EXPECT_FALSE(ReadGated());
  GateEveryRead();
  EXPECT_TRUE(ReadGated());
  EXPECT_FALSE(AnyHeld());
  AddToHeldSet(&a);
  RemoveFromHeldSet(&a);
  EXPECT_TRUE(ReadGated());
  AddToHeldSet(&a);
  ClearHeldSetInChild([](PolicyState*) {});
  EXPECT_FALSE(AnyHeld());
  EXPECT_TRUE(ReadGated());
}

}  // namespace
}  // namespace tcpadvise
