"""Policies never change a program's bytes: each case runs without the shim
and under every policy (see conftest.py); the peer must receive exactly the
bytes the program's calls accepted, in order, and the calls must return, and
the signals arrive, as they do without the shim (see conformlib.py)."""
import warnings

import pytest

from conformlib import held_nothing, released

thread = pytest.mark.thread
ROUND_BOUND_US = 100_000  # coalesce promises 200 us, cork 5 ms; a 40 ms delayed ACK fits too


@pytest.mark.parametrize("threads, ops", [
    pytest.param(1, 120, id="single"),
    pytest.param(4, 50, id="threads", marks=thread),
])
def test_random_mix_of_write_calls(conform, threads, ops):
    out = conform.check("mix", "--threads", threads, "--ops", ops, trace_bytes=True)
    assert len(out["connections"]) == threads
    assert out["results"]["short_writes"] == 0


def test_nonblocking_short_writes_and_eagain(conform):
    out = conform.check("nonblocking", peer=("--slow",), trace_bytes=True)
    assert out["results"]["poll_timeouts"] == 0
    if conform.mode.name == "baseline":  # the case does what it says
        assert out["info"]["eagain"] > 0 and out["info"]["short_writes"] > 0, out["info"]


@pytest.mark.parametrize("wait", ["read", "recv", "poll", "ppoll", "select", "epoll_wait"])
def test_request_reply_never_stalls(conform, wait):
    rounds = 50
    out = conform.check("request-reply", "--wait", wait, "--rounds", rounds, peer=("--request",), trace_bytes=True)
    assert out["results"] == {"rounds": rounds, "bad_replies": 0, "timeouts": 0}
    assert out["info"]["max_round_us"] < ROUND_BOUND_US, out["info"]
    # The deadline would hide a missing flush on the wait from the latency
    # bound; the trace says who let go (most of the time: a busy machine may
    # delay a round past the deadline).
    cause = "read" if wait in ("read", "recv") else "wait"
    if conform.mode.settings & {"cork", "coalesce"}:
        for counters in out["policy_counters"]:
            assert released(conform.mode, counters, cause) >= rounds // 2, counters


def assert_flushed_by(conform, out, cause):
    """What the driver held when it forked or spawned went out then: a
    deadline flush may win the race against the child's first bytes, so the
    order alone would not show a missing flush. Only when the bytes were
    young enough that no deadline (200 us at the least) could have passed:
    hold_age_us is their age once fork or posix_spawn returned, after the
    shim's handler (a sanitizer's fork may take longer than the deadline
    before it calls the handlers)."""
    if conform.mode.settings & {"cork", "coalesce"} and out["info"]["hold_age_us"] < 200:
        for counters in out["policy_counters"]:
            # An adaptive policy passes a lone write straight through: nothing to flush.
            assert counters["flushes"].get(cause, 0) >= 1 or (conform.mode.adaptive and held_nothing(counters)), counters


def test_fork_after_held_write(conform):
    out = conform.check("fork")
    assert out["results"]["child"] == "exit 0"
    assert_flushed_by(conform, out, "fork")


@pytest.mark.parametrize("how", ["execve", "posix_spawn"])
def test_exec_after_held_write(conform, how):
    out = conform.check("exec", "--how", how, tracked=how != "execve")
    if how == "execve":
        assert out["results"] == {"tail": "ran"}
    else:
        assert out["results"] == {"child": "exit 0"}
        assert_flushed_by(conform, out, "exec")


@pytest.mark.parametrize("how", ["exit", "_exit", "return"])
def test_exit_with_held_data(conform, how):
    conform.check("exit", "--how", how, tracked=how != "_exit")


@pytest.mark.parametrize("how", ["close", "close_range", "shutdown", "dup2", "dup3"])
def test_held_data_at_close_shutdown_and_dup2(conform, how):
    out = conform.check("close-held", "--how", how, trace_bytes=True)
    if how == "shutdown":
        assert out["results"]["send_after_shutdown"] == "-1 EPIPE"
        assert out["results"]["read_after_shutdown"] == "0"
    if how.startswith("dup"):
        assert out["results"]["dup"] == "target" and len(out["connections"]) == 2


def test_dup_fds_write_in_turn(conform):
    conform.check("dup-writers", trace_bytes=True)


@pytest.mark.parametrize("flags, sigpipes", [("nosignal", 0), ("signal", 1)])
def test_peer_close_gives_epipe_and_sigpipe_as_without_the_shim(conform, flags, sigpipes):
    prefix = 300
    out = conform.check("peer-closed", "--flags", flags, "--prefix", prefix, peer=("--close-after", prefix))
    results = out["results"]
    assert results["write_after_peer_close"] == "1"
    assert results["sigpipes_while_idle"] == 0
    assert results["first_error"] == "EPIPE" and results["sigpipes"] == sigpipes


@thread
@pytest.mark.parametrize("order", ["blocked", "free"])
def test_signal_handler_writes_between_main_writes(conform, order):
    """blocked: the main loop blocks SIGALRM around its writes, so the exact
    order is known; free: it does not, and the peer checks the records."""
    out = conform.check("signal-writer", "--order", order, peer=("--records",), trace_bytes=True)
    assert out["results"]["handler_wrote_enough"] is True


def test_app_sets_nodelay_and_cork_itself(conform):
    conform.check("app-options", trace_bytes=True)


def test_more_oob_and_zerocopy_keep_order(conform):
    out = conform.check("send-flags", trace_bytes=True)
    assert out["results"]["zerocopy_completions_match"] is True
    if out["info"]["zerocopy"] != "used" or out["info"]["zerocopy_enobufs"]:
        warnings.warn(f"MSG_ZEROCOPY fell back to plain sends: {out['info']}")


def test_sendfile_after_held_writes(conform):
    conform.check("sendfile", trace_bytes=True)
