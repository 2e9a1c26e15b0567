#include "policy.h"

#include <gtest/gtest.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "coalesce.h"
#include "deadline_thread.h"
#include "held_set.h"
#include "hooks.h"
#include "policy_test_util.h"
#include "socket_table.h"

namespace tcpadvise {
namespace {

// LoadConfig loads the config of the test that goes through the hooks
// (one adaptive coalesce rule for every socket) before any test starts the
// deadline thread, as the shim loads its config before any write.
const PolicyConfig* LoadConfig() {
  static PolicyConfig config;
  config.rule_count = 1;
  config.rules[0].settings.coalesce = true;
  config.rules[0].settings.coalesce_delay_us = 50;
  g_policy_config = &config;
  return &config;
}
const PolicyConfig* const g_config = LoadConfig();

// NewFixture's fixtures live as long as the process: the deadline thread, once a test
// started it, may still look at a state after its test ended.
PolicyFixture* NewFixture(bool coalesce) {
  static std::vector<PolicyFixture*>* fixtures = new std::vector<PolicyFixture*>;
  fixtures->push_back(new PolicyFixture(coalesce));
  // Deadlines far beyond a test's bursts: what is held is released by the
  // test's reads, as the rule's counters are compared.
  fixtures->back()->settings.cork_delay_us = kMaxCorkDelayUs;
  fixtures->back()->settings.coalesce_delay_us = kMaxCorkDelayUs;
  return fixtures->back();
}

// AppWrite writes text as the write hook does (hooks.cc: Written): the
// lock-free pass when it applies and fast is set, else PolicyWrite; then the
// burst counts one more write (SocketState::OnWrite).
ssize_t AppWrite(PolicyFixture* f, const std::string& text, bool fast) {
  Passthrough pass = {f->pair.client, {const_cast<char*>(text.data()), text.size()}};
  const ssize_t r = fast && PassesUnheld(&f->socket, &f->state)
                        ? Passthrough::Call(&pass)
                        : PolicyWrite(&f->socket, f->pair.client, &pass.iov, 1, false, 0, false, Passthrough::Call, &pass);
  f->socket.stats.burst_open_writes.Add(1);
  return r;
}

// AppRead does what a read does to the policy and the burst: what is held
// leaves first (hooks.cc: ReadUnderPolicy), then the burst is closed.
void AppRead(PolicyFixture* f) {
  // A release skips a socket whose turn the deadline thread has this instant.
  while (HoldsSomething(&f->state)) ReleaseAll(FlushCause::kRead);
  f->socket.stats.burst_open_writes.Set(0);
}

PolicyCounters& Counters(PolicyFixture* f) { return *f->socket.stats.policy_counters(); }

// ProtectPages makes the pages of [p, p + n) read-only (writable: false) or
// writable again.
void ProtectPages(const void* p, size_t n, bool writable) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  ASSERT_EQ(mprotect(reinterpret_cast<void*>(lo), hi - lo, writable ? PROT_READ | PROT_WRITE : PROT_READ), 0);
}

// An option the application sets that its rule does not (TCP_NODELAY under
// coalesce), or a conflict already counted, writes nothing: a fork parent
// that sets it on a connection after its fork would copy a page its child
// shares. The counters sit on read-only pages: a write would kill the test.
TEST(PolicyTest, AConflictWritesOnlyANewBit) {
  SocketState s;
  s.id.rule = 0;
  PolicyCounters* c = s.stats.MakePolicyCounters();
  ASSERT_NE(c, nullptr);
  ProtectPages(c, sizeof(*c), false);
  NoteConflict(&s, AppOption::kNodelay);
  ProtectPages(c, sizeof(*c), true);
  EXPECT_EQ(c->conflicts.Get(), 0u);
  NoteConflict(&s, AppOption::kCork);
  EXPECT_EQ(c->conflicts.Get(), kConflictCork);
  ProtectPages(c, sizeof(*c), false);
  NoteConflict(&s, AppOption::kCork);
  ProtectPages(c, sizeof(*c), true);
  EXPECT_EQ(c->conflicts.Get(), kConflictCork);
}

TEST(PolicyTest, APassiveSocketPassesWithoutTheTurn) {
  PolicyFixture* f = NewFixture(true);
  // The first burst is the rule's to see (PolicyWrite); it leaves the shape steady.
  EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
  ASSERT_EQ(AppWrite(f, "x", true), 1);
  AppRead(f);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PassesUnheld(&f->socket, &f->state));
    EXPECT_TRUE(f->state.lock.Passes()) << "the pass takes no turn";
    ASSERT_EQ(LibcWrite(f->pair.client, "x", 1), 1);  // the hook makes the call itself
    f->socket.stats.burst_open_writes.Add(1);
    AppRead(f);
  }
  EXPECT_TRUE(AdaptSteady(f->state.shape));
  EXPECT_EQ(BurstsPassed(f->socket), 4u);
  EXPECT_EQ(f->pair.ReadAvailable(), "xxxx");
  // A burst's second write is the rule's to decide: no lock-free pass.
  ASSERT_TRUE(PassesUnheld(&f->socket, &f->state));  // its first passes
  f->socket.stats.burst_open_writes.Set(1);
  EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
  EXPECT_EQ(BurstsPassed(f->socket), 5u);
}

