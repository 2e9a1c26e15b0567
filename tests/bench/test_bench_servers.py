"""`tcpadvise bench servers` as a user runs it: real servers (redis, memcached,
nginx, PostgreSQL) under every policy, the multi-write clients, the tables,
the goals, the chart and the results' schema; and what it says when the
servers are not there."""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from tcpadvise import schemas
from tcpadvise.bench.cgroup import CpuGroup, Hierarchy, cpu_accounting
from tcpadvise.bench.render import goals, servers_notes, summary_text
from tcpadvise.bench import servers as bench_servers
from tcpadvise.bench.servers import SERVERS, Redis
from tcpadvise.bench.suites import POLICIES, WRITEV
from testlib import assert_one_line_error, invoke, wait_for

free_port = bench_servers._free_port

from .conftest import TINY

# A delayed ACK holds Nagle's second write at least 40 ms; a round trip of a request sent whole takes well
# under a millisecond on loopback, even on this busy machine.
STALLED_US = 20_000
UNSTALLED_US = 5_000


@pytest.fixture(scope="module")
def servers_run(built, tmp_path_factory):
    """One real run of the servers suite: (CliRunner result, results document, output directory)."""
    out = tmp_path_factory.mktemp("servers")
    result = invoke(
        "bench", "servers", "--runs", "1", "--rounds", "20", "--seconds", "0.5", "-o", str(out / "servers.json"),
        "--plot", str(out / "plots"), env={**built, "COLUMNS": "100"},
    )
    assert result.exit_code == 0, result.output
    return result, json.loads((out / "servers.results.json").read_text()), out


def installed_servers():
    return [server for server in SERVERS if server.missing() is None]


def counting_cpu():
    """This machine's cgroup hierarchy for the servers' CPU time; the test is skipped without one."""
    accounting = cpu_accounting()
    if not isinstance(accounting, Hierarchy):
        pytest.skip(f"no CPU time per request here: {accounting}")
    return accounting


def test_the_servers_suite_runs_only_when_named(loopback_run):
    _, out = loopback_run
    results = json.loads((out / "calibration.results.json").read_text())
    assert "servers" not in results["suites"] and "servers" not in results["settings"]["suites"]
    assert "not run unless named" in invoke("bench", "--help").stdout


def test_every_installed_server_runs_under_every_policy(servers_run):
    _, results, _ = servers_run
    suite = results["suites"]["servers"]
    assert set(suite["servers"]) == {server.name for server in installed_servers()}
    for name, server in suite["servers"].items():
        assert list(server["arms"]) == list(POLICIES), name
        for policy, arm in server["arms"].items():
            assert arm["requests_per_s"]["runs"] == 1 and arm["requests_per_s"]["median"] > 0, (name, policy)
            # The shim ran where the arm says, and only there: its processes wrote their traces at exit.
            if POLICIES[policy] is None:
                assert arm["traces"] == [0], (name, policy)
            else:
                assert arm["traces"][0] >= 1, (name, policy)
        baseline = server["arms"]["baseline"]
        assert baseline["vs_baseline"] == baseline["vs_baseline_paired"]["median"] == 1


def test_every_server_run_has_its_cpu_time_per_request(servers_run):
    accounting = counting_cpu()
    _, results, _ = servers_run
    suite = results["suites"]["servers"]
    if not suite["servers"]:
        pytest.skip("no server installed")
    assert suite["cpu_source"] == accounting.source
    for name, server in suite["servers"].items():
        for policy, arm in server["arms"].items():
            cpu = arm["cpu_us_per_request"]
            assert cpu["runs"] == 1 and len(arm["requests"]) == 1 and arm["requests"][0] > 0, (name, policy)
            # More than nothing, less than the whole machine's two CPUs for the run's length a request.
            seconds = arm["requests"][0] / arm["requests_per_s"]["median"]
            assert 0 < cpu["median"] < os.cpu_count() * seconds * 1e6 / arm["requests"][0] * 2, (name, policy)
        assert server["arms"]["baseline"]["cpu_vs_baseline"] == 1
        assert server["arms"]["baseline"]["cpu_vs_baseline_paired"]["median"] == 1
        assert all(arm["cpu_vs_baseline"] > 0 and arm["cpu_vs_baseline_paired"]["median"] > 0
                   for arm in server["arms"].values())
    # Every group the runs made is gone.
    assert [path.name for path in accounting.directory.iterdir() if path.name.startswith("tcpadvise-bench-")] == []


