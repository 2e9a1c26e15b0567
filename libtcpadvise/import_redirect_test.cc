#include "import_redirect.h"

#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace tcpadvise {
namespace {

int FakeGetppid() { return -42; }

TEST(ImportRedirectTest, SendsOnlyTheLibrarysCallsToTheReplacement) {
  void* lib = dlopen(TCPADVISE_IMPORT_REDIRECT_TEST_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto call = reinterpret_cast<int (*)()>(dlsym(lib, "lib_getppid"));
  auto address = reinterpret_cast<void* (*)()>(dlsym(lib, "lib_getppid_address"));
  ASSERT_NE(call, nullptr);
  ASSERT_NE(address, nullptr);
  const int parent = getppid();
  ASSERT_EQ(call(), parent);
  void* original = nullptr;
  void* absent = &original;
  ImportRedirect redirects[] = {
      {"getppid", reinterpret_cast<void*>(FakeGetppid), &original},
      {"tcpadvise_not_imported", reinterpret_cast<void*>(FakeGetppid), &absent},
  };
  // The read-only slots are written: a fault otherwise.
  ASSERT_TRUE(RedirectImports(lib, redirects, 2));
  EXPECT_EQ(call(), -42);
  EXPECT_EQ(address(), reinterpret_cast<void*>(FakeGetppid));
  EXPECT_EQ(original, dlsym(RTLD_DEFAULT, "getppid"));
  EXPECT_EQ(absent, nullptr);
  EXPECT_EQ(getppid(), parent);  // everyone else's calls are their own
}

}  // namespace
}  // namespace tcpadvise