TEST(PolicyTest, TheLockFreePassesJoinTheCountersWhenTheSocketGoes) {
  PolicyFixture* f = NewFixture(true);
  ASSERT_EQ(AppWrite(f, "x", true), 1);
  AppRead(f);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PassesUnheld(&f->socket, &f->state));
    AppRead(f);
  }
  EXPECT_EQ(f->state.passed.Get(), 3u) << "counted beside the turn";
  const uint64_t before = BurstsPassed(f->socket);
  PolicySocketGone(&f->socket, EBADF);
  EXPECT_EQ(f->state.passed.Get(), 0u);
  EXPECT_EQ(Counters(f).bursts_passed.Get(), before) << "what the socket's group folds";
  EXPECT_EQ(BurstsPassed(f->socket), before) << "counted once";
}

TEST(PolicyTest, NoLockFreePassWhileAnythingIsHeldOrTheTurnIsTaken) {
  PolicyFixture* f = NewFixture(true);
  // The first write is the rule's (no burst seen yet); it leaves the socket steady.
  EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
  ASSERT_EQ(AppWrite(f, "x", true), 1);
  AppRead(f);
  ASSERT_TRUE(f->state.lock.Passes());
  const auto refused = [f] {
    const uint64_t passed = BurstsPassed(f->socket);
    const bool passes = PassesUnheld(&f->socket, &f->state);
    EXPECT_EQ(BurstsPassed(f->socket), passed) << "a refused pass changes nothing";
    return !passes;
  };
  // given(set, undo): a holder that finds set's state gives no pass; once
  // undone, the next holder gives it again.
  const auto given = [&](auto set, auto undo) {
    ASSERT_TRUE(TryTakeTurn(&f->state));
    set();
    GiveTurn(&f->state);
    EXPECT_TRUE(refused());
    ASSERT_TRUE(TryTakeTurn(&f->state));
    undo();
    GiveTurn(&f->state);
    EXPECT_TRUE(f->state.lock.Passes());
  };
  ASSERT_TRUE(f->state.lock.TryTake());  // the deadline thread, a release, a writer
  EXPECT_TRUE(refused());
  f->state.lock.Give(true);
  given([f] { f->state.held.store(3); }, [f] { f->state.held.store(0); });
  given([f] { f->state.corked.store(true); }, [f] { f->state.corked.store(false); });
  given([f] { f->state.gone.store(true); }, [f] { f->state.gone.store(false); });
  // Active, a streak, a burst in pieces: the rule's.
  given([f] { f->state.shape.streak = 1; }, [f] { f->state.shape.streak = 0; });
  given([f] { f->state.shape.burst_writes = 2; }, [f] { f->state.shape.burst_writes = 1; });
  // A signal handler's write reserves the overflow without the turn: it
  // withdraws the pass, and the one a holder gives meanwhile.
  ASSERT_TRUE(EnsureBuffer(&f->state, f->pair.client));
  Passthrough unused = {f->pair.client, {nullptr, 0}};
  const iovec h = {const_cast<char*>("h"), 1};
  ASSERT_EQ(SignalWrite(&f->state, &h, 1, Passthrough::Call, &unused), 1);
  EXPECT_TRUE(refused());
  ASSERT_TRUE(TryTakeTurn(&f->state));  // sends the handler's byte on
  ASSERT_EQ(SignalWrite(&f->state, &h, 1, Passthrough::Call, &unused), 1);
  GiveTurn(&f->state);
  EXPECT_TRUE(refused());
  while (HoldsSomething(&f->state) || f->state.overflow_length.load() != 0) ReleaseAll(FlushCause::kRead);
  ASSERT_TRUE(TryTakeTurn(&f->state));
  GiveTurn(&f->state);
  EXPECT_TRUE(PassesUnheld(&f->socket, &f->state));
  EXPECT_EQ(f->pair.ReadAvailable(), "xhh");
}

