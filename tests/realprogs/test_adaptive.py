"""Adaptive cork on a real one-write-per-request server: redis-server answers
each GET with one write, so adaptive cork passes every reply straight through
and makes no setsockopt per request (counted by strace); the fixed form corks
and uncorks every reply. The trace's adaptive counters say the same, and the report
expects no effect from the adaptive policies on redis."""
import json
import subprocess

from harness import free_port, listening, skip_unless_installed
from testlib import invoke, load_traces, policy_env, sockets, wait_for

skip_unless_installed("redis-server", "redis-benchmark", "redis-cli", "strace")

REQUESTS = 2000
CLIENTS = 2


def setsockopt_calls(strace_summary):
    """The setsockopt count of an `strace -c` summary (0 when none was made)."""
    for line in strace_summary.splitlines():
        fields = line.split()
        if fields and fields[-1] == "setsockopt":
            return int(fields[3])
    return 0


def run_redis_under(tmp_path, policy):
    """Runs redis-server under strace -c -f and the policy while redis-benchmark
    sends REQUESTS GETs; returns the setsockopt count and the server's traces."""
    tmp_path.mkdir()
    env, traces = policy_env(tmp_path, policy)
    port = free_port()
    summary = tmp_path / "strace.txt"
    server = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=setsockopt", "-o", str(summary),
                               "redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                               "--dir", str(tmp_path)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: listening(port), timeout=20), "redis-server did not listen"
        bench = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(REQUESTS),
                                "-c", str(CLIENTS), "-t", "get"], capture_output=True, text=True, timeout=60)
        assert bench.returncode == 0, bench.stdout + bench.stderr
        subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, timeout=20)
        server.wait(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return setsockopt_calls(summary.read_text()), load_traces(traces)


def server_counters(traces):
    return [s["policy"]["counters"] for t in traces.values() for s in sockets(t, "server") if "policy" in s]


def test_adaptive_cork_makes_no_setsockopt_per_request(tmp_path):
    adaptive_calls, traces = run_redis_under(tmp_path / "adaptive", "cork")
    observe_calls, _ = run_redis_under(tmp_path / "observe", "observe")
    fixed_calls, _ = run_redis_under(tmp_path / "fixed", "{cork: {adaptive: false}}")
    # redis's own calls (TCP_NODELAY and keepalive on each accepted
    # connection) are the same under observe; adaptive cork adds none.
    assert adaptive_calls == observe_calls, (adaptive_calls, observe_calls)
    assert observe_calls < REQUESTS // 20, observe_calls
    # The fixed form corks and uncorks each reply: about two per request.
    assert fixed_calls >= observe_calls + REQUESTS, (fixed_calls, observe_calls)
    counters = server_counters(traces)
    assert counters, "no server socket carries the policy"
    assert sum(c["corks"] for c in counters) == 0
    assert sum(c["adaptive"]["bursts_passed_single_write"] for c in counters) >= REQUESTS
    assert sum(c["adaptive"]["switches"] for c in counters) == 0
    # The report, on the observed run, expects no effect from adaptive cork or coalesce on redis.
    report = invoke("report", "--format", "json", tmp_path / "observe" / "traces")
    effects = [e for e in json.loads(report.stdout)["policy_effects"] if e["role"] == "server"]
    assert effects and all(e["effect"] == "none" and e["multi_write_bursts"] == 0 for e in effects), effects
    # Bursts are estimated once a socket samples its turns (TCPADVISE_TURNS_FIRST 64, then one in
    # TCPADVISE_TURNS_EVERY 64, weighted): within one block of 64 of the true count on each connection.
    assert sum(e["bursts"] for e in effects) >= REQUESTS - 64 * CLIENTS
