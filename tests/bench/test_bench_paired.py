"""The servers suite's paired ratios and the goal lines' verdicts, on constructed runs put through the real
analysis (bench.suites.Servers.analyze), statistics (bench.stats) and text (bench.render.goals): each run
against the reference arm's run of the same round, so that a load drifting from round to round cancels."""

import pytest
from tcpadvise.bench.render import goals
from tcpadvise.bench.run import NetworkPath
from tcpadvise.bench.stats import NOT_RESOLVED, NOT_WITHIN, WITHIN, summarize, verdict
from tcpadvise.bench.suites import POLICIES, WRITEV, Servers, Settings

LOOPBACK = NetworkPath("loopback", "loopback", "127.0.0.1:1")
ELSEWHERE = NetworkPath("target", "to the bench-server at h:1", "h:1")
# The machine's load in each of seven rounds: a reference run's figure moves 2.5-fold from round to round.
DRIFT = (1.0, 0.6, 1.5, 0.8, 1.2, 0.9, 1.1)


def paired(*ratios: float) -> dict:
    return summarize([[ratio] for ratio in ratios]).as_dict()


def test_a_verdict_reads_the_whole_interval():
    # A cost (CPU/request, a round trip): at most the limit.
    assert verdict(paired(0.998, 1.004, 1.009, 1.0, 1.005, 1.002, 1.001), 1.01, higher_is_worse=True) == WITHIN
    assert verdict(paired(1.012, 1.02, 1.03, 1.015, 1.025, 1.018, 1.011), 1.01, higher_is_worse=True) == NOT_WITHIN
    assert verdict(paired(1.005, 1.02, 1.03, 1.0, 1.025, 1.015, 1.01), 1.01, higher_is_worse=True) == NOT_RESOLVED
    # A rate (requests/s): at least the limit; faster than the baseline is within.
    assert verdict(paired(0.992, 1.0, 1.03, 0.995, 1.01, 0.999, 1.02), 0.99, higher_is_worse=False) == WITHIN
    assert verdict(paired(0.95, 0.97, 0.985, 0.96, 0.98, 0.955, 0.975), 0.99, higher_is_worse=False) == NOT_WITHIN
    assert verdict(paired(0.98, 1.0, 1.02, 0.97, 1.01, 0.99, 1.005), 0.99, higher_is_worse=False) == NOT_RESOLVED


def test_one_sample_a_run_gets_the_exact_interval_of_its_median():
    # Of 7 runs only the lowest to the highest covers 95% (98.4%); a bootstrap would give about the 2nd to
    # the 6th (87.5%) and call a goal met too early.
    seven = paired(1.004, 0.998, 1.009, 1.0, 1.012, 1.002, 1.001)
    assert (seven["ci_low"], seven["ci_high"]) == (0.998, 1.012)
    assert seven["confidence"] == pytest.approx(1 - 2 / 2**7)
    assert verdict(seven, 1.01, higher_is_worse=True) == NOT_RESOLVED
    # 21 runs: the 6th to the 16th value (97.3%).
    many = paired(*(1 + index / 1000 for index in range(21)))
    assert (many["ci_low"], many["ci_high"]) == (pytest.approx(1.005), pytest.approx(1.015))
    assert many["confidence"] == pytest.approx(0.9734, abs=1e-4)


def test_fewer_than_six_runs_never_resolve_a_goal():
    # Five runs all well within 1%: their range holds the median only 93.75% of the time.
    five = paired(0.998, 1.0, 1.001, 1.002, 0.999)
    assert five["confidence"] == pytest.approx(1 - 2 / 2**5)
    assert verdict(five, 1.01, higher_is_worse=True) == NOT_RESOLVED
    assert verdict(paired(0.998, 1.0, 1.001, 1.002, 0.999, 1.0), 1.01, higher_is_worse=True) == WITHIN


def test_without_an_interval_there_is_no_verdict():
    one_run = paired(1.3)
    assert (one_run["ci_low"], one_run["ci_high"]) == (1.3, 1.3)
    assert verdict(one_run, 1.01, higher_is_worse=True) == NOT_RESOLVED
    assert verdict(None, 0.99, higher_is_worse=False) == NOT_RESOLVED


def server_run(rate: float, cpu_us: float) -> dict:
    """A document as bench.servers.run_server_arm returns it: 2 s of requests at `rate`, `cpu_us` of the
    server's CPU time each."""
    requests = round(rate * 2)
    return {"requests_per_s": rate, "requests": requests, "cpu_ns": round(cpu_us * 1e3 * requests), "traces": 1}


def client_run(round_trip_us: float) -> dict:
    """A document as tcpadvise-loadgen prints it: two warm-up rounds of a second, then 20 round trips that
    scatter ±2% around `round_trip_us`."""
    rounds = [1e9, 1e9] + [round_trip_us * 1e3 * (0.98 + 0.002 * (index % 21)) for index in range(20)]
    point = {"request_bytes": 30, "writes": 15, "mss": 65483, "warmup": 2, "round_ns": rounds,
             "data_segs_out": 22, "total_retrans": 0}
    return {"near": {"points": [point]}, "far": {}}