def test_servers_that_are_missing_are_named_with_the_reason(servers_run):
    _, results, _ = servers_run
    missing = [server for server in SERVERS if server.missing() is not None]
    assert results["suites"]["servers"]["left_out"] == [
        f"servers: {server.name} left out, {server.missing()}" for server in missing
    ]


def test_the_policies_remove_the_multi_write_clients_stall(servers_run):
    _, results, _ = servers_run
    for name, client in results["suites"]["servers"]["clients"].items():
        arms = client["arms"]
        assert list(arms) == [*POLICIES, WRITEV]
        median = {policy: arm["round_trip_us"]["median"] for policy, arm in arms.items()}
        # Nagle holds the second write for the delayed ACK, with or without the shim watching.
        assert median["baseline"] > STALLED_US and median["observe"] > STALLED_US, (name, median)
        for policy in (WRITEV, "cork", "coalesce", "cork-fixed", "coalesce-fixed"):
            assert median[policy] < UNSTALLED_US, (name, policy, median)
        assert arms[WRITEV]["vs_writev"] == arms[WRITEV]["vs_writev_paired"]["median"] == 1
        # One run: the pairing is that run's own median over the writev run's.
        assert arms["coalesce"]["vs_writev_paired"]["median"] == pytest.approx(arms["coalesce"]["vs_writev"])
        assert arms["coalesce"]["segments_per_round"] == pytest.approx(1, abs=0.2)


def test_results_follow_the_schema_and_the_text_shows_every_table(servers_run):
    result, results, out = servers_run
    assert schemas.errors(results["schema"], results) == []
    # A table's title wraps at the table's width: read the words.
    words = " ".join(result.stdout.split())
    for server in installed_servers():
        assert (f"{server.name}: {server.title}; requests/s and the server's CPU time per request by the server's "
                "policy, 1 run each") in words
    if installed_servers():
        # As a table, or as a block per row where the table is wider than the 100 columns.
        header = next(line for line in result.stdout.splitlines() if "requests/s [95% CI]" in line)
        if "┃" in header:
            assert [cell.strip() for cell in header.split("┃")[1:-1]] == [
                "policy", "requests/s [95% CI]", "of baseline [95% CI]", "CPU/request [95% CI]",
                "CPU/request of baseline [95% CI]"]
        else:
            assert "  CPU/request [95% CI]  " in result.stdout
            assert "  CPU/request of baseline [95% CI]  " in result.stdout
        assert "Reading the servers' figures" in result.stdout
        assert "CPU/request: the CPU time the server's whole process tree spent while the client ran" in words
        assert ("is the figure to read against a 1% goal: with fewer than 6 runs an arm there is no 95% interval "
                "to say how finely it resolves a difference") in words
    assert ("nagle: 15 two-byte writes, then a 2-byte reply (seed 004): the client under each policy, and as one "
            "writev, 1 run each") in words
    # Without --case every case runs, once here.
    assert suite_cases(results) == ({server.name: 1 for server in installed_servers()}
                                    | {"nagle": 1, "header-body": 1})
    assert "Against the goals" in result.stdout
    # One run an arm: the servers' figures without an interval, and every goal not resolved.
    servers_text = result.stdout.split("15 two-byte writes")[0]
    assert not re.search(r"\b([\d,.]+) \[\1-\1\]", servers_text) and "[95% CI]" in servers_text
    suite = results["suites"]["servers"]
    verdicts = suite["goals"]["verdicts"]
    assert set(verdicts["servers"]) == set(suite["servers"]) and set(verdicts["clients"]) == set(suite["clients"])
    assert {verdict for by_figure in (*verdicts["servers"].values(), *verdicts["clients"].values())
            for by_policy in by_figure.values() for verdict in by_policy.values()} <= {"not resolved"}
    assert all(len(line) <= 100 and line == line.rstrip() for line in result.stdout.splitlines())
    assert (out / "plots" / "servers.png").stat().st_size > 10_000


def set_interval(paired: dict, low: float, median: float, high: float) -> None:
    """A paired ratio as seven runs would give it (the lowest to the highest: 98.4%)."""
    paired.update(ci_low=low, median=median, ci_high=high, runs=7, confidence=1 - 2 / 2**7)


