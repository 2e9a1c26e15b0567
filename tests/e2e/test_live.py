"""Connections that never close, streams and grouping: every snapshot and the
final trace carry the live connections with their statistics so far, a
write-only stream open at exit counts its burst, a full send buffer shows in
what the shim itself sees, prefork servers name each connection by its
cookie in both processes, and closed connections that talk differently are
never folded into one group."""
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testlib import holds_only, load_traces, shim_env, sockets, start_listening, wait_for

SHAPES = [sys.executable, str(Path(__file__).with_name("shapes.py"))]


def echo_round(conn, payload):
    conn.sendall(payload)
    got = b""
    while len(got) < len(payload):
        got += conn.recv(65536)
    assert got == payload


def stop(proc):
    proc.terminate()
    proc.communicate(timeout=20)


def test_idle_epoll_server_gets_snapshots_on_time_with_its_open_connections(tmp_path):
    """A single-threaded server idle in epoll_wait with every connection open:
    snapshots still come every interval, each with every live connection."""
    proc, port = start_listening([*SHAPES, "server"], shim_env(tmp_path, interval=0.5))
    conns = []
    try:
        for i in range(300):
            conns.append(socket.create_connection(("127.0.0.1", port)))
            echo_round(conns[-1], b"x" * (i % 7 + 1))
        path = tmp_path / f"python3.{proc.pid}.json"
        echoed = sum(i % 7 + 1 for i in range(300))

        def idle_snapshot(after_ns=0):
            """The last snapshot, if written after after_ns with every echo counted: the shim counts a write
            once libc's returns, so the client can have its last echo before the server's shim counted it,
            and a snapshot written in between (a loaded machine makes that window long) lacks it."""
            if not path.exists():
                return None
            trace = json.loads(path.read_text())
            written = sum(s["writes"]["bytes"] for s in sockets(trace, "server"))
            return trace if trace["written_unix_ns"] > after_ns and written == echoed else None

        # From the first snapshot with every echo counted the server sits in epoll_wait, and nothing it calls
        # checks a clock: only the snapshot thread writes the next ones (without it there would be none).
        # Each is waited for (bounded), whatever the machine's load does to the thread's or the test's turn.
        snapshots = [wait_for(idle_snapshot, timeout=20)]
        assert snapshots[0], "no snapshot with every echo counted"
        for _ in range(3):
            snapshots.append(wait_for(lambda: idle_snapshot(snapshots[-1]["written_unix_ns"]), timeout=10))
            assert snapshots[-1], "no snapshot came while the server was idle"
        times = [trace["written_unix_ns"] for trace in snapshots]
        # The thread sleeps an interval (0.5 s) between two (the test may see only some of them).
        assert min(b - a for a, b in zip(times, times[1:])) >= 0.45e9, times
        for trace in snapshots:
            assert not trace["final"]
            live = sockets(trace, "server")
            assert len(live) == 300 and all(s["kind"] == "socket" and s["open"] and s["used"] for s in live)
            assert len({s["cookie"] for s in live}) == 300 and all(s["cookie"] > 0 for s in live)
            assert sum(s["reads"]["bytes"] for s in live) == echoed
            assert all(s["shape"] == "request-response" and s["turns"]["count"] == 0 for s in live)
    finally:
        for conn in conns:
            conn.close()
        stop(proc)
    (final,) = load_traces(tmp_path).values()
    assert final["final"] and final["stop_signal"] == "TERM"
    assert sum(s["connections"] for s in sockets(final, "server")) == 300


@pytest.mark.parametrize("end", ["exit", "close"])
def test_write_only_stream_counts_its_burst_open_or_closed(tmp_path, end):
    """1000 writes of 128 bytes with TCP_NODELAY and no read: one burst,
    whether the connection is still open at exit (os._exit) or closed."""
    sink = socket.create_server(("127.0.0.1", 0))
    port = sink.getsockname()[1]
    result = subprocess.run([*SHAPES, "stream", str(port), "1000", "128", "--nodelay", "--end", end],
                            env=shim_env(tmp_path), capture_output=True, text=True, timeout=30)
    sink.close()
    assert result.returncode == 0, result.stderr
    (trace,) = load_traces(tmp_path).values()
    assert trace["final"]
    (client,) = sockets(trace, "client")
    assert client["kind"] == ("socket" if end == "exit" else "group")
    assert client["open"] == (end == "exit") and client["cookie"] > 0
    assert client["shape"] == "write-only"
    assert client["writes"]["calls"] == 1000 and holds_only(client["writes"]["size"], 128, 1000)
    assert client["bursts"]["count"] == 1 and client["bursts"]["open"] == (end == "exit")
    assert holds_only(client["bursts"]["writes"], 1000, 1) and client["bursts"]["bytes"]["count"] == 1
    assert client["options"]["nodelay"] is True
    assert client["duration_ns"] > 0


