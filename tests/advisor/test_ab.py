"""The A/B report's logic on experiment blocks built here, and the CLI's
handling of bad input; the end-to-end runs are in tests/e2e/test_experiments.py
and tests/ab."""
import json
import math

import numpy as np
import pytest
import yaml
from scipy import stats

from tcpadvise import schemas
from tcpadvise.ab.experiment import (AB_REPORT_SCHEMA, Arm, Experiment, check_split, MIN_CONNECTIONS, build_ab_report, drawn_arm, experiment_config, half_width, parse_arms,
                          sequential)
from tcpadvise.errors import BadInputError
from tcpadvise.policy.config import check_config
from tcpadvise.trace.reader import Inputs, Trace
from testlib import invoke, shim_path

FIELDS = ["arm", "drawn", "live", "turns", "turn_p50_ns", "turn_mean_ns", "sent_to_reply_mean_ns", "bytes",
          "duration_ns", "calls", "errors", "data_segs_out", "local_addr", "local_port", "peer_addr", "peer_port"]
SEED = 5


def _ports_drawing(arm, weights, count, start=[20000]):
    """count local ports whose connection to 10.0.0.1:6379 draws arm with SEED."""
    ports = []
    while len(ports) < count:
        start[0] += 1
        if drawn_arm(SEED, weights, ("10.0.0.2", start[0]), ("10.0.0.1", 6379)) == arm:
            ports.append(start[0])
    return ports


def experiment_trace(turn_means_by_arm, name="trial", stopped=None, live=False, drawn=None):
    """A trace holding an experiment whose arm i's connections had the given mean turn
    times (ns), each drawn from its 4-tuple; drawn (arm name -> arm index) gives an
    arm's connections 4-tuples that draw another arm than the one their rows say."""
    arms, rows = [], []
    weights = [1] * len(turn_means_by_arm)
    for index, (arm, means) in enumerate(turn_means_by_arm.items()):
        arms.append({"name": arm, "weight": 1, "connections": len(means), "live_connections": len(means) if live else 0,
                     "drawn": len(means), "calls": 10 * len(means), "errors": 0,
                     "turn_ns": [[m * 0.9, m * 1.1, 4] for m in means], "stopped": arm == stopped,
                     **({"stop_reason": "turn p99 9x control's (bound 3x)"} if arm == stopped else {})})
        draws = (drawn or {}).get(arm, index)
        for m, port in zip(means, _ports_drawing(draws, weights, len(means))):
            rows.append([index, index, live, 4, m, m, m / 2, 1000, 10**8, 10, 0, 4, "10.0.0.2", port, "10.0.0.1",
                         6379])
    data = {"final": not live, "written_unix_ns": 1,
            "experiment": {"name": name, "seed": SEED, "assignment": "splitmix64-4tuple/1", "draws": len(rows),
                           "arms": arms, "connection_fields": FIELDS, "connections": rows, "connections_dropped": 0}}
    return Trace(path=f"/traces/{name}.json", data=data)


def report_of(*traces, **options):
    """The report on these traces, checked against its schema."""
    report = build_ab_report(Inputs(traces=list(traces), manifests=[], stale=[]), **options)
    assert not schemas.errors(AB_REPORT_SCHEMA, report)
    return report


def test_parse_arms():
    assert parse_arms("control=observe, treat=coalesce") == [("control", "observe"), ("treat", "coalesce")]
    for bad in ("control=observe", "control=observe,control=cork", "control,treat=cork", "=observe,t=cork",
                "c=observe,t=bogus", "c=observe,t=/tmp/x.yaml", "c:1=observe,t=cork"):
        with pytest.raises(BadInputError):
            parse_arms(bad)


@pytest.mark.skipif(not shim_path().exists(), reason="needs the config checker built beside the shim")
def test_experiment_config_is_accepted_by_the_shim(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))
    path = tmp_path / "ab.yaml"
    path.write_text(experiment_config(parse_arms("control=observe,treat=coalesce"), seed=42))
    check = check_config(path)
    assert check.ok and "experiment ab (seed 42)" in "\n".join(check.lines)
    assert schemas.errors("tcpadvise.config/1", yaml.safe_load(path.read_text())) == []


def test_clear_improvement_is_a_winner():
    rng_free = [40e6 + 1e5 * i for i in range(15)], [50e3 + 1e3 * i for i in range(15)]
    report = report_of(experiment_trace({"control": rng_free[0], "treat": rng_free[1]}))
    assert report["verdict"]["outcome"] == "winner" and report["verdict"]["winner"] == "treat"
    (c,) = report["comparisons"]
    assert c["ratio_cs"][0] < c["ratio"] < c["ratio_cs"][1] < 0.01 and c["always_valid_p"] < 0.001
    assert c["fixed_horizon"]["ci95_us"][1] < 0 and "fixed in advance" in c["fixed_horizon"]["note"]
    assert report["split"]["ok"] and not report["warnings"] and report["state"] == "finished"