def test_the_goal_lines_follow_the_figures(servers_run):
    _, results, _ = servers_run
    suite = results["suites"]["servers"]
    if not suite["servers"]:
        pytest.skip("no server installed")
    name = next(iter(suite["servers"]))
    changed = json.loads(json.dumps(results))
    arms = changed["suites"]["servers"]["servers"][name]["arms"]
    # One run an arm: no interval, no verdict.
    assert goals(changed)[0].endswith("cork and coalesce not resolved at 1%.")
    # The verdict reads the interval of the runs' ratios to the baseline's: inside the goal, beyond it, across it.
    set_interval(arms["cork"]["vs_baseline_paired"], 0.992, 0.995, 1.01)
    set_interval(arms["coalesce"]["vs_baseline_paired"], 0.97, 0.98, 0.985)
    assert goals(changed)[0] == (
        f"{name}: adaptive cork 99.5% [99.2-101.0%] and coalesce 98.0% [97.0-98.5%] of the baseline's requests/s "
        "(each run against the baseline's run of its round: median [95% CI]); cork within 1%; coalesce not within 1%.")
    arms["coalesce"]["vs_baseline_paired"]["ci_high"] = 0.995
    assert goals(changed)[0].endswith("cork within 1%; coalesce not resolved at 1%.")
    if changed["suites"]["servers"]["cpu_source"] is not None:
        for policy, (low, median, high) in (("cork", (0.998, 1.004, 1.009)), ("coalesce", (1.012, 1.02, 1.03))):
            set_interval(arms[policy]["cpu_vs_baseline_paired"], low, median, high)
        line = next(line for line in goals(changed) if "CPU time per request" in line)
        assert line == (f"{name}: adaptive cork 100.4% [99.8-100.9%] and coalesce 102.0% [101.2-103.0%] of the "
                        "baseline's CPU time per request (each run against the baseline's run of its round: median "
                        "[95% CI]); cork within 1%; coalesce not within 1%.")
        arms["coalesce"]["cpu_vs_baseline_paired"]["ci_low"] = 1.005
        assert next(line for line in goals(changed) if "CPU time per request" in line).endswith(
            "cork within 1%; coalesce not resolved at 1%.")
    client = changed["suites"]["servers"]["clients"]["nagle"]["arms"]
    set_interval(client["cork"]["vs_writev_paired"], 1.15, 1.2, 1.25)
    set_interval(client["coalesce"]["vs_writev_paired"], 1.0, 1.01, 1.02)
    line = next(line for line in goals(changed) if line.startswith("nagle:"))
    assert "cork 1.200x [1.150-1.250x] and coalesce 1.010x [1.000-1.020x]" in line
    assert line.endswith("coalesce within 5%; cork not within 5%.")
    # Narrow, every figure still whole: tables become blocks.
    assert all(len(line) <= 60 for line in summary_text(changed, 60).splitlines() if not line.startswith("- "))


def test_without_a_cgroup_the_cpu_column_is_left_out_and_the_reason_said(servers_run):
    _, results, _ = servers_run
    if not results["suites"]["servers"]["servers"]:
        pytest.skip("no server installed")
    # The document a run writes where no cgroup can be made (bench.suites.Servers): no source, no figures.
    changed = json.loads(json.dumps(results))
    suite = changed["suites"]["servers"]
    suite["cpu_source"] = None
    reason = "servers: CPU time per request left out, cannot make a cgroup to count the servers' CPU time: ..."
    suite["left_out"].append(reason)
    for server in suite["servers"].values():
        for arm in server["arms"].values():
            arm["cpu_us_per_request"] = arm["cpu_vs_baseline"] = arm["cpu_vs_baseline_paired"] = None
    assert schemas.errors(changed["schema"], changed) == []
    text = summary_text(changed, 100)
    assert "CPU/request" not in text and not any("CPU/request" in line for line in servers_notes(changed))
    assert goals(changed)[-1] == reason and not any("baseline's CPU time per request" in line for line in goals(changed))


def test_without_the_servers_the_clients_still_run(built, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    # No load client on PATH (nginx and PostgreSQL's server are found outside it, their clients are not):
    # every server is left out, and the loadgen, named by its variable, still runs the clients.
    result = invoke("bench", "servers", *TINY, "-o", str(tmp_path / "s.json"), env={**built, "PATH": str(empty)})
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "s.results.json").read_text())["suites"]["servers"]
    assert results["servers"] == {}
    assert {line.split(" left out")[0] for line in results["left_out"]} == {f"servers: {s.name}" for s in SERVERS}
    assert set(results["clients"]) == {"nagle", "header-body"}