def test_full_send_buffer_shows_in_partial_writes_eagain_and_queue(tmp_path):
    """A non-blocking stream with a 4 KB SO_SNDBUF to a peer that reads
    nothing: the trace's partial writes and EAGAIN refusals are the program's
    own counts, and the send queue is full at exit."""
    sink = socket.create_server(("127.0.0.1", 0))  # never accepts, never reads
    port = sink.getsockname()[1]
    result = subprocess.run([*SHAPES, "flood", str(port), "4096", "0.5"], env=shim_env(tmp_path),
                            capture_output=True, text=True, timeout=30)
    sink.close()
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    (trace,) = load_traces(tmp_path).values()
    (client,) = sockets(trace, "client")
    writes = client["writes"]
    assert writes["calls"] == counts["calls"] and writes["bytes"] == counts["bytes"]
    assert writes["partial"] == counts["partial"] >= 1
    assert writes["eagain"] == counts["eagain"] == client["errors"]["EAGAIN"] >= 1
    assert client["tcp_info"]["outq_bytes"] > 0
    assert client["options"]["sndbuf"] <= 16384
    assert client["bursts"]["count"] == 1 and client["bursts"]["open"]


def test_prefork_server_names_each_connection_by_cookie_in_both_processes(tmp_path):
    """The listener accepts and forks; the child serves and ends with _exit.
    The child's trace holds the connection (inherited, used), the parent's
    its unused copy, apart from any group of used ones, with the same cookie."""
    proc, port = start_listening([*SHAPES, "server", "--prefork"], shim_env(tmp_path))
    try:
        for size in (10, 20, 30):
            with socket.create_connection(("127.0.0.1", port)) as conn:
                echo_round(conn, b"p" * size)
        assert wait_for(lambda: len(load_traces(tmp_path)) >= 3, timeout=10)
    finally:
        stop(proc)
    traces = load_traces(tmp_path)
    parent = traces.pop(proc.pid)
    children = list(traces.values())
    assert len(children) == 3 and all(t["ppid"] == proc.pid and t["final"] for t in children)
    served = {}
    for child in children:
        (conn,) = sockets(child, "server")
        assert conn["inherited"] and conn["used"] and conn["connections"] == 1 and conn["cookie"] > 0
        served[conn["cookie"]] = conn["reads"]["bytes"]
    assert sorted(served.values()) == [10, 20, 30]
    copies = sockets(parent, "server")
    assert all(not s["used"] and s["shape"] == "unused" and not s["inherited"] for s in copies)
    assert sum(s["connections"] for s in copies) == 3
    assert sum(s["reads"]["calls"] + s["writes"]["calls"] for s in copies) == 0
    # A group of one keeps its cookie; the parent's copies fold into one group of three.
    assert all(s["cookie"] == 0 for s in copies if s["connections"] > 1)
    assert {s["cookie"] for s in copies if s["connections"] == 1} <= set(served)


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 not installed (scripts/install-deps.sh installs it)")
def test_iperf3_control_and_data_connections_stay_in_separate_groups(tmp_path):
    """iperf3's client makes a control connection (small request/response)
    and a data connection (128 KiB writes only) to one port: grouped apart,
    in the client's trace and in the server's."""
    port = socket.create_server(("127.0.0.1", 0))
    port_number = port.getsockname()[1]
    port.close()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port_number)], env=shim_env(tmp_path),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: subprocess.run(["ss", "-Htln", f"sport = :{port_number}"], capture_output=True,
                                               text=True).stdout.strip(), timeout=10)
        client = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port_number), "-n", "32M", "-J"],
                                env=shim_env(tmp_path), capture_output=True, text=True, timeout=30)
        assert client.returncode == 0, client.stderr
        server.wait(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    end = json.loads(client.stdout)["end"]
    sent, received = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
    assert sent == 32 << 20
    traces = load_traces(tmp_path)
    (client_trace,) = [t for pid, t in traces.items() if pid != server.pid]
    groups = sockets(client_trace, "client")
    assert len(groups) == 2 and all(g["connections"] == 1 for g in groups)
    by_shape = {g["shape"]: g for g in groups}
    assert set(by_shape) == {"write-only", "request-response"}
    data, control = by_shape["write-only"], by_shape["request-response"]
    # The data connection carries the test's bytes (and iperf3's 37-byte cookie).
    assert data["writes"]["bytes"] == sent + 37
    assert data["writes"]["size"]["max"] >= 65536 and control["writes"]["size"]["max"] < 4096
    assert data["cookie"] > 0 and control["cookie"] > 0 and data["cookie"] != control["cookie"]
    server_groups = {g["shape"]: g for g in sockets(traces[server.pid], "server")}
    assert set(server_groups) == {"read-only", "request-response"}
    # The server stops reading at the test's end: what it read is its own count.
    assert server_groups["read-only"]["reads"]["bytes"] == received + 37