def test_worse_arm_makes_control_the_winner():
    report = report_of(experiment_trace({"control": [1e6] * 10 + [1.1e6] * 10, "slow": [3e6] * 10 + [3.3e6] * 10}))
    assert report["verdict"]["winner"] == "control"


def test_small_differences_below_min_effect_are_no_difference():
    control = [1e6 + 1e4 * (i % 5) for i in range(200)]
    same = [1.01e6 + 1e4 * (i % 5) for i in range(200)]  # 1% slower: below the 5% of interest
    report = report_of(experiment_trace({"control": control, "same": same}))
    assert report["verdict"]["outcome"] == "no difference" and report["verdict"]["winner"] is None


def test_few_noisy_connections_are_not_enough_data():
    report = report_of(experiment_trace({"control": [1e6, 3e6, 0.5e6], "treat": [2e6, 0.8e6, 1.5e6]}))
    verdict = report["verdict"]
    assert verdict["outcome"] == "not enough data" and verdict["connections_needed"] >= MIN_CONNECTIONS


def test_arms_merge_across_processes_and_stops_are_shown():
    a = experiment_trace({"control": [1e6] * 6, "treat": [5e6] * 3}, stopped="treat")
    b = experiment_trace({"control": [1e6] * 6, "treat": [5e6] * 3})
    report = report_of(a, b)
    arms = {arm["name"]: arm for arm in report["arms"]}
    assert arms["control"]["connections"] == 12 and arms["treat"]["connections"] == 6
    assert arms["treat"]["stopped"] and arms["treat"]["stop_reasons"]


def test_several_experiments_need_a_choice():
    traces = (experiment_trace({"c": [1e6] * 3, "t": [1e6] * 3}, name="one"),
              experiment_trace({"c": [1e6] * 3, "t": [1e6] * 3}, name="two"))
    with pytest.raises(BadInputError, match="--experiment"):
        report_of(*traces)
    assert report_of(*traces, experiment="two")["experiment"] == "two"


@pytest.mark.skipif(not shim_path().exists(), reason="needs the built shim and its config checker")
def test_cli_record_ab_writes_the_experiment_and_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))
    out = tmp_path / "trial"
    result = invoke("record", "-o", str(out), "--ab", "control=observe,treat=cork", "--seed", "8",
                    "--", "true")
    assert result.exit_code == 0, result.output
    assert (out / "policy.yaml").read_text() == experiment_config(parse_arms("control=observe,treat=cork"), 8)
    assert json.loads((out / "record.json").read_text())["policy"] == str(out / "policy.yaml")


def test_cli_errors_are_one_line(tmp_path):
    empty = invoke("ab", "report", str(tmp_path))
    assert empty.exit_code == 2 and "Traceback" not in empty.output
    bad_ab = invoke("record", "-o", str(tmp_path / "o"), "--ab", "control=observe", "--", "true")
    assert bad_ab.exit_code == 2 and "at least two arms" in bad_ab.output
    both = invoke("record", "--ab", "a=observe,b=cork", "--policy", "cork", "--", "true")
    assert both.exit_code == 2 and "exclude each other" in both.output
    bad_seed = invoke("record", "-o", str(tmp_path / "s"), "--ab", "a=observe,b=cork", "--seed", "-1",
                      "--", "true")
    assert bad_seed.exit_code == 2 and not (tmp_path / "s").exists()


def test_draws_match_the_shims_definition():
    # The same cases as libtcpadvise/experiment_test.cc, 8 equal arms.
    cases = [(42, ("127.0.0.1", 40000), ("127.0.0.1", 6379), 1), (42, ("127.0.0.1", 6379), ("127.0.0.1", 40000), 1),
             (42, ("127.0.0.1", 40001), ("127.0.0.1", 6379), 3), (7, ("10.0.0.1", 5555), ("192.168.1.9", 80), 0),
             (7, ("::1", 40000), ("::1", 8080), 7), (99, ("2001:db8::5", 1234), ("fe80::1", 443), 6),
             (99, ("::ffff:127.0.0.1", 5000), ("::ffff:127.0.0.1", 80), 6), (0, ("0.0.0.0", 0), ("0.0.0.0", 0), 2)]
    for seed, local, peer, arm in cases:
        assert drawn_arm(seed, [1] * 8, local, peer) == arm


