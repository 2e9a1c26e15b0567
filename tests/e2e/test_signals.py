"""Servers stopped by a signal leave their final trace: a stop signal left at
its default disposition writes the trace, then the process dies of that very
signal (wait status, core dump of SIGQUIT); a program's own handler is left
alone and its exit writes the trace. Real servers: a Python epoll server,
redis-server (its own SIGTERM and SIGINT handlers) and nginx (master and
workers, SIGQUIT and SIGTERM)."""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testlib import load_traces, policy_env, prog, shim_env, sockets, start_listening, wait_for

SHAPES = [sys.executable, str(Path(__file__).with_name("shapes.py"))]
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "realprogs"


def echo_rounds(port, connections, rounds, size):
    """Opens connections to an echo server, each doing rounds round trips of
    size bytes; returns them open."""
    conns = []
    for _ in range(connections):
        conn = socket.create_connection(("127.0.0.1", port))
        for _ in range(rounds):
            conn.sendall(b"e" * size)
            got = 0
            while got < size:
                got += len(conn.recv(65536))
        conns.append(conn)
    return conns


def default_stop_signals():
    """A child's stop signals at their default disposition: one the test's
    own process ignores would be ignored by the child too (nohup ignores
    SIGHUP), and the shim watches only those left at the default."""
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def server_totals(trace):
    servers = sockets(trace, "server")
    return (sum(s["connections"] for s in servers), sum(s["reads"]["bytes"] for s in servers),
            sum(s["writes"]["bytes"] for s in servers))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_default_disposition_writes_the_trace_then_dies_of_the_signal(tmp_path, sig):
    """Python leaves SIGTERM and SIGHUP at the default; for SIGINT it raises
    KeyboardInterrupt, then ends by SIGINT at the default disposition."""
    proc, port = start_listening([*SHAPES, "server"], shim_env(tmp_path), preexec_fn=default_stop_signals)
    conns = echo_rounds(port, 3, 4, 100)
    conns.pop().close()
    time.sleep(0.2)  # the server sees that close (a call the signal interrupts is not counted)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == -sig, err
    (trace,) = load_traces(tmp_path).values()
    assert trace["final"] and trace["stop_signal"] == signal.Signals(sig).name[3:]
    assert server_totals(trace) == (3, 1200, 1200)
    live = [s for s in sockets(trace, "server") if s["open"]]
    if sig == signal.SIGINT:
        assert not live  # Python's finalization closed them before it re-raised SIGINT
    else:
        assert len(live) == 2 and all(s["reads"]["calls"] >= 4 and s["cookie"] > 0 for s in live)
    for conn in conns:
        conn.close()


def test_sigquit_keeps_its_core_dump(tmp_path):
    """SIGQUIT's default action dumps core: the shim's handler re-raises it
    at the default disposition, so the wait status says so."""
    if Path("/proc/sys/kernel/core_pattern").read_text().startswith("|"):
        pytest.skip("core dumps go to a helper program here (core_pattern), not a file")
    if "asan" in os.environ.get("TCPADVISE_PRELOAD_FIRST", ""):
        pytest.skip("AddressSanitizer turns core dumps off (disable_coredump)")
    out = tmp_path / "traces"
    out.mkdir()

    def allow_cores():
        default_stop_signals()
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    proc = subprocess.Popen([*SHAPES, "server"], env=shim_env(out), stdout=subprocess.PIPE, text=True,
                            cwd=tmp_path, preexec_fn=allow_cores)
    port = int(proc.stdout.readline().split()[1])
    conns = echo_rounds(port, 1, 2, 10)
    time.sleep(0.2)  # the server's last write returns (a call the signal interrupts is not counted)
    proc.send_signal(signal.SIGQUIT)
    _, status = os.waitpid(proc.pid, 0)
    proc.returncode = -signal.SIGQUIT  # reaped here; Popen must not wait again
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGQUIT
    assert os.WCOREDUMP(status)
    (trace,) = load_traces(out).values()
    assert trace["stop_signal"] == "QUIT" and server_totals(trace) == (1, 20, 20)
    for core in tmp_path.glob("core*"):
        core.unlink()
    conns[0].close()


def test_programs_own_handler_is_left_alone_and_its_exit_writes_the_trace(tmp_path):
    proc, port = start_listening([*SHAPES, "server", "--sigint-handler"], shim_env(tmp_path))
    conns = echo_rounds(port, 2, 3, 50)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err  # the handler's sys.exit(0)
    (trace,) = load_traces(tmp_path).values()
    assert trace["final"] and "stop_signal" not in trace
    assert server_totals(trace) == (2, 300, 300)
    for conn in conns:
        conn.close()


