"""tcpadvise diff on a real change: the project's Nagle client (15 two-byte
writes a request) recorded as it is and under the nodelay policy. The diff
shows the turn falling from the delayed-ACK stall with an interval that
excludes 0 and the Nagle finding gone; the same recording against itself
shows no significant change; --fail-on-regression turns the reversed diff
into exit 1. Every JSON document is validated against diff-1 (testlib.invoke)."""
import json

from testlib import assert_one_line_error, client_json, invoke, policy_env, prog, run

ROUNDS = 30


def record(tmp_path, name, port, policy):
    env, traces = policy_env(tmp_path / name, policy)
    client_json(run([prog("burst"), "client", "--port", str(port), "--rounds", str(ROUNDS)], env=env))
    return traces


def diff_json(*args):
    result = invoke("diff", "--format", "json", *args)
    return result, json.loads(result.stdout) if result.stdout else None


def test_diff_shows_the_nagle_stall_gone_under_nodelay(tmp_path, server_factory):
    server = server_factory()
    for name in ("observe", "nodelay"):
        (tmp_path / name).mkdir()
    before = record(tmp_path, "observe", server.port, "observe")
    after = record(tmp_path, "nodelay", server.port, "nodelay")

    result, document = diff_json(before, after)
    assert result.exit_code == 0, result.output
    (group,) = document["groups"]
    assert (group["program"], group["role"], group["peer_port"], group["stream"]) == ("burst", "client", server.port, False)
    turn = group["turn_p50_us"]
    assert turn["before"] > 30_000 and turn["after"] < 5_000, turn  # 40 ms delayed ACK, then none
    assert turn["significant"] and turn["low"] <= turn["change"] <= turn["high"] < 0, turn
    assert group["writes_per_burst_p50"]["change"] == 0
    assert group["segments_per_write"]["before"] < group["segments_per_write"]["after"]
    assert [finding["rule"] for finding in document["findings_gone"]] == ["nagle-delayed-ack"]
    assert document["findings_appeared"] == []

    same, unchanged = diff_json(before, before)
    assert same.exit_code == 0
    assert not any(unchanged["groups"][0][key]["significant"] for key in ("turn_p50_us", "turn_p99_us"))
    assert unchanged["findings_gone"] == unchanged["findings_appeared"] == []

    reverse = invoke("diff", "--fail-on-regression", after, before)
    assert reverse.exit_code == 1, reverse.output
    assert "finding appeared: high nagle-delayed-ack" in reverse.stdout
    assert "turn p50" in reverse.stdout and "95% interval" in reverse.stdout


def test_diff_of_a_path_without_traces_is_one_line_error(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.json").write_text("{not json")
    assert_one_line_error(invoke("diff", tmp_path / "junk.json", tmp_path / "empty"), 2, "junk.json")


def test_report_expects_adaptive_policies_to_end_the_nagle_stall(tmp_path, server_factory):
    server = server_factory()
    (tmp_path / "observe").mkdir()
    traces = record(tmp_path, "observe", server.port, "observe")
    report = invoke("report", "--format", "json", traces)
    (effect,) = json.loads(report.stdout)["policy_effects"]
    assert (effect["program"], effect["role"], effect["peer_port"]) == ("burst", "client", server.port)
    assert effect["effect"] == "holds" and effect["multi_write_bursts"] == effect["bursts"] == ROUNDS, effect
    assert "without the delayed-ACK wait" in effect["text"]
    assert "adaptive cork or coalesce, expected effect:" in invoke("report", traces).stdout
