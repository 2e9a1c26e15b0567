"""The fault matrix (issue 12): what real programs do that a policy must
survive, without the shim and under every policy, byte-exact at the peer
(SHA-256 of each connection, see tests/conformance/conformlib.py), with the
same results and errnos as without the shim, within time limits so that a
hang fails."""
import json
import os
import resource
import subprocess
import tempfile
from pathlib import Path

import pytest

from conformlib import SEED, Mode, Peer, conform_prog, released
from testlib import load_traces, sockets

thread = pytest.mark.thread

UNSEEN_CLOSES = ["syscall", "close_range_syscall", "closefrom", "fclose", "dup2_file", "dup3_file"]


@pytest.mark.parametrize("reuse", ["socket", "file", "mkstemp"])
@pytest.mark.parametrize("how", UNSEEN_CLOSES)
def test_close_the_shim_used_not_to_see_then_the_number_reused(conform, how, reuse):
    """Held bytes reach their own peer, never the connection or file that
    reuses the number; the file's content is exactly what was written to it."""
    out = conform.check("unseen-close", "--how", how, "--reuse", reuse)
    assert out["results"]["reused"] is True, out["results"]  # the case tests what it says
    if reuse != "socket":
        assert out["results"]["file"] == "intact"


@thread
def test_writer_blocked_on_a_peer_that_does_not_read_blocks_no_other_thread(conform):
    """Other threads read, poll, wait in epoll, fork and exit while one
    thread is blocked writing with bytes held: all finish before the peer
    reads again, and every byte arrives."""
    # ThreadSanitizer cannot follow a fork made while the shim's private heap
    # takes its many locks (its deadlock detector's own limit): no fork there.
    no_fork = ("--fork", 0) if "tsan" in os.environ.get("TCPADVISE_PRELOAD_FIRST", "") else ()
    out = conform.check("blocked-writer", *no_fork, peer=("--stall-first", 2500))
    assert out["results"]["others_done"] == 5
    assert out["results"]["others_before_the_peer_read"] is True, out["info"]


def test_bad_buffers_get_efault_and_nothing_is_lost(conform):
    """write, send, writev (bad buffer and bad iovec array) and sendmsg (bad
    buffer and bad msghdr) with NULL, low, unmapped and PROT_NONE pointers
    return -1 EFAULT as without the shim, between held writes."""
    out = conform.check("bad-buffer", trace_bytes=False)
    assert all(v == "-1 EFAULT" for k, v in out["results"].items() if k != "close"), out["results"]


@pytest.mark.parametrize("wait", ["read", "recv", "poll", "ppoll", "epoll_pwait2"])
def test_fortified_build_releases_held_bytes_at_each_wait(conform, wait):
    """conform_fortified calls __read_chk, __recv_chk, __poll_chk and
    __ppoll_chk (built with -O2 -D_FORTIFY_SOURCE=3), and epoll_pwait2: each
    releases what is held, so rounds stay fast."""
    rounds = 40
    out = conform.check("request-reply", "--wait", wait, "--rounds", rounds, peer=("--request",),
                        trace_bytes=True, prog="conform_fortified")
    assert out["results"] == {"rounds": rounds, "bad_replies": 0, "timeouts": 0}
    if conform.mode.settings & {"cork", "coalesce"}:
        cause = "read" if wait in ("read", "recv") else "wait"
        for counters in out["policy_counters"]:
            assert released(conform.mode, counters, cause) >= rounds // 2, counters


def test_one_mib_of_thread_local_storage(conform):
    """A program with 1 MiB of TLS leaves the deadline thread's small stack
    no room; the shim starts it with the default stack instead."""
    rounds = 30
    out = conform.check("request-reply", "--wait", "poll", "--rounds", rounds, peer=("--request",),
                        trace_bytes=True, prog="conform_tls")
    assert out["results"] == {"rounds": rounds, "bad_replies": 0, "timeouts": 0}


def _no_more_threads():
    # An unprivileged user allowed one task: this process, and no thread.
    os.setgid(65534)
    os.setuid(65534)
    resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the program as nobody with RLIMIT_NPROC=1")
@pytest.mark.parametrize("policy", ["cork-fixed", "coalesce-fixed"])
def test_deadline_thread_that_cannot_start_fails_open(policy):
    """No thread can start (RLIMIT_NPROC reached): the policy turns itself
    off, warns once, says so in the trace, and every byte passes through
    unchanged with the same results as without the shim. The fixed forms act
    from the first write, hence start the thread; the adaptive ones start it
    only for a multi-write burst (test_adaptive_one_write_bursts_start_no_thread)."""
    outs = {}
    # nobody must reach the config and the trace directory.
    with tempfile.TemporaryDirectory(prefix="tcpadvise-failopen-") as shared:
        root = Path(shared)
        root.chmod(0o777)
        for name in ("baseline", policy):
            (root / name).mkdir()
            mode = Mode(name, root / name)
            if mode.trace_dir is not None:
                mode.trace_dir.chmod(0o777)
            peer = Peer(["--request"])
            try:
                cmd = [conform_prog("conform"), "request-reply", "--wait", "poll", "--rounds", "20",
                       "--seed", str(SEED), "--port", str(peer.port)]
                result = subprocess.run(cmd, env=mode.env, capture_output=True, text=True, timeout=30,
                                        preexec_fn=_no_more_threads)
                assert result.returncode == 0, result.stderr
                out = json.loads(result.stdout.splitlines()[-1])
                (conn,) = out["connections"]
                got = peer.reports([conn["port"]])[conn["port"]]
                assert {key: got.get(key) for key in conn} == conn
            finally:
                peer.stop()
            traces = load_traces(mode.trace_dir) if mode.trace_dir is not None else {}
            outs[name] = (out, result.stderr, traces)
    out, stderr, traces = outs[policy]
    assert out["results"] == outs["baseline"][0]["results"]
    assert stderr.count("tcpadvise: warning") == 1 and "deadline thread cannot start" in stderr, stderr
    trace = traces[out["pid"]]
    assert trace["policy_fail_open"] == "the policy deadline thread cannot start"
    (sock,) = sockets(trace, "client")
    assert sock["writes"]["bytes"] == out["connections"][0]["bytes"]
    assert sock["policy"]["counters"]["bytes_held"] == 0 and sock["policy"]["counters"]["corks"] == 0
