"""`tcpadvise bench servers` as a user runs it: real servers (redis, memcached,
nginx, PostgreSQL) under every policy, the multi-write clients, the tables,
the goals, the chart and the results' schema; and what it says when the
servers are not there."""

import json

import pytest
from tcpadvise import schemas
from tcpadvise.bench.render import goals, summary_text
from tcpadvise.bench.servers import SERVERS
from tcpadvise.bench.suites import ADAPTIVE, POLICIES, WRITEV
from testlib import invoke

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
        assert server["arms"]["baseline"]["vs_baseline"] == 1


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
        assert arms[WRITEV]["vs_writev"] == 1
        assert arms["coalesce"]["segments_per_round"] == pytest.approx(1, abs=0.2)


def test_results_follow_the_schema_and_the_text_shows_every_table(servers_run):
    result, results, out = servers_run
    assert schemas.errors(results["schema"], results) == []
    # A table's title wraps at the table's width: read the words.
    words = " ".join(result.stdout.split())
    for server in installed_servers():
        assert f"{server.title}; requests/s by the server's policy" in words
    assert "15 two-byte writes, then a 2-byte reply (seed 004): the client under each policy" in words
    assert "Against the goals" in result.stdout
    assert all(len(line) <= 100 and line == line.rstrip() for line in result.stdout.splitlines())
    assert (out / "plots" / "servers.png").stat().st_size > 10_000


def test_the_goal_lines_follow_the_figures(servers_run):
    _, results, _ = servers_run
    suite = results["suites"]["servers"]
    if not suite["servers"]:
        pytest.skip("no server installed")
    name = next(iter(suite["servers"]))
    changed = json.loads(json.dumps(results))
    arms = changed["suites"]["servers"]["servers"][name]["arms"]
    for policy in ADAPTIVE:
        arms[policy]["vs_baseline"] = 0.995
    assert f"{name}: adaptive cork 99.5% and coalesce 99.5% of the baseline's requests/s (medians); within 1%." in (
        goals(changed)
    )
    arms["cork"]["vs_baseline"] = 0.98
    assert any(line.startswith(f"{name}: adaptive cork 98.0%") and "cork not within 1%" in line
               for line in goals(changed))
    client = changed["suites"]["servers"]["clients"]["nagle"]["arms"]
    client["cork"]["vs_writev"], client["coalesce"]["vs_writev"] = 1.2, 1.01
    line = next(line for line in goals(changed) if line.startswith("nagle:"))
    assert "cork 1.2x and coalesce 1.01x" in line and line.endswith("cork not within 5%.")
    # Narrow, every figure still whole: tables become blocks.
    assert all(len(line) <= 60 for line in summary_text(changed, 60).splitlines() if not line.startswith("- "))


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
