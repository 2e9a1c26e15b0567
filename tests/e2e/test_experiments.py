"""A/B experiments on live traffic, end to end: the shim draws an arm per
connection, the traces carry each connection's outcome, and
`tcpadvise ab report` names the winner only when there is one."""
import json

from tcpadvise.ab import experiment_config, parse_arms
from testlib import client_json, invoke, load_traces, prog, run, shim_env


def ab_report(out, *options):
    result = invoke("ab", "report", "--format", "json", *options, out)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def record(out, ab, *client_args, seed=11):
    """What `tcpadvise record --ab AB` runs: the client under the shim with the
    experiment config the command writes (its own CLI path is tested in
    tests/advisor/test_ab.py; here the shim may be a sanitizer build)."""
    config = out / "policy.yaml"
    config.write_text(experiment_config(parse_arms(ab), seed))
    run([prog("burst"), "client", *client_args], env=shim_env(out, TCPADVISE_CONFIG=str(config)))


def test_small_write_clients_name_coalesce_the_winner(tmp_path, server_factory):
    server = server_factory()
    # 40 connections from one client population, each 3 requests of 15 two-byte writes.
    record(tmp_path, "control=observe,treat=coalesce", "--port", str(server.port), "--threads", "40", "--rounds", "3")
    report = ab_report(tmp_path)
    arms = {arm["name"]: arm for arm in report["arms"]}
    assert arms["control"]["connections"] + arms["treat"]["connections"] == 40
    assert min(arm["connections"] for arm in arms.values()) >= 10
    assert arms["control"]["turn_p50_us"] > 20000 > 1000 > arms["treat"]["turn_p50_us"]
    (comparison,) = report["comparisons"]
    assert comparison["significant"] and comparison["ci95_us"][1] < 0
    assert report["verdict"] == {**report["verdict"], "outcome": "winner", "winner": "treat"}


def test_identical_arms_name_no_winner(tmp_path, server_factory):
    server = server_factory()
    # A healthy client (one writev per request) under two arms that do the same thing.
    record(tmp_path, "control=nodelay,same=nodelay", "--port", str(server.port), "--threads", "40",
           "--rounds", "20", "--single-writev")
    # 40 concurrent connections on 2 cores differ by chance: only an effect of
    # a quarter of the mean would be real here.
    report = ab_report(tmp_path, "--min-effect", "0.25")
    assert sum(arm["connections"] for arm in report["arms"]) == 40
    assert report["verdict"]["winner"] is None
    assert report["verdict"]["outcome"] in ("no difference", "not enough data")


def test_guardrail_stops_an_arm_far_worse_than_control(tmp_path, server_factory):
    server = server_factory()
    config = tmp_path / "experiment.yaml"
    config.write_text("""version: 1
experiment:
  name: guarded
  seed: 3
  match: {role: client}
  arms:
    - {name: control, policy: nodelay}
    - {name: nagle, policy: observe}
  guardrail: {max_p99_ratio: 3, min_connections: 3}
""")
    out = tmp_path / "traces"
    out.mkdir()
    did = client_json(run([prog("burst"), "client", "--port", str(server.port), "--connections", "40",
                           "--rounds", "2"], env=shim_env(out, TCPADVISE_CONFIG=str(config))))[0]
    experiment = load_traces(out)[did["pid"]]["experiment"]
    control, nagle = experiment["arms"]
    assert nagle["stopped"] and "turn p99" in nagle["stop_reason"]
    # After the stop, every draw of the nagle arm went to control.
    assert 3 <= nagle["connections"] <= 8
    assert control["connections"] + nagle["connections"] == 40
    report = ab_report(out)
    assert report["arms"][1]["stopped"] and report["verdict"]["winner"] == "control"


def test_draws_are_reproducible_from_the_seed(tmp_path, server_factory):
    server = server_factory()
    config = tmp_path / "experiment.yaml"
    config.write_text("""version: 1
experiment:
  name: repeat
  seed: 99
  arms:
    - {name: a, weight: 1, policy: observe}
    - {name: b, weight: 3, policy: nodelay}
""")
    arms_by_run = []
    for run_number in range(2):
        out = tmp_path / f"run{run_number}"
        out.mkdir()
        did = client_json(run([prog("burst"), "client", "--port", str(server.port), "--connections", "24",
                               "--rounds", "1", "--single-writev"], env=shim_env(out, TCPADVISE_CONFIG=str(config))))[0]
        rows = load_traces(out)[did["pid"]]["experiment"]["connections"]
        arms_by_run.append([row[0] for row in rows])
    assert arms_by_run[0] == arms_by_run[1]
    assert 12 <= arms_by_run[0].count(1) <= 23  # weight 3 of 4