// The turn's word: a Veto wins over a pass given after it while the turn
// was held, and taking the turn withdraws the pass.
TEST(PolicyTest, AVetoWinsOverTheHoldersPass) {
  SocketTurn turn;
  EXPECT_FALSE(turn.Passes());
  ASSERT_TRUE(turn.TryTake());
  turn.Give(true);
  EXPECT_TRUE(turn.Passes());
  ASSERT_TRUE(turn.TryTake());
  EXPECT_FALSE(turn.Passes());
  EXPECT_FALSE(turn.TryTake());
  turn.Veto();
  EXPECT_FALSE(turn.TryTake()) << "a veto leaves the turn taken";
  turn.Give(true);
  EXPECT_FALSE(turn.Passes());
  ASSERT_TRUE(turn.TryTake()) << "given back all the same";
  turn.Give(true);
  turn.Veto();
  EXPECT_FALSE(turn.Passes());
  ASSERT_TRUE(turn.TryTake());
  turn.Give(true);
  EXPECT_TRUE(turn.Passes()) << "a veto lasts until the turn is next taken";
}

TEST(PolicyTest, AFixedPolicyNeverPassesWithoutTheTurn) {
  for (const bool coalesce : {true, false}) {
    PolicyFixture* f = NewFixture(coalesce);
    f->settings.adaptive = false;
    for (int burst = 0; burst < 3; ++burst) {
      EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
      ASSERT_EQ(AppWrite(f, "y", true), 1);
      // Held, or corked (an uncork counts the burst's writes into the shape).
      EXPECT_TRUE(HoldsSomething(&f->state));
      AppRead(f);
    }
    EXPECT_EQ(BurstsPassed(f->socket), 0u);
    EXPECT_EQ(f->pair.ReadAvailable(), "yyy");
  }
}

// A socket that starts writing in pieces still turns active after
// enter_bursts such bursts, and the next one is held from its first write,
// never passed ahead of what is held.
TEST(PolicyTest, ASocketWritingInPiecesStillTurnsActive) {
  PolicyFixture* f = NewFixture(true);
  f->settings.adapt_enter_bursts = 2;
  std::string sent;
  for (int burst = 0; burst < 5; ++burst) {
    const int writes = burst == 0 ? 1 : 2;
    for (int i = 0; i < writes; ++i) {
      const std::string part = std::to_string(burst) + ":" + std::to_string(i) + ";";
      ASSERT_EQ(AppWrite(f, part, true), static_cast<ssize_t>(part.size()));
      sent += part;
      if (burst == 3 && i == 0) {
        EXPECT_EQ(f->state.held.load(), part.size()) << "active: held from the first write";
      }
    }
    AppRead(f);
  }
  EXPECT_TRUE(f->state.shape.active);
  EXPECT_FALSE(f->state.lock.Passes());
  EXPECT_EQ(Counters(f).adapt_switches.Get(), 1u);
  EXPECT_EQ(BurstsPassed(f->socket), 3u);
  EXPECT_EQ(Counters(f).bursts_pieces.Get(), 2u);
  EXPECT_EQ(Counters(f).bursts_held.Get(), 2u);
  EXPECT_EQ(f->pair.ReadAvailable(), sent);
  // A held write is never passed: the next write goes behind it.
  ASSERT_EQ(AppWrite(f, "a", true), 1);
  EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
  AppRead(f);
  EXPECT_EQ(f->pair.ReadAvailable(), "a");
}

