"""Real servers and their load generators recorded without a policy, as a user
would record them: redis + redis-benchmark, nginx + wrk, memcached + memcslap,
PostgreSQL + pgbench (a prefork server) and a Node.js HTTP server and client.
Each case checks counts against what the programs say they did, and that the
report raises no alarm above info on these well-tuned programs."""
import json
import os
import pwd
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from findings import HERE, assert_no_alarm_above_info, items, observe, report, total
from harness import ForegroundServer, run_client
from testlib import load_represented, shim_env, start_listening

NODE_HTTP = HERE / "node_http.js"


def skip_unless(*programs):
    search_path = f"{os.environ.get('PATH', '')}:/usr/sbin"
    missing = [program for program in programs if shutil.which(program, path=search_path) is None]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (scripts/install-deps.sh installs them)")


@pytest.fixture
def shim(tmp_path):
    """Every process of these tests runs under the shim without a policy (conftest's `shim` runs each
    test under every policy; findings are about programs as they are)."""
    return observe(tmp_path)


def test_redis_benchmark(start_server, shim):
    skip_unless("redis-server", "redis-benchmark")
    requests, clients = 2000, 4
    redis = start_server("redis-server.sh")
    result = run_client(["redis-benchmark", "-h", "127.0.0.1", "-p", str(redis.port), "-q", "-n", str(requests),
                         "-c", str(clients), "-t", "set,get"], shim, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    redis.stop()
    document = report(shim.traces)
    benchmark = items(document, program="redis-benchmark", role="client")
    served = items(document, program="redis-server", role="server")
    # One connection per client per test, and one more redis-benchmark opens first to read the config:
    # every other write is one command of the two tests.
    connections = total(benchmark, "connections")
    extra = connections - 2 * clients
    assert extra in (0, 1, 2), connections
    assert total(benchmark, "writes", "calls") == 2 * requests + extra
    # One reply write per command, every byte of each side read by the other.
    assert total(served, "writes", "calls") == total(benchmark, "writes", "calls")
    assert total(served, "reads", "bytes") == total(benchmark, "writes", "bytes")
    assert total(served, "writes", "bytes") == total(benchmark, "reads", "bytes")
    assert total(served, "connections") == connections
    assert_no_alarm_above_info(document)


def test_nginx_wrk(start_server, shim, tmp_path):
    skip_unless("nginx", "wrk")
    docroot = tmp_path / "docroot"
    docroot.mkdir()
    (docroot / "index.html").write_bytes(b"w" * 4096)
    nginx = start_server("nginx.sh", docroot, log_name="error.log", bad_log_line=r"\[(error|crit|alert|emerg)\]")
    result = run_client(["wrk", "-t1", "-c4", "-d1s", f"http://127.0.0.1:{nginx.port}/index.html"], shim,
                        timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Socket errors" not in result.stdout and "Non-2xx" not in result.stdout, result.stdout
    completed = int(re.search(r"(\d+) requests in", result.stdout).group(1))
    nginx.stop()
    document = report(shim.traces)
    wrk = items(document, program="wrk", role="client")
    served = [item for item in items(document, role="server") if item["program"] == "nginx"]
    # nginx closes a keep-alive connection after 1000 requests (keepalive_requests) and wrk opens another.
    connections = total(wrk, "connections")
    assert connections == total(served, "connections") and connections >= 4
    # wrk counts the responses it read whole; one request a connection may still be in flight at its end.
    assert completed <= total(wrk, "writes", "calls") <= completed + connections
    assert total(served, "reads", "bytes") == total(wrk, "writes", "bytes")
    assert total(served, "writes", "bytes") >= total(wrk, "reads", "bytes") >= completed * 4096
    assert_no_alarm_above_info(document)


def test_memcached_memcslap(start_server, shim):
    skip_unless("memcached", "memcslap")
    executions, concurrency = 1000, 2
    memcached = start_server("memcached.sh")
    result = run_client(["memcslap", f"--servers=127.0.0.1:{memcached.port}", "--test=set",
                         f"--concurrency={concurrency}", f"--execute-number={executions}"], shim, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    memcached.stop()
    document = report(shim.traces)
    slap = items(document, program="memcslap", role="client")
    served = items(document, program="memcached", role="server")
    assert total(slap, "connections") == total(served, "connections") == concurrency
    # Every set is one request and one reply ("STORED\r\n").
    assert total(served, "reads", "bytes") == total(slap, "writes", "bytes")
    assert total(served, "writes", "bytes") == total(slap, "reads", "bytes") == concurrency * executions * 8
    assert_no_alarm_above_info(document)


@pytest.fixture
def postgres_dir():
    """A directory the postgres user owns, outside pytest's private tmp (which it cannot enter)."""
    skip_unless("pgbench")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")) and shutil.which("postgres") is None:
        pytest.skip("not installed: postgresql (scripts/install-deps.sh installs it)")
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("no 'postgres' user to run PostgreSQL as (root cannot): install Debian's postgresql")
    directory = Path(tempfile.mkdtemp(prefix="tcpadvise-pg-"))
    (directory / "traces").mkdir()
    if os.geteuid() == 0:
        for path in (directory, directory / "traces"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def run_pgbench(shim, postgres_dir, *options, before_stop=None, interval=None, **settings):
    """pgbench with options (after -i, under the client's shim) against a PostgreSQL under the shim
    with its traces in postgres_dir/traces (snapshots every `interval` seconds if given, the shim's
    other settings in the environment); the run's output and the server's shim. before_stop, if
    given, is called with the postmaster's pid once pgbench is done."""
    server_shim = type(shim)(shim_env(postgres_dir / "traces", interval, **settings), postgres_dir / "traces")
    postgres = ForegroundServer("postgres.sh", [], server_shim, postgres_dir / "server")
    connect = ["pgbench", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres"]
    try:
        init = run_client([*connect, "-i", "-s", "1", "-q", "postgres"], shim, timeout=120)
        assert init.returncode == 0, init.stdout + init.stderr
        result = run_client([*connect, *options, "postgres"], shim, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        if before_stop is not None:
            before_stop(postgres.proc.pid)
    finally:
        postgres.stop()
    return result, server_shim


def test_pgbench_prefork_counts_each_connection_once(shim, postgres_dir):
    """The postmaster accepts each connection and a forked backend serves it: both processes hold the
    socket, and the report must count it once."""
    clients, transactions = 2, 100
    result, server_shim = run_pgbench(shim, postgres_dir, "-S", "-c", str(clients), "-t", str(transactions))
    processed = int(re.search(r"number of transactions actually processed: (\d+)", result.stdout).group(1))
    assert processed == clients * transactions
    document = report(shim.traces, server_shim.traces)
    bench = items(document, program="pgbench", role="client")
    served = [item for item in items(document, role="server") if item["program"] in ("postgres", "postmaster")]
    assert total(bench, "connections") >= clients + 1
    assert total(served, "connections") == total(bench, "connections")
    assert total(served, "reads", "bytes") == total(bench, "writes", "bytes")
    assert total(served, "writes", "bytes") == total(bench, "reads", "bytes")
    assert_no_alarm_above_info(document)


def test_pgbench_connect_per_transaction_samples_first_writes_per_process_tree(shim, postgres_dir):
    """pgbench -C: a forked backend per connection. The backends share one count of the first writes
    they sampled, so after 16 connections' first writes most backends unwind none (a cold libunwind
    in each was about 7% of a connection's CPU time), and the server's sockets still name their
    call sites."""
    clients, transactions = 2, 40
    postmaster_maps = []
    _, server_shim = run_pgbench(shim, postgres_dir, "-S", "-C", "-n", "-c", str(clients),
                                 "-t", str(transactions),
                                 before_stop=lambda pid: postmaster_maps.append(Path(f"/proc/{pid}/maps").read_text()))
    # The postmaster accepts every connection and writes on none: libunwind, loaded where a write is
    # sampled, is not mapped in it (every backend's fork and exit would pay for its segments).
    assert "libtcpadvise" in postmaster_maps[0] and "libunwind" not in postmaster_maps[0]
    # Counted as the report counts them: a sampled backend's trace stands for its siblings that wrote
    # none (TCPADVISE_CHILD_TRACES_EVERY), its counts theirs added.
    backends = [trace for trace in load_represented(server_shim.traces).values()
                if trace["call_sites"]["mode"] == "sample"]
    assert sum(trace.get("represents", 1) for trace in backends) >= clients * transactions
    sampled = sum(trace["call_sites"]["sampled_writes"] for trace in backends)
    left = sum(trace["call_sites"]["left_to_tree"] for trace in backends)
    # 80 connections of about 4 first writes each: at most 16 connections' worth unwound (plus the
    # connections of pgbench -i and one in 1024 of the rest), the rest left to the tree.
    assert left > 2 * sampled, (sampled, left)
    served = [item for item in items(report(server_shim.traces), role="server")
              if item["program"] in ("postgres", "postmaster")]
    assert sum(len(item.get("call_sites", [])) for item in served) > 0


def test_pgbench_connect_per_transaction_backends_write_to_the_postmasters_spool(shim, postgres_dir):
    """pgbench -C: each backend's final trace is a record of the spool the postmaster mapped before it
    forked (no file a backend), a sample of them after the first 16 (TCPADVISE_CHILD_TRACES_EVERY),
    and the report on the directory counts every connection of pgbench's on the server's side, as it
    did with a file a backend; the bytes are the sample's, scaled."""
    clients, transactions = 2, 50
    _, server_shim = run_pgbench(shim, postgres_dir, "-S", "-C", "-n", "-c", str(clients), "-t", str(transactions))
    spools = list(server_shim.traces.glob("*.spool"))
    assert spools and all(path.stat().st_mode & 0o777 == 0o600 for path in spools)
    traces = load_represented(server_shim.traces)
    (postmaster,) = [pid for pid, trace in traces.items() if trace["ppid"] not in traces
                     and any(t["ppid"] == pid for t in traces.values())]
    files = {int(path.name.split(".")[-2]) for path in server_shim.traces.glob("*.json")}
    backends = [pid for pid, trace in traces.items() if trace["ppid"] == postmaster]
    # Every connection's backend, and pgbench -i's: in the spool, not in files; after the first 16,
    # one in 16 writes its trace, standing for the others (TCPADVISE_CHILD_TRACES_EVERY).
    assert sum(traces[pid].get("represents", 1) for pid in backends) >= clients * transactions
    assert len(backends) < clients * transactions / 2
    assert postmaster in files and not files & set(backends)
    assert all(path.name.startswith(("postgres.", "postmaster.")) and f".{postmaster}." in path.name
               for path in spools)
    document = report(shim.traces, server_shim.traces)
    bench = items(document, program="pgbench", role="client")
    served = [item for item in items(document, role="server") if item["program"] in ("postgres", "postmaster")]
    assert total(bench, "connections") >= clients * transactions
    assert total(served, "connections") == total(bench, "connections")
    assert abs(total(served, "reads", "bytes") - total(bench, "writes", "bytes")) < total(bench, "writes", "bytes") / 100


def test_pgbench_connect_per_transaction_with_every_backends_trace_counts_its_bytes_exactly(shim, postgres_dir):
    """TCPADVISE_CHILD_TRACES_EVERY=1: every backend writes its trace, none stands for another, and
    the server's side of the report is pgbench's to the byte."""
    _, server_shim = run_pgbench(shim, postgres_dir, "-S", "-C", "-n", "-c", "2", "-t", "20",
                                 TCPADVISE_CHILD_TRACES_EVERY="1")
    document = report(shim.traces, server_shim.traces)
    bench = items(document, program="pgbench", role="client")
    served = [item for item in items(document, role="server") if item["program"] in ("postgres", "postmaster")]
    assert total(served, "connections") == total(bench, "connections") >= 40
    assert total(served, "reads", "bytes") == total(bench, "writes", "bytes")
    assert not [item for item in served if "represents" in item]


def test_pgbench_connect_per_transaction_leaves_the_postmaster_single_threaded(shim, postgres_dir):
    """The postmaster hands each connection to a forked backend and closes its copy unused: the shim
    starts no snapshot thread in it, since glibc makes every fork of a process that ever started one a
    multi-threaded fork (its malloc, stdio and name service locks on both sides: some 10 page faults
    and 29 us a connection on bench/fork_echo.c). Its snapshots come from its own calls instead."""
    seen = {}

    def before_stop(pid):
        tasks = Path(f"/proc/{pid}/task")
        seen["threads"] = [(tasks / task / "comm").read_text().strip() for task in os.listdir(tasks)]
        seen["snapshot"] = json.loads((postgres_dir / "traces" / f"postgres.{pid}.json").read_text())

    _, server_shim = run_pgbench(shim, postgres_dir, "-S", "-C", "-n", "-c", "2", "-t", "150",
                                 before_stop=before_stop, interval=0.2)
    assert seen["threads"] and not [name for name in seen["threads"] if name.startswith("tcpadvise")]
    assert seen["snapshot"]["final"] is False
    accepted = sum(s["connections"] for s in seen["snapshot"]["sockets"] if s["role"] == "server")
    assert accepted >= 100, accepted
    # The backends' traces: in the spool, or files for those that lived past a snapshot.
    backends = [trace for trace in load_represented(server_shim.traces).values() if trace["program"] == "postgres"]
    assert sum(trace.get("represents", 1) for trace in backends) >= 300


def test_node_http_server_and_client(shim, tmp_path):
    skip_unless("node")
    requests = 200
    server, port = start_listening(["node", str(NODE_HTTP), "server", str(tmp_path / "access.log")], env=shim.env)
    try:
        result = run_client(["node", str(NODE_HTTP), "client", str(port), str(requests)], shim, timeout=60)
        assert result.returncode == 0, result.stderr
        client = json.loads(result.stdout)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=20) == 0
    finally:
        server.kill()
        server.communicate(timeout=10)
    assert client["requests"] == requests and client["received"] == 2000 * requests
    assert len((tmp_path / "access.log").read_text().splitlines()) == requests
    document = report(shim.traces)
    served = items(document, program="node", role="server")
    fetched = items(document, program="node", role="client")
    assert total(served, "connections") == total(fetched, "connections") == 1
    # One write a request and one a response: the server's log-file writes are no TCP writes.
    assert total(fetched, "writes", "calls") == total(served, "writes", "calls") == requests
    assert total(served, "reads", "bytes") == total(fetched, "writes", "bytes")
    assert total(served, "writes", "bytes") == total(fetched, "reads", "bytes")
    # Node's http turns Nagle off on both sides. libuv closes with a raw syscall the shim does not see:
    # the kernel's view of a socket must never be read from whatever the fd became (EBADF, or a file),
    # so an effective option is the socket's or unknown, never another's.
    for item in served + fetched:
        assert item["options_set"].get("TCP_NODELAY") == 1, item["options_set"]
        assert item["options"].get("nodelay") in (True, None), item["options"]
    assert not [warning for warning in document["warnings"] if "EBADF" in warning], document["warnings"]
    assert_no_alarm_above_info(document)