def test_program_sees_the_dispositions_it_set(tmp_path):
    """The shim's handler is invisible: the default reads back as SIG_DFL, a
    handler the program set reads back as its own, SIG_DFL set again is the
    shim's handler again (the next SIGTERM still writes a trace)."""
    script = """
import signal, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"q")
print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
handler = lambda *_: None
signal.signal(signal.SIGTERM, handler)
print(signal.getsignal(signal.SIGTERM) is handler, flush=True)
print(signal.signal(signal.SIGTERM, signal.SIG_DFL) is handler, flush=True)
print(signal.signal(signal.SIGTERM, signal.SIG_DFL) is signal.SIG_DFL, flush=True)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, flush=True)
signal.raise_signal(signal.SIGHUP)  # ignored: the program goes on
signal.raise_signal(signal.SIGTERM)
"""
    sink = socket.create_server(("127.0.0.1", 0))
    result = subprocess.run([sys.executable, "-c", script, str(sink.getsockname()[1])], env=shim_env(tmp_path),
                            capture_output=True, text=True, timeout=20)
    sink.close()
    assert result.stdout.split() == ["True"] * 5, result.stderr
    assert result.returncode == -signal.SIGTERM
    (trace,) = load_traces(tmp_path).values()
    assert trace["stop_signal"] == "TERM" and sockets(trace, "client")[0]["writes"]["bytes"] == 1


def resp_pings(port, connections, pings):
    """PINGs redis from plain sockets (not under the shim); returns them open."""
    conns = []
    for _ in range(connections):
        conn = socket.create_connection(("127.0.0.1", port))
        for _ in range(pings):
            conn.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                reply += conn.recv(64)
            assert reply == b"+PONG\r\n"
        conns.append(conn)
    return conns


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port):
    local = f"0100007F:{port:04X}"
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(fields[1] == local and fields[3] == "0A" for fields in (line.split() for line in lines))


def start_script(script, tmp_path, *args):
    port = free_port()
    out = tmp_path / "traces"
    out.mkdir()
    proc = subprocess.Popen([str(SCRIPTS / script), str(tmp_path / "run"), str(port), *map(str, args)],
                            env=shim_env(out), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    if not wait_for(lambda: proc.poll() is not None or listening(port), timeout=20) or proc.poll() is not None:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"{script} did not listen: {proc.communicate()[0]}")
    return proc, port, out


def stop_script(proc, sig):
    proc.send_signal(sig)
    try:
        output, _ = proc.communicate(timeout=20)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return output


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server not installed "
                    "(scripts/install-deps.sh installs it)")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_redis_stopped_by_its_own_handler_writes_the_trace(tmp_path, sig):
    proc, port, out = start_script("redis-server.sh", tmp_path)
    conns = resp_pings(port, 3, 5)
    conns.pop().close()
    output = stop_script(proc, sig)
    assert proc.returncode == 0, output  # redis's handler shuts down and exits 0
    (trace,) = load_traces(out).values()
    assert trace["final"] and "stop_signal" not in trace
    assert server_totals(trace) == (3, 3 * 5 * 14, 3 * 5 * 7)
    for conn in conns:
        conn.close()


@pytest.mark.skipif(shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin") is None,
                    reason="nginx not installed (scripts/install-deps.sh installs it)")
@pytest.mark.parametrize("sig", [signal.SIGQUIT, signal.SIGTERM])
def test_nginx_master_and_workers_stopped_write_their_traces(tmp_path, sig):
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "index.html").write_bytes(b"n" * 1000)
    proc, port, out = start_script("nginx.sh", tmp_path, docroot)
    request = b"GET /index.html HTTP/1.1\r\nHost: t\r\n\r\n"
    conns = []
    for _ in range(4):
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(request)
        reply = b""
        while not reply.endswith(b"n" * 1000):
            reply += conn.recv(65536)
        conns.append(conn)
    output = stop_script(proc, sig)
    assert proc.returncode == 0, output
    traces = load_traces(out).values()
    workers = [t for t in traces if t["ppid"] == proc.pid]
    assert workers and all(t["final"] and "stop_signal" not in t for t in workers)
    connections = sum(server_totals(t)[0] for t in workers)
    read = sum(server_totals(t)[1] for t in workers)
    assert connections == 4 and read == 4 * len(request)
    for conn in conns:
        conn.close()


