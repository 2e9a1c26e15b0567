"""The proof of every rule: each corpus scenario, recorded under the shim in
this run, gets its rule on the scope that shows the pattern, and nothing
else above info; healthy scenarios get nothing above info."""

import pytest

from tcpadvise.rules.rulebook import holds, load_rulebook

from .conftest import advised, summary
from .corpus import CORPUS


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.label)
def test_scenario_gets_its_rule_and_nothing_else_above_info(case, recorded):
    findings = advised(recorded(case.label)).findings
    expected = [
        finding
        for finding in findings
        if finding["rule"] == case.rule and finding["scope"]["role"] == case.role
    ]
    if case.rule is not None:
        assert len(expected) == 1, summary(findings)
    others_above_info = [
        finding for finding in findings if finding not in expected and finding["severity"] != "info"
    ]
    assert others_above_info == [], summary(others_above_info)
    for finding in expected:
        for item in finding["evidence"]:
            if item["op"] is not None:
                assert holds(item["op"], item["value"], item["threshold"]), item


def test_every_rule_is_proven_by_a_scenario():
    assert {case.rule for case in CORPUS} - {None} == {rule.id for rule in load_rulebook().rules}


def test_a_finding_says_what_matched_and_what_to_do(recorded):
    [finding] = advised(recorded("nagle-delayed-ack")).findings
    assert finding["severity"] == "high" and finding["confidence"] == "high"
    scope = finding["scope"]
    assert (scope["program"], scope["role"], scope["local_port"], scope["connections"]) == (
        "burst",
        "client",
        None,
        1,
    )
    evidence = {item["metric"]: item for item in finding["evidence"]}
    assert evidence["bursts.writes_p50"]["value"] == 15
    assert evidence["turns.p50_us"]["threshold"] == [30000, 250000]
    assert 30000 <= evidence["turns.p50_us"]["value"] <= 60000
    assert evidence["tcp.rtt_us"]["op"] is None  # shown as context
    assert finding["why"].startswith("Each message leaves as 15 writes with Nagle on")
    assert finding["recommendation"]["policy"] == "cork"
    assert "writev" in finding["recommendation"]["code"] and "TCP_CORK" in finding["recommendation"]["code"]
    assert finding["source"]["seeds"] == [
        "../shared/seeds/004_5f796d16d3e235bb.txt",
        "../shared/seeds/002_a2ff8248013a620f.txt",
    ]
    assert finding["expected_effect"] == finding["source"]["seed_effect"]
    assert "Seed 004" in finding["expected_effect"] and finding["source"]["calibration"] is None


def test_findings_come_most_severe_first_across_runs(recorded):
    findings = advised(recorded("shim-blind-static"), recorded("nagle-delayed-ack")).findings
    assert [finding["rule"] for finding in findings] == ["nagle-delayed-ack", "shim-blind"]
    blind = findings[1]["scope"]
    assert blind["program"] == "stream-static" and blind["command"][0].endswith("stream-static")
    assert blind["sockets"] == [] and blind["role"] is None
    assert "statically linked" in findings[1]["why"]
