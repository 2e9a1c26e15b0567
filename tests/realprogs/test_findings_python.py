"""Python programs of three shapes the report must get right: a client that
sends a header then a body (large-write-tail), a connection pool that never
closes its connections (reported live, from the final trace and from a
snapshot), and servers stopped by a signal (their trace kept)."""
import json
import signal
import subprocess
import sys
import time

import pytest
from findings import (
    FRAMED,
    FramedServer,
    assert_no_alarm_above_info,
    findings,
    framed_client,
    items,
    observe,
    report,
    total,
    traces_of,
)
from harness import free_port, listening
from testlib import start_listening, wait_for

REQUESTS = 30
BODY = 4000
POOL = 4
ROUNDS = 8


@pytest.fixture
def framed_server(tmp_path):
    servers = []

    def start(shim):
        servers.append(FramedServer(shim))
        return servers[-1]

    yield start
    for server in servers:
        server.stop(signal.SIGKILL)


def test_header_then_body_client_waits_for_delayed_acks(tmp_path, framed_server):
    shim = observe(tmp_path)
    server = framed_server(shim)
    client = framed_client(shim, "header-body", server.port, REQUESTS, BODY)
    server.stop(signal.SIGINT)
    document = report(shim.traces)

    # Exact counts: two writes per request, every byte the client sent read by the server.
    (sock,) = items(document, role="client", pid=client["pid"])
    assert client["writes"] == 2 * REQUESTS
    assert sock["writes"]["calls"] == client["writes"]
    assert sock["writes"]["bytes"] == client["sent"] == REQUESTS * (16 + BODY)
    assert sock["reads"]["bytes"] == client["received"]
    assert sock["bursts"]["count"] == REQUESTS and sock["turns"]["count"] == REQUESTS
    served = items(document, role="server")
    assert total(served, "reads", "bytes") == client["sent"]
    assert total(served, "writes", "bytes") == client["received"]

    (finding,) = findings(document, "large-write-tail")
    assert finding["severity"] == "high"
    assert finding["scope"]["role"] == "client" and finding["scope"]["pids"] == [client["pid"]]
    assert "a header then its body" in finding["why"]
    assert_no_alarm_above_info(document, expected={"large-write-tail"})


def check_pool(document, client):
    """The pool's connections are in the report, live, each counted once, with the exact counts."""
    pool = items(document, role="client", pid=client["pid"])
    assert total(pool, "connections") == POOL
    assert all(item["live"] for item in pool), pool
    assert total(pool, "writes", "calls") == client["writes"] == 2 * POOL * ROUNDS
    assert total(pool, "writes", "bytes") == client["sent"]
    assert total(pool, "reads", "bytes") == client["received"]
    assert total(pool, "bursts", "count") == POOL * ROUNDS
    # Two small writes a request with Nagle on: the body waits for the delayed ACK of the header.
    (finding,) = findings(document, "nagle-delayed-ack")
    assert finding["scope"]["pids"] == [client["pid"]]
    assert finding["scope"]["connections"] == POOL and finding["scope"]["affected_connections"] == POOL
    assert_no_alarm_above_info(document, expected={"nagle-delayed-ack"})


def test_pool_that_never_closes_is_reported_from_its_final_trace(tmp_path, framed_server):
    shim = observe(tmp_path)
    server = framed_server(shim)
    client = framed_client(shim, "pool", server.port, POOL, ROUNDS)
    server.stop(signal.SIGINT)
    (trace,) = traces_of(shim, client["pid"])
    assert trace["final"]
    check_pool(report(shim.traces), client)


