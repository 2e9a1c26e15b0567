"""A burst of one write never gets an added system call (issue 16): real
one-write-per-request servers (redis, nginx with sendfile off, PostgreSQL
forking a backend per pgbench -C connection) under adaptive cork and coalesce
make exactly the system calls they make under observe, counted by strace -f
-c over a fixed number of requests: no setsockopt or getsockopt, no deadline
thread (clone3, clock_nanosleep), no iovec check (process_vm_readv), the
same writes. The servers are run as `tcpadvise bench servers` runs them,
with call-site sampling off: its paced samples (libunwind's own checks) vary
with timing, under every arm alike."""
import http.client
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from harness import skip_unless_installed
from testlib import load_traces, shim_path, sockets

from tcpadvise.bench import servers as S
from tcpadvise.bench.strace import counted_calls, listening_pids
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

skip_unless_installed("strace", "ss")

# What a policy could add to a write, an accept or a close: all counted, none timing-dependent.
SHIM_CALLS = ("setsockopt", "getsockopt", "ioctl", "clone", "clone3", "clock_nanosleep", "process_vm_readv",
              "write", "writev", "sendto", "sendmsg", "mprotect", "set_robust_list", "rseq")


def _http_gets(port, requests):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    for _ in range(requests):
        connection.request("GET", "/index.html")
        response = connection.getresponse()
        assert response.status == 200 and len(response.read()) == 4096
    connection.close()


def _load(server, port):
    """A fixed load: requests the client makes, the same under every arm."""
    if server.name == "redis":
        command = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "2", "-n", "2000",
                   "-t", "get", "-q"]
        subprocess.run(command, check=True, capture_output=True, env=isolated_environment(), timeout=60)
    elif server.name == "nginx":
        # Two connections, one after the other (nginx closes none before 1000 requests).
        _http_gets(port, 500)
        _http_gets(port, 500)
    else:
        command = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n",
                   "-c", "1",
                   "-t", "40", "postgres"]
        subprocess.run(command, check=True, capture_output=True, env=isolated_environment(), timeout=120)


def count_calls(server, arm, scratch):
    """The server's system calls by name while it serves the fixed load under arm."""
    directory = S._prepared(server, scratch)
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=directory))
    with S.running(server, directory, POLICIES[arm], shim_path(), traces) as port:
        time.sleep(1)  # the readiness probe's connection (and PostgreSQL's backend for it) is over
        with counted_calls(listening_pids(port), directory / f"strace-{arm}.txt") as calls:
            _load(server, port)
            time.sleep(1)  # the last PostgreSQL backend has written its trace and exited
    # Proof that the arm's policy ran: a compiled config the shim refused would leave it observing.
    policies = [sock["policy"] for trace in load_traces(traces).values() for sock in sockets(trace, "server")
                if "policy" in sock]
    assert policies, f"{server.name} under {arm}: no server socket in the traces carries the policy"
    if arm != "observe":
        assert all(arm in p["settings"] for p in policies), policies
    return calls


SERVERS = {server.name: server for server in S.SERVERS}


@pytest.mark.parametrize("name", ["redis", "nginx", "postgres"])
def test_one_write_bursts_get_no_added_system_call(name, monkeypatch):
    server = SERVERS[name]
    shim_environment = S.shim_environment
    monkeypatch.setattr(S, "shim_environment",
                        lambda *args: {**shim_environment(*args), "TCPADVISE_CALL_SITES": "off"})
    if server.missing():
        pytest.skip(f"{name}: {server.missing()}")
    # Under /tmp, not tmp_path: PostgreSQL runs as its own user, who cannot traverse pytest's directories.
    with tempfile.TemporaryDirectory(prefix="tcpadvise-adaptive-") as scratch:
        counts = {arm: count_calls(server, arm, Path(scratch)) for arm in ("observe", "cork", "coalesce")}
    shim_calls = {arm: {call: calls.get(call, 0) for call in SHIM_CALLS} for arm, calls in counts.items()}
    observe = shim_calls["observe"]
    assert observe["write"] + observe["writev"] + observe["sendto"] > 0, observe
    assert shim_calls["cork"] == shim_calls["observe"], shim_calls
    assert shim_calls["coalesce"] == shim_calls["observe"], shim_calls