def test_the_draw_splits_a_fixed_population_by_the_weights():
    """The arms' shares over 20,000 connections of one client to one server (local ports 20000-39999, the
    kernel's order), weights 1:3: deterministic, so this never flakes and fails when the draw does not follow
    the weights. A uniform draw gives arm b 15,000 +- 61.2 (binomial sd); the bound, 5.4 sd, holds for a
    random population but with probability 6.7e-8 (this one: 14,935, -1.1 sd). Another seed draws another
    split: the two agree where a uniform draw of each agrees (0.625 of connections +- 5.4 sd: 12,500 +- 369;
    this one: 12,487), not everywhere."""
    ports = range(20000, 40000)
    seeds = [[drawn_arm(seed, [1, 3], ("127.0.0.1", port), ("127.0.0.1", 6379)) for port in ports]
             for seed in (99, 100)]
    assert abs(sum(seeds[0]) - 15000) <= 331
    assert abs(sum(a == b for a, b in zip(*seeds)) - 12500) <= 369
    # The report's split check on these draws: ok against the weights they were drawn with, not against others.
    def split(weights):
        arms = {"a": Arm("a", weights[0], drawn=len(ports) - sum(seeds[0])), "b": Arm("b", weights[1], drawn=sum(seeds[0]))}
        return check_split(Experiment("repeat", 99, arms=arms))
    assert split((1, 3))["ok"] and split((1, 3))["p_value"] > 0.05
    assert not split((1, 1))["ok"] and not split((1, 2))["ok"]


def test_live_rows_make_a_running_report():
    report = report_of(experiment_trace({"control": [40e6] * 12, "treat": [1e5] * 12}, live=True))
    assert report["state"] == "running" and report["live_connections"] == 24
    assert report["verdict"]["winner"] == "treat"


def test_a_split_off_the_weights_is_a_sample_ratio_mismatch():
    # 30 connections that all drew control, 5 treat, against equal weights.
    report = report_of(experiment_trace({"control": [1e6] * 30, "treat": [1e6] * 5}))
    assert not report["split"]["ok"] and report["split"]["p_value"] < 0.001
    assert any("sample ratio mismatch" in w for w in report["warnings"])
    balanced = report_of(experiment_trace({"control": [1e6] * 18, "treat": [1e6] * 15}))
    assert balanced["split"]["ok"] and balanced["split"]["p_value"] > 0.5


def test_an_empty_arm_is_a_warning():
    report = report_of(experiment_trace({"control": [1e6] * 10, "treat": []}))
    assert report["split"]["empty_arms"] == ["treat"] and not report["split"]["ok"]
    assert any("treat drew no connection out of 10" in w for w in report["warnings"])
    assert report["verdict"]["outcome"] == "not enough data"


def test_rows_whose_arm_is_not_their_draw_are_a_warning():
    # treat's rows say they drew treat, but their 4-tuples draw control.
    report = report_of(experiment_trace({"control": [1e6] * 10, "treat": [1e6] * 10}, drawn={"treat": 0}))
    assert any("10 connections' arms are not the ones their 4-tuples draw" in w for w in report["warnings"])


def test_the_confidence_sequence_narrows_with_information_and_covers_more_than_a_fixed_interval():
    widths = [half_width(i) for i in (10, 100, 1000, 10000)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.05
    # Wider than the fixed-horizon 95% interval at the same information: the price of looking at will.
    assert all(w > 1.96 / math.sqrt(i) for w, i in zip(widths, (10, 100, 1000, 10000)))


def test_looking_again_and_again_at_an_aa_experiment_keeps_the_error_rate():
    """200 A/A experiments, each looked at after every 20 connections per arm up to
    200: the confidence sequence names a difference in at most 5% of them (here
    far fewer), while a fixed-horizon t-test at every look does in many more."""
    rng = np.random.default_rng(1)
    control, arm = rng.normal(10, 0.5, (200, 200)), rng.normal(10, 0.5, (200, 200))
    looks = range(20, 201, 20)
    sequential_hits = sum(
        any(not (low <= 1 <= high) for low, high in (sequential(c[:n], a[:n])["ratio_cs"] for n in looks))
        for c, a in zip(control, arm))
    fixed = np.zeros(200, dtype=bool)
    for n in looks:
        fixed |= stats.ttest_ind(control[:, :n], arm[:, :n], axis=1).pvalue < 0.05
    assert sequential_hits <= 10
    assert fixed.sum() > 20 and fixed.sum() > 2 * sequential_hits
