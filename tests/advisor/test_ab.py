"""The A/B report's logic on experiment blocks built here, and the CLI's
handling of bad input; the end-to-end runs are in tests/e2e/test_experiments.py."""
import json

import pytest

from tcpadvise.ab import MIN_CONNECTIONS, build_ab_report, experiment_config, parse_arms
from tcpadvise.errors import BadInputError
from tcpadvise.policy import check_config
from tcpadvise.traces import Inputs, Trace
from testlib import invoke, shim_path

FIELDS = ["arm", "turns", "turn_p50_ns", "turn_mean_ns", "bytes", "duration_ns", "calls", "errors", "data_segs_out"]


def experiment_trace(turn_means_by_arm, name="trial", stopped=None):
    """A trace holding an experiment whose arm i's connections had the given mean turn times (ns)."""
    arms, rows = [], []
    for index, (arm, means) in enumerate(turn_means_by_arm.items()):
        arms.append({"name": arm, "weight": 1, "connections": len(means), "calls": 10 * len(means), "errors": 0,
                     "turn_ns": [[m * 0.9, m * 1.1, 4] for m in means], "stopped": arm == stopped,
                     **({"stop_reason": "turn p99 9x control's (bound 3x)"} if arm == stopped else {})})
        rows += [[index, 4, m, m, 1000, 10**8, 10, 0, 4] for m in means]
    data = {"experiment": {"name": name, "seed": 5, "draws": len(rows), "arms": arms, "connection_fields": FIELDS,
                           "connections": rows, "connections_dropped": 0}}
    return Trace(path=f"/traces/{name}.json", data=data)


def report_of(*traces, **options):
    return build_ab_report(Inputs(traces=list(traces), manifests=[], stale=[]), **options)


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


def test_clear_improvement_is_a_winner():
    rng_free = [40e6 + 1e5 * i for i in range(15)], [50e3 + 1e3 * i for i in range(15)]
    report = report_of(experiment_trace({"control": rng_free[0], "treat": rng_free[1]}))
    assert report["verdict"]["outcome"] == "winner" and report["verdict"]["winner"] == "treat"
    (c,) = report["comparisons"]
    assert c["ci95_us"][0] < c["ci95_us"][1] < 0 and c["p_value"] < 0.001


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