def test_stop_signal_inside_the_shim_still_ends_the_process_with_its_trace(tmp_path):
    """churn opens and closes connections without pause: many SIGTERMs land
    while the shim holds its table's lock, and are handled as that section
    ends. Every run must die of SIGTERM within seconds, with a final trace
    whose counts add up (each connection wrote and read one byte)."""
    for run_number in range(12):
        out = tmp_path / str(run_number)
        out.mkdir()
        proc, _ = start_listening([prog("churn")], shim_env(out, interval=0.01))
        time.sleep(0.05 + 0.02 * run_number)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == -signal.SIGTERM, err
        (trace,) = load_traces(out).values()
        assert trace["final"] and trace["stop_signal"] == "TERM"
        clients = [s for s in sockets(trace, "client") if s["used"]]
        servers = [s for s in sockets(trace, "server") if s["used"]]
        written = sum(s["writes"]["bytes"] for s in clients)
        # A signal outside the shim's sections writes the trace at once: one that lands inside a
        # write's own counts (its call counted, its bytes not yet) leaves that write one call ahead
        # (CI's ASan run, session 18: 3,692 calls, 3,691 bytes).
        assert written > 0 and sum(s["writes"]["calls"] for s in clients) - written in (0, 1)
        # At most the last connection's byte is in flight when the signal lands.
        assert written - 1 <= sum(s["reads"]["bytes"] for s in servers) <= written


@pytest.mark.parametrize("kind", ["plain", "info"])
def test_a_program_that_longjmps_out_of_its_handler_keeps_its_policy(tmp_path, kind):
    """The shim runs the program's handlers through a trampoline that counts
    them (a hook inside one starts no thread: signals.h). A program that
    leaves its handler with siglongjmp, as shells and interpreters do, must
    not stay counted as inside it: its later bursts are held by the fixed
    coalesce policy (whose deadline thread starts at the first), every byte
    arrives in order, and sigaction reads back the program's own handler."""
    env, traces = policy_env(tmp_path, "{coalesce: {adaptive: false}}")
    result = subprocess.run([prog("sigjump"), kind], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["handler own", "done 400"]
    (trace,) = load_traces(traces).values()
    (client,) = sockets(trace, "client")
    assert client["policy"]["counters"]["bytes_held"] == 400
    plain = subprocess.run([prog("sigjump"), kind], capture_output=True, text=True, timeout=60)
    assert plain.stdout == result.stdout


def run_sigfork(env, *args):
    """Runs tests/progs/sigfork under env (None: without the shim); its pid, rounds and lost children,
    once it ended well, with at least 100 rounds and 100 forks and no warning."""
    program = subprocess.Popen([prog("sigfork"), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        stdout, stderr = program.communicate(timeout=60)
    finally:
        program.kill()
    assert program.returncode == 0, stderr
    done, rounds, _, forks, _, lost = stdout.split()
    assert done == "done" and int(rounds) > 100 and int(forks) > 100, stdout
    assert "tcpadvise: warning" not in stderr
    return program.pid, int(rounds), int(lost)


@pytest.mark.parametrize("policy", [None, "coalesce"])
def test_a_handler_that_forks_inside_a_hook_does_not_deadlock(tmp_path, policy):
    """A SIGALRM handler forks (async-signal-safe) every 300 us or so while the main loop runs TCP calls: the
    handler lands inside the shim's hooks, holding the socket table's lock or a socket's turn, where
    the shim's fork handlers would wait on it for ever (they did: the first run hung). They now take
    nothing, and the child keeps nothing its parent holds; the program ends as without the shim."""
    if policy:
        env, out = policy_env(tmp_path, policy)
    else:
        out = tmp_path / "out"
        out.mkdir()
        env = shim_env(out)
    pid, rounds, _ = run_sigfork(env)
    assert sum(s["writes"]["bytes"] for s in sockets(load_traces(out)[pid], "client")) == rounds


def test_a_child_forked_inside_a_hook_sends_what_its_policy_holds_at_exit(tmp_path):
    """`sigfork write`: the SIGALRM handler's child goes on when the handler returns, finishes its round, writes
    "ab" then "cd" (coalesce holds them) and leaves by exit(); the parent reads the child's connection to its
    end. A quarter of the children are forked inside the shim's hooks. Such a child lost the held bytes (its
    runtime was off, and exit flushed nothing: some 300 children in 1,200) and now and then died of SIGSEGV
    (the section it went on with found the table's memory zeroed by the fork). Every child's bytes arrive."""
    env, traces = policy_env(tmp_path, "{coalesce: {adaptive: false}}")
    for run_env in (env, None):
        pid, _, lost = run_sigfork(run_env, "write")
        assert lost == 0
        if run_env is not None:
            # The parent's trace alone: the children's, a thousand and more, take a minute to read.
            parent = json.loads((traces / f"sigfork.{pid}.json").read_text())
            assert sum(s["policy"]["counters"]["bytes_held"] for s in sockets(parent, "client")) > 0