def suite_cases(results: dict) -> dict[str, int]:
    return results["suites"]["servers"]["cases"]


@pytest.mark.parametrize(("args", "fragment"), [
    (["servers", "--case", "redsi"],
     "--case redsi: 'redsi' is not a case of the servers suite; the cases: redis, memcached, nginx, postgres, nagle, "
     "header-body"),
    (["servers", "--case", "nagle=0"], "--case nagle=0: RUNS must be a whole number of at least 1"),
    (["servers", "--case", "nagle=many"], "--case nagle=many: RUNS must be a whole number of at least 1"),
    (["nagle", "--case", "redis"], "--case chooses among the servers suite's cases: name the suite too"),
])
def test_a_case_that_is_not_one_is_a_one_line_error_naming_the_cases(args, fragment):
    assert_one_line_error(invoke("bench", *args), 2, fragment)


def test_help_teaches_the_cases():
    words = " ".join(invoke("bench", "--help").stdout.split())
    assert "tcpadvise bench servers --case redis --case nagle=31 --runs 11" in words
    assert "The cases: redis, memcached, nginx, postgres, nagle, header-body." in words


def test_only_the_cases_named_run_each_as_often_as_asked(built, tmp_path):
    """--case redis --case nagle=3 with --runs 2: redis (if installed) twice an arm, the nagle client three times,
    nothing else; the results, the tables and the goal lines say so, by the names --case takes."""
    result = invoke("bench", "servers", *TINY, "--case", "nagle=3", "--case", "redis", "-o", tmp_path / "s.json",
                    env={**built, "COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "s.results.json").read_text())
    assert schemas.errors(results["schema"], results) == []
    suite = results["suites"]["servers"]
    redis = Redis().missing() is None
    assert results["settings"]["cases"] == {"nagle": 3, "redis": 2}
    assert suite_cases(results) == ({"redis": 2} if redis else {}) | {"nagle": 3}
    assert list(suite["clients"]) == ["nagle"] and list(suite["servers"]) == (["redis"] if redis else [])
    assert {arm["round_trip_us"]["runs"] for arm in suite["clients"]["nagle"]["arms"].values()} == {3}
    assert suite["clients"]["nagle"]["arms"]["cork"]["vs_writev_paired"]["runs"] == 3
    # Only the named servers are said left out.
    assert all(line.startswith("servers: redis ") or "CPU time" in line for line in suite["left_out"])
    words = " ".join(result.stdout.split())
    assert "nagle: 15 two-byte writes, then a 2-byte reply (seed 004): the client under each policy, and as one " \
        "writev, 3 runs each" in words
    assert "header-body" not in result.stdout and "memcached" not in result.stdout
    if redis:
        assert {len(arm["requests"]) for arm in suite["servers"]["redis"]["arms"].values()} == {2}
        assert f"redis: {Redis().title}; requests/s" in words and "2 runs each" in words
        assert "- redis: adaptive cork" in result.stdout
    assert "- nagle: adaptive cork" in result.stdout


def test_a_killed_bench_s_cgroup_is_removed_at_the_start_and_said(built, tmp_path):
    accounting = counting_cpu()
    if Redis().missing():
        pytest.skip(f"redis: {Redis().missing()}")
    # What a bench killed by SIGKILL leaves: its group, made as every run's is, that counted a server which
    # exited since, made two hours ago.
    left = CpuGroup(accounting)
    subprocess.run([*left.launcher, "true"], check=True, timeout=30)
    past = time.time() - 7200
    os.utime(left.path, (past, past))
    # redis alone (the other servers' clients are not on this PATH), one short run an arm.
    path = tmp_path / "bin"
    path.mkdir()
    for program in ("redis-server", "redis-benchmark", "taskset"):
        if found := shutil.which(program):
            (path / program).symlink_to(found)
    try:
        result = invoke("bench", "servers", *TINY, "-o", str(tmp_path / "s.json"), env={**built, "PATH": str(path)})
    finally:
        with contextlib.suppress(FileNotFoundError):
            left.path.rmdir()
    assert result.exit_code == 0, result.output
    # One line, wrapped at the console's width: read the words.
    words = " ".join(result.output.split())
    said = (f"tcpadvise: servers: removed 1 empty cgroup a killed bench left in {accounting.directory}: "
            f"{left.path.name} ")
    assert words.count(said) == 1 and words.count("empty cgroup a killed bench") == 1, result.output
    assert not left.path.exists()
    assert list(json.loads((tmp_path / "s.results.json").read_text())["suites"]["servers"]["servers"]) == ["redis"]


@pytest.mark.parametrize("server", SERVERS, ids=lambda server: server.name)
def test_a_server_whose_port_was_taken_starts_again_on_another(server, monkeypatch):
    """Another program may take the probed port before the server binds it (a client's connection bound to it,
    as the port probe of another bench): the server fails to bind, is started again on a new port, and
    answers there."""
    if (reason := server.missing()) is not None:
        pytest.skip(reason)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        ports = iter([taken.getsockname()[1]])
        monkeypatch.setattr(bench_servers, "_free_port", lambda: next(ports, None) or free_port())
        with tempfile.TemporaryDirectory(prefix="tcpadvise-bench-") as scratch, \
                bench_servers.running(server, bench_servers._prepared(server, Path(scratch)), None, None) as port:
            assert port != taken.getsockname()[1] and server.ready(port)


def test_servers_listen_below_the_ephemeral_ports():
    """The clients' outgoing connections get their local ports from the ephemeral range: a server port
    there could be taken by one of them between the probe and the server's bind."""
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    assert all(free_port() < low for _ in range(50))


def _descendants(root: int) -> dict[int, str]:
    """Every live process under `root` (pid: command line), read from /proc."""
    parents, commands = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            # Both read before either is kept: a process that exits between the two reads is not listed.
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parents[int(entry.name)], commands[int(entry.name)] = int(fields[1]), command
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = commands[pid]
                frontier.append(pid)
    return found


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie, killed and not reaped yet, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _ours(pid: int) -> list[Path]:
    """The directories a bench of process `pid` made: its scratch and its server runs' traces."""
    return [*sorted(Path(tempfile.gettempdir()).glob(f"tcpadvise-bench-{pid}-*")),
            *sorted(Path("/dev/shm").glob(f"tcpadvise-traces-{pid}-*"))]


@pytest.mark.parametrize("case", ["redis", "nginx", "postgres"])
def test_a_bench_killed_by_sigkill_takes_its_servers_along_and_the_next_removes_what_it_left(case, built, tmp_path):
    """SIGKILL skips every cleanup: the kernel kills what the bench started (the server, each of the processes
    it forked, the client, the far end) as the bench dies, and the next bench removes its directories and its
    cgroup at its start, in one line each."""
    server = next(server for server in SERVERS if server.name == case)
    if (reason := server.missing()) is not None:
        pytest.skip(reason)
    environment = {**os.environ, **built, "PYTHONPATH": str(Path(__file__).parents[2] / "advisor")}
    bench = subprocess.Popen(
        [sys.executable, "-m", "tcpadvise", "bench", "servers", "--case", case, "--runs", "50", "--rounds", "5",
         "--seconds", "2", "-o", tmp_path / "killed.json"],
        env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree, groups, left = {}, set(), []
    try:
        # A server under load: its traces directory made, the client running (PostgreSQL first runs initdb).
        def loaded():
            tree = _descendants(bench.pid)
            traced = any(path.name.startswith("tcpadvise-traces-") for path in _ours(bench.pid))
            return tree if traced and any(server.client(0, 1)[0] in command for command in tree.values()) else None
        tree = wait_for(loaded, timeout=180)
        assert tree, f"the bench's {case} never ran under load"
        if case != "redis":
            # nginx's master and worker, PostgreSQL's postmaster and its background processes.
            assert sum(1 for command in tree.values() if case in command) >= 2, tree
        groups = {name for pid in tree for name in _bench_groups(pid)}
        left = _ours(bench.pid)
    finally:
        bench.kill()
        bench.wait()
    try:
        assert wait_for(lambda: not any(_alive(pid) for pid in tree), timeout=15), \
            {pid: command for pid, command in tree.items() if _alive(pid)}
        assert left and all(path.exists() for path in left)
        _the_next_bench_removes(left, groups, built, tmp_path)
    finally:
        for path in left:
            shutil.rmtree(path, ignore_errors=True)


def _the_next_bench_removes(left: list[Path], groups: set[str], built: dict, tmp_path: Path) -> None:
    # A minute old, as a killed bench's leftovers are when the next bench starts.
    past = time.time() - 120
    for path in left:
        os.utime(path, (past, past))
    result = invoke("bench", "servers", "--case", "nagle", "--runs", "1", "--rounds", "5",
                    "-o", tmp_path / "next.json", env=built)
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    said = f"tcpadvise: removed {len(left)} directories a killed bench left: {', '.join(str(p) for p in left)}"
    assert said in words, result.output
    assert not any(path.exists() for path in left)
    if isinstance(accounting := cpu_accounting(), Hierarchy):
        # The server's group, empty now, stays until it is a minute old (another bench may have just made it).
        assert len(groups) == 1, groups
        group = accounting.directory / groups.pop()
        assert group.name not in words, result.output
        os.utime(group, (past, past))
        result = invoke("bench", "servers", "--case", "nagle", "--runs", "1", "--rounds", "5",
                        "-o", tmp_path / "after.json", env=built)
        words = " ".join(result.output.split())
        assert (f"servers: removed 1 empty cgroup a killed bench left in {accounting.directory}: {group.name}"
                in words), result.output
        assert not group.exists()


def _bench_groups(pid: int) -> set[str]:
    """The names of the bench cgroups process `pid` is in."""
    with contextlib.suppress(OSError):
        return {part for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                for part in line.rsplit(":", 1)[-1].split("/") if part.startswith("tcpadvise-bench-")}
    return set()


def _cpus_allowed(pid: int) -> str | None:
    with contextlib.suppress(OSError, StopIteration):
        return next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("Cpus_allowed_list:"))
    return None


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="--pin split needs two CPUs")
def test_pin_split_runs_the_server_and_its_client_each_on_its_own_cpu(built, tmp_path):
    """--pin split: redis on the first CPU this process may use, redis-benchmark on the next, as the processes
    themselves say while they run; the results say so."""
    if (reason := Redis().missing()) is not None:
        pytest.skip(reason)
    first, second = sorted(os.sched_getaffinity(0))[:2]
    environment = {**os.environ, **built, "PYTHONPATH": str(Path(__file__).parents[2] / "advisor")}
    bench = subprocess.Popen(
        [sys.executable, "-m", "tcpadvise", "bench", "servers", "--case", "redis", "--pin", "split", "--runs", "1",
         "--seconds", "1", "-o", tmp_path / "s.json"], env=environment, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    seen: dict[str, set[str]] = {"redis-server": set(), "redis-benchmark": set()}
    while bench.poll() is None:
        for pid, command in _descendants(bench.pid).items():
            program = next((name for name in seen if command.startswith(name)), None)
            if program and (cpus := _cpus_allowed(pid)):
                seen[program].add(cpus)
        time.sleep(0.02)
    assert bench.wait() == 0, bench.stderr.read()
    assert seen == {"redis-server": {str(first)}, "redis-benchmark": {str(second)}}, seen
    results = json.loads((tmp_path / "s.results.json").read_text())
    assert results["settings"]["pin"] == "split"
    assert results["suites"]["servers"]["pin"] == f"each server on CPU {first}, its client on CPU {second} (--pin split)"


def test_a_server_s_warm_up_runs_before_its_measured_window_and_a_failed_one_is_said(tmp_path):
    """What a server pays once after its start is no request's cost (under the shim a fork server's first
    16 children each write a trace and sample their call sites): its warm-up client runs once the server
    answers, before the window the client's run is measured in; a warm-up that fails stops the run with a
    one-line error that names it. Here the warm-up sets a key the measured client then reads."""
    if (reason := Redis().missing()) is not None:
        pytest.skip(reason)

    class Warmed(Redis):
        def warmup(self, port):
            return ["redis-cli", "-p", str(port), "set", "warmed", "yes"]

        def client(self, port, seconds):
            return ["redis-cli", "-p", str(port), "get", "warmed"]

        def rate(self, output):
            return 1.0 if output.strip() == "yes" else None

        def requests(self, output, command):
            return 1

    class FailedWarmUp(Warmed):
        def warmup(self, port):
            return ["redis-cli", "-p", "1", "ping"]  # a port nothing listens on

    arm = bench_servers.ServerArm("baseline", Warmed(), None, 0.1)
    assert bench_servers.run_server_arm(arm, None, tmp_path)["requests"] == 1
    with pytest.raises(bench_servers.BenchError,
                       match=r"^baseline: the warm-up redis-cli failed \(exit 1: Could not connect"):
        bench_servers.run_server_arm(bench_servers.ServerArm("baseline", FailedWarmUp(), None, 0.1), None, tmp_path)