def test_idle_pool_is_reported_from_a_snapshot_on_time(tmp_path, framed_server):
    """The pool idles in sleep after its work: the next snapshot (every second) must still come, with
    everything it did, though the pool makes no call the shim wraps; then it is killed."""
    shim = observe(tmp_path, interval=1)
    server = framed_server(shim)
    pool = subprocess.Popen([sys.executable, str(FRAMED), "pool", str(server.port), str(POOL), str(ROUNDS), "--idle"],
                            env=shim.env, stdout=subprocess.PIPE, text=True)
    try:
        client = json.loads(pool.stdout.readline())
        assert pool.stdout.readline() == "done\n"
        done = time.time_ns()

        def complete_snapshot():
            traces = traces_of(shim, client["pid"])
            return traces and traces[0]["written_unix_ns"] > done

        assert wait_for(complete_snapshot, timeout=4), "no snapshot within 4 s of --interval 1 while idle"
    finally:
        pool.kill()
        pool.wait(timeout=10)
    server.stop(signal.SIGINT)
    (trace,) = traces_of(shim, client["pid"])
    assert not trace["final"]
    check_pool(report(shim.traces), client)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_server_stopped_by_a_signal_keeps_its_trace(tmp_path, signum):
    """python3 -m http.server: SIGTERM kills it (default disposition), SIGINT ends it through Python's
    KeyboardInterrupt. Either way its trace holds every request curl made."""
    shim = observe(tmp_path)
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "index.html").write_bytes(b"x" * 10_000)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "-d",
                               str(tmp_path / "www"), str(port)], env=shim.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: listening(port), timeout=20)
        fetches = 5
        for _ in range(fetches):
            result = subprocess.run(["curl", "-sS", "--fail", "--noproxy", "*", "-o", "/dev/null",
                                     f"http://127.0.0.1:{port}/index.html"], env=shim.env,
                                    capture_output=True, text=True, timeout=30, check=False)
            assert result.returncode == 0, result.stderr
        server.send_signal(signum)
        returncode = server.wait(timeout=20)
    finally:
        server.kill()
        server.wait(timeout=10)
    # SIGTERM: the shim writes its trace, then the server dies of the same signal.
    assert returncode == (-signal.SIGTERM if signum == signal.SIGTERM else 0)
    (trace,) = traces_of(shim, server.pid)
    assert trace["final"]
    document = report(shim.traces)
    served = items(document, role="server", pid=server.pid)
    fetched = items(document, program="curl", role="client")
    assert total(served, "connections") == total(fetched, "connections") == fetches
    assert total(served, "reads", "bytes") == total(fetched, "writes", "bytes")
    assert total(served, "writes", "bytes") == total(fetched, "reads", "bytes")
    assert not any("no TCP call was intercepted" in warning for warning in document["warnings"])
    assert_no_alarm_above_info(document)


@pytest.fixture
def sink(tmp_path):
    """framed.py sink under the shim, stopped after the test."""
    servers = []

    def start(shim):
        proc, port = start_listening([sys.executable, str(FRAMED), "sink"], env=shim.env)
        servers.append(proc)
        return proc, port

    yield start
    for proc in servers:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=20)


def stream_report(tmp_path, sink, options, open_at_exit):
    """A Python sender streaming to the sink, closing its connection or exiting with it open."""
    shim = observe(tmp_path)
    server, port = sink(shim)
    client = framed_client(shim, "stream", port, *options, *(["--open"] if open_at_exit else []))
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=20)
    document = report(shim.traces)
    (sent,) = items(document, role="client", pid=client["pid"])
    assert sent["live"] == open_at_exit
    assert sent["writes"]["calls"] == client["writes"] and sent["writes"]["bytes"] == client["sent"]
    assert sent["reads"]["calls"] == 0
    assert total(items(document, role="server", pid=server.pid), "reads", "bytes") == client["sent"]
    return document, client


OPEN_OR_CLOSED = pytest.mark.parametrize("open_at_exit", [True, False], ids=["open-at-exit", "closed"])


@OPEN_OR_CLOSED
def test_stream_of_small_writes_with_nodelay(tmp_path, sink, open_at_exit):
    document, client = stream_report(tmp_path, sink, [2_000_000, 128, "--nodelay"], open_at_exit)
    assert client["writes"] == 2_000_000 // 128
    (finding,) = findings(document, "small-writes-nodelay")
    assert finding["scope"]["pids"] == [client["pid"]]
    assert_no_alarm_above_info(document, expected={"small-writes-nodelay"})


@OPEN_OR_CLOSED
def test_stream_limited_by_a_small_send_buffer(tmp_path, sink, open_at_exit):
    document, client = stream_report(tmp_path, sink, [2 * 1024 * 1024, 16 * 1024, "--sndbuf", 4096], open_at_exit)
    (finding,) = findings(document, "sndbuf-limited")
    assert finding["severity"] == "high" and finding["scope"]["pids"] == [client["pid"]]
    assert_no_alarm_above_info(document, expected={"sndbuf-limited"})