// A socket turned passive again while its last bytes are still held (the
// reads' releases found its turn taken, by the deadline thread say): its
// next single write finds the steady passive shape, and must still go
// behind them.
TEST(PolicyTest, ASteadyPassiveWriteNeverPassesWhatIsHeld) {
  PolicyFixture* f = NewFixture(true);
  f->settings.adapt_enter_bursts = 1;
  f->settings.adapt_leave_bursts = 1;
  const auto read_while_busy = [f] {
    ASSERT_TRUE(f->state.lock.TryTake());
    ReleaseAll(FlushCause::kRead);  // skips the busy socket
    f->state.lock.Give();
    f->socket.stats.burst_open_writes.Set(0);
  };
  ASSERT_EQ(AppWrite(f, "a1", true), 2);
  ASSERT_EQ(AppWrite(f, "a2", true), 2);
  AppRead(f);
  ASSERT_EQ(AppWrite(f, "b", true), 1);  // turns active: held
  read_while_busy();
  ASSERT_EQ(AppWrite(f, "c", true), 1);  // turns passive, but goes behind b
  read_while_busy();
  ASSERT_TRUE(AdaptSteady(f->state.shape));
  ASSERT_EQ(f->state.held.load(), 2u);
  EXPECT_FALSE(PassesUnheld(&f->socket, &f->state));
  ASSERT_EQ(AppWrite(f, "d", true), 1);
  AppRead(f);
  EXPECT_EQ(f->pair.ReadAvailable(), "a1a2bcd");
}

// The same bursts through the lock-free pass where it applies and through
// PolicyWrite alone: the same shape, counters and bytes, under cork and
// coalesce, with the socket switching both ways.
TEST(PolicyTest, TheLockFreePassCountsAsPolicyWriteDoes) {
  for (const bool coalesce : {true, false}) {
    std::mt19937 rng(coalesce ? 11 : 12);
    PolicyFixture* arms[2] = {NewFixture(coalesce), NewFixture(coalesce)};
    for (PolicyFixture* f : arms) {
      f->settings.adapt_enter_bursts = 2;
      f->settings.adapt_leave_bursts = 3;
    }
    std::string sent;
    for (int burst = 0; burst < 300; ++burst) {
      // Runs of one shape, changing mid-life, with strays.
      const bool pieces = (burst / 30) % 2 == 1;
      const int writes = pieces ? (rng() % 6 == 0 ? 1 : 2 + static_cast<int>(rng() % 3)) : (rng() % 6 == 0 ? 2 : 1);
      for (int i = 0; i < writes; ++i) {
        const std::string part = std::to_string(burst) + "." + std::to_string(i) + ",";
        sent += part;
        for (int arm = 0; arm < 2; ++arm) {
          ASSERT_EQ(AppWrite(arms[arm], part, arm == 0), static_cast<ssize_t>(part.size()));
        }
        const AdaptiveShape &a = arms[0]->state.shape, &b = arms[1]->state.shape;
        ASSERT_TRUE(a.active == b.active && a.streak == b.streak && a.burst_writes == b.burst_writes)
            << "burst " << burst << " write " << i;
        ASSERT_EQ(arms[0]->state.lock.Passes(), arms[1]->state.lock.Passes());
      }
      for (PolicyFixture* f : arms) AppRead(f);
    }
    const PolicyCounters &fast = Counters(arms[0]), &slow = Counters(arms[1]);
    EXPECT_EQ(BurstsPassed(arms[0]->socket), BurstsPassed(arms[1]->socket));
    EXPECT_EQ(fast.bursts_held.Get(), slow.bursts_held.Get());
    EXPECT_EQ(fast.bursts_pieces.Get(), slow.bursts_pieces.Get());
    EXPECT_EQ(fast.adapt_switches.Get(), slow.adapt_switches.Get());
    EXPECT_EQ(fast.corks.Get(), slow.corks.Get());
    EXPECT_EQ(fast.bytes_held.Get(), slow.bytes_held.Get());
    EXPECT_GE(fast.adapt_switches.Get(), 4u) << "the bursts switch the socket both ways";
    EXPECT_GT(BurstsPassed(arms[0]->socket), 100u);
    for (PolicyFixture* f : arms) EXPECT_EQ(f->pair.ReadAvailable(), sent);
  }
}