def analyzed(path: NetworkPath, servers: dict[str, tuple[float, ...]], clients: dict[str, tuple[float, ...]]):
    """Servers.analyze of five rounds under DRIFT: each policy's figure is the reference's of its round times its
    own factor of the round (`servers`: requests/s, CPU/request = 1/that; `clients`: round trip); a policy not
    named runs as the reference."""
    suite = Servers()
    documents = {}
    for server in suite.servers(path):
        for policy in POLICIES:
            factors = servers.get(policy, (1,) * len(DRIFT))
            documents[f"{server.name}:{policy}"] = [
                server_run(50_000 * load * factor, 10 / load / factor) for load, factor in zip(DRIFT, factors)]
    for client in suite.clients:
        for policy in (*POLICIES, WRITEV):
            factors = clients.get(policy, (1,) * len(DRIFT))
            documents[f"{client.name}:{policy}"] = [client_run(14 * load * factor)
                                                   for load, factor in zip(DRIFT, factors)]
    result = suite.analyze(documents, Settings(runs=len(DRIFT)), path)
    return result, {"suites": {"servers": result}}


def test_the_clients_are_paired_with_the_writev_run_of_their_round():
    clients = {
        "cork": (1.2, 1.21, 1.19, 1.2, 1.2, 1.2, 1.2),
        "coalesce": (1.03, 1.03, 1.031, 1.029, 1.03, 1.03, 1.03),
        "baseline": (3000,) * 7,
        "observe": (3000,) * 7,
    }
    result, results = analyzed(ELSEWHERE, {}, clients)
    arms = result["clients"]["nagle"]["arms"]
    coalesce = arms["coalesce"]["vs_writev_paired"]
    assert coalesce["runs"] == 7 and coalesce["median"] == pytest.approx(1.03, abs=1e-3)
    assert 1.028 <= coalesce["ci_low"] <= coalesce["ci_high"] <= 1.032
    assert arms[WRITEV]["vs_writev_paired"]["median"] == 1
    # Unpaired, the drift makes every arm's round trip move 2.5-fold: its interval could not resolve 5%.
    trip = arms["coalesce"]["round_trip_us"]
    assert trip["ci_high"] / trip["ci_low"] > 1.3
    line = next(line for line in goals(results) if line.startswith("nagle:"))
    assert line.startswith("nagle: adaptive cork 1.200x [")
    assert "and coalesce 1.030x [1.0" in line and "baseline, no shim: 3,000x" in line
    assert line.endswith("coalesce within 5%; cork not within 5%.")
    # The results say the same verdicts to a machine.
    assert result["goals"]["verdicts"]["clients"]["nagle"] == {
        "round_trip_us": {"cork": NOT_WITHIN, "coalesce": WITHIN}}


def test_a_client_whose_rounds_straddle_the_goal_is_not_resolved():
    _, results = analyzed(ELSEWHERE, {}, {"coalesce": (1.0, 1.1, 1.0, 1.1, 1.02, 1.0, 1.1), "cork": (1.02,) * 7})
    line = next(line for line in goals(results) if line.startswith("header-body:"))
    assert line.endswith("cork within 5%; coalesce not resolved at 5%.")


def test_the_servers_requests_and_cpu_time_are_paired_with_the_baseline_run_of_their_round():
    servers = {
        # 0.5% slower in every round: within 1% however the load moves.
        "cork": (0.995, 0.996, 0.994, 0.995, 0.997, 0.995, 0.996),
        # 3% slower: beyond it.
        "coalesce": (0.97, 0.97, 0.971, 0.969, 0.97, 0.97, 0.97),
    }
    result, results = analyzed(LOOPBACK, servers, {})
    if not result["servers"]:
        pytest.skip("no server installed")
    name, server = next(iter(result["servers"].items()))
    cork = server["arms"]["cork"]
    assert cork["vs_baseline_paired"]["median"] == pytest.approx(0.995, abs=1e-3)
    assert 0.993 <= cork["vs_baseline_paired"]["ci_low"] <= cork["vs_baseline_paired"]["ci_high"] <= 0.998
    assert server["arms"]["baseline"]["vs_baseline_paired"]["median"] == 1
    # The figures the client and the cgroup gave, unpaired, spread with the load far beyond the goal.
    rate = cork["requests_per_s"]
    assert rate["ci_high"] / rate["ci_low"] > 1.3
    lines = [line for line in goals(results) if line.startswith(f"{name}:")]
    assert lines[0] == (f"{name}: adaptive cork 99.5% [99.4-99.7%] and coalesce 97.0% [96.9-97.1%] of the "
                        "baseline's requests/s (each run against the baseline's run of its round: median [95% CI]); "
                        "cork within 1%; coalesce not within 1%.")
    assert result["goals"]["verdicts"]["servers"][name]["requests_per_s"] == {"cork": WITHIN, "coalesce": NOT_WITHIN}
    if result["cpu_source"] is not None:
        # The CPU time a request is the reciprocal here: 100.5% and 103.1%.
        assert cork["cpu_vs_baseline_paired"]["median"] == pytest.approx(1 / 0.995, abs=1e-3)
        assert lines[1].endswith("cork within 1%; coalesce not within 1%.")
        assert "of the baseline's CPU time per request" in lines[1]
        assert result["goals"]["verdicts"]["servers"][name]["cpu_us_per_request"] == {
            "cork": WITHIN, "coalesce": NOT_WITHIN}