// A fork from a signal handler inside the shim can cut another thread's
// removal of a state from the held set (the deadline thread's, after a
// flush): in the child the state reads as in the set without being there.
// A socket that reuses it holds in the set again, so that a release finds
// its bytes (sigfork write lost a child's bytes about once in 50,000 forks).
TEST(PolicyTest, AReusedStateThatReadsAsHeldJoinsTheSetAgain) {
  g_table.Init();
  TcpPair pair;
  SocketState* s = g_table.Track(pair.client, SocketIdentity{});
  ASSERT_NE(s, nullptr);
  PolicyState* stale = new PolicyState;
  stale->in_held_set = true;
  s->policy_state = stale;
  AttachPolicy(pair.client, s, nullptr);
  ASSERT_EQ(s->policy_state, stale);
  EXPECT_FALSE(stale->in_held_set);
  ASSERT_TRUE(AddToHeldSet(stale));
  PolicyState* copy[kMaxHeldSockets];
  const int n = CopyHeldSet(copy);
  EXPECT_NE(std::find(copy, copy + n, stale), copy + n);
  RemoveFromHeldSet(stale);
  g_table.Release(pair.client);
}

// A fork from a signal handler that cut a section holding a socket's turn
// (here the write about to hold "cd"): the section goes on in the child when
// the handler returns. The parent sends what the socket holds and what the
// section adds; in the child the section keeps its lengths (a flush it was
// in goes on with them), sends nothing and forgets it all at its end. The
// fork used to empty the socket under the section: the child then held "cd"
// and sent it at its exit, a second copy on its parent's connection.
TEST(PolicyTest, AChildForkedInsideASectionLeavesItsBytesToItsParent) {
  PolicyFixture* f = NewFixture(true);
  PolicyFixture* other = NewFixture(true);
  f->settings.adaptive = other->settings.adaptive = false;
  ASSERT_EQ(AppWrite(f, "ab", false), 2);
  ASSERT_EQ(AppWrite(other, "xy", false), 2);
  const std::string cd = "cd";
  Passthrough pass = {f->pair.client, {const_cast<char*>(cd.data()), cd.size()}};
  ASSERT_TRUE(TryTakeTurn(&f->state));  // the section the handler cuts
  const pid_t tid = gettid();
  const pid_t child = fork();
  if (child == 0) {
    DropHeldInChild(tid);
    int failed = other->state.held.load() == 0 ? 0 : 1;
    if (CoalesceWrite(&f->state, f->pair.client, &pass.iov, 1, 0, false, Passthrough::Call, &pass) != 2) failed |= 2;
    if (f->state.held.load() != 4) failed |= 4;
    if (!Flush(&f->state, f->pair.client, FlushCause::kLimit, false) || f->state.held.load() != 0) failed |= 8;
    GiveTurn(&f->state);
    if (HoldsSomething(&f->state) || g_section_forked.load() != nullptr) failed |= 16;
    ReleaseAll(FlushCause::kExit);  // the child's way out sends only its own
    _exit(failed);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 other kept, 2 write, 4 lengths, 8 flush, 16 end";
  ASSERT_EQ(CoalesceWrite(&f->state, f->pair.client, &pass.iov, 1, 0, false, Passthrough::Call, &pass), 2);
  GiveTurn(&f->state);
  AppRead(f);
  AppRead(other);
  EXPECT_EQ(f->pair.ReadAvailable(), "abcd");
  EXPECT_EQ(other->pair.ReadAvailable(), "xy");
}

// A fork from a signal handler that came after a write noted its socket
// (t_inside) but before it took the socket's turn, which another thread
// held: in the child that thread is gone, and the write, going on, would
// wait for the turn for ever. The child frees every socket's turn: the
// interrupted section then finds its own free, or holds it alone.
TEST(PolicyTest, AChildForkedInsideASectionFindsItsSocketsTurnFree) {
  PolicyFixture* f = NewFixture(true);
  ASSERT_TRUE(f->state.lock.TryTake());  // another thread's
  t_inside = &f->state;                  // the write's note, just before its TryTake
  const pid_t child = fork();
  if (child == 0) {
    FreeTurnInChild(&f->state);
    t_inside = nullptr;
    _exit(TryTakeTurn(&f->state) ? 0 : 1);
  }
  t_inside = nullptr;
  f->state.lock.Give();
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child could not take the socket's turn";
}

// kRecords records of 8 bytes (writer, sequence) from each of two threads
// through the write hooks on one adaptive coalesce socket, in bursts of one
// to three writes closed by a read, while the deadline thread releases what
// is held: every record arrives once, each thread's in its order.
TEST(PolicyTest, TwoThreadsWriteThroughAnAdaptiveSocketInOrder) {
  constexpr uint32_t kRecords = 4000;
  g_table.Init();
  static TcpPair* const pair = new TcpPair;  // the deadline thread may look at its state after the test
  SocketState* s = g_table.Track(pair->client, SocketIdentity{});
  ASSERT_NE(s, nullptr);
  AttachPolicy(pair->client, s, nullptr);
  ASSERT_NE(s->stats.policy, nullptr);
  ASSERT_TRUE(s->stats.policy->settings->adaptive);

  std::string got;
  std::thread reader([&] {
    char buf[65536];
    while (got.size() < 2 * kRecords * 8) {
      const ssize_t n = read(pair->server, buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  });
  const auto writer = [&](uint32_t id) {
    std::mt19937 rng(id);
    for (uint32_t seq = 0; seq < kRecords;) {
      const uint32_t writes = rng() % 4 == 0 ? 1 + rng() % 3 : 1;  // mostly one write a burst
      for (uint32_t i = 0; i < writes && seq < kRecords; ++i, ++seq) {
        const uint32_t record[2] = {id, seq};
        ASSERT_EQ(seq % 2 ? hooks::Write(pair->client, record, sizeof(record))
                          : hooks::Send(pair->client, record, sizeof(record), MSG_NOSIGNAL),
                  static_cast<ssize_t>(sizeof(record)));
      }
      char byte;
      ASSERT_EQ(hooks::Recv(pair->client, &byte, 1, MSG_DONTWAIT), -1);  // the burst ends
    }
  };
  std::thread a(writer, 1), b(writer, 2);
  a.join();
  b.join();
  for (int i = 0; i < 2000 && AnyHeld(); ++i) {
    char byte;
    hooks::Recv(pair->client, &byte, 1, MSG_DONTWAIT);
    usleep(1000);
  }
  reader.join();
  ASSERT_EQ(got.size(), 2 * kRecords * 8);
  uint32_t next[3] = {0, 0, 0};
  for (size_t at = 0; at < got.size(); at += 8) {
    uint32_t record[2];
    memcpy(record, got.data() + at, sizeof(record));
    ASSERT_TRUE(record[0] == 1 || record[0] == 2) << "at " << at;
    ASSERT_EQ(record[1], next[record[0]]) << "writer " << record[0] << " at " << at;
    ++next[record[0]];
  }
  const PolicyCounters& c = *s->stats.policy_counters();
  EXPECT_GT(BurstsPassed(*s), 0u);
  EXPECT_GT(c.bytes_held.Get(), 0u);
}

}  // namespace
}  // namespace tcpadvise
