"""report --emit-policy: a config the shim's own parser accepts, one rule per
scope with a policy to try, and applying it removes what the finding says."""

import pytest
import yaml
from testlib import prog

from tcpadvise import schemas
from tcpadvise.policy.config import check_config

from .conftest import advised, invoke
from .corpus import CORPUS, Peer, record

CASES_WITH_RULES = [case for case in CORPUS if case.rule is not None]


def emitted(policy_file, *arguments) -> dict:
    """Run report --emit-policy; check the file with the shim's parser and the config schema; return it."""
    result = invoke("report", "--format", "json", "--emit-policy", policy_file, *arguments)
    assert result.exit_code == 0, result.output
    assert f"policy rule(s) to {policy_file}" in result.stderr
    check = check_config(policy_file)
    assert check.ok, check.lines
    config = yaml.safe_load(policy_file.read_text())
    assert schemas.errors("tcpadvise.config/1", config) == []
    return config


@pytest.mark.parametrize("case", CASES_WITH_RULES, ids=lambda case: case.label)
def test_emitted_config_has_one_rule_per_scope_with_a_policy(tmp_path, recorded, case):
    directory = recorded(case.label)
    config = emitted(tmp_path / "policy.yaml", directory)
    with_policies = {
        (finding["scope"]["role"], finding["scope"]["local_port"], finding["scope"]["peer_port"])
        for finding in advised(directory).findings
        if finding["recommendation"]["policy"] != "observe"
    }
    assert len(config["rules"]) == len(with_policies)
    for rule in config["rules"]:
        match = rule["match"]
        assert (match["role"], match.get("local_port"), match.get("peer_port")) in with_policies
        # A server is matched by its own port, a client by the service it talks to.
        assert ("local_port" in match) == (match["role"] == "server")
        assert ("peer" in match) == (match["role"] == "client")


MORE_POLICIES = """\
schema: tcpadvise.rules/1
rules:
  - id: quickack-too
    title: A second policy for the same sockets
    source: {note: a test}
    severity: low
    confidence: high
    when: {metric: bursts.writes_p50, op: ">=", value: 2}
    why: Many writes.
    recommendation: {policy: {quickack: true, coalesce: {}}, code: Nothing.}
    expected_effect: {text: None.}
"""


def test_findings_on_one_scope_merge_into_one_rule(tmp_path, recorded):
    rules = tmp_path / "more.yaml"
    rules.write_text(MORE_POLICIES)
    config = emitted(tmp_path / "policy.yaml", "--rules", rules, recorded("nagle-delayed-ack"))
    [rule] = config["rules"]
    # The most severe finding's cork first; quickack added; coalesce left out, as cork excludes it.
    assert rule["policy"] == {"cork": {}, "quickack": True}
    assert rule["name"].endswith(": nagle-delayed-ack, quickack-too")


def test_the_emitted_policy_removes_the_stall_it_was_written_for(tmp_path):
    server = Peer([prog("burst"), "server", "--port", "0"], out_dir=None)
    client = [
        prog("burst"),
        "client",
        "--port",
        server.port,
        "--writes",
        "15",
        "--size",
        "2",
        "--rounds",
        "10",
    ]
    policy_file = tmp_path / "policy.yaml"
    try:
        record(tmp_path / "before", *client)
        config = emitted(policy_file, tmp_path / "before")
        record(tmp_path / "after", *client, options=("--policy", str(policy_file)))
    finally:
        server.finish(exits_by_itself=False)
    assert [rule["policy"] for rule in config["rules"]] == ["cork"]
    # cork is the adaptive form, and the file says what it does to each kind of socket.
    assert "cork is adaptive" in policy_file.read_text()
    assert "write once per burst: no effect" in policy_file.read_text()
    after = advised(tmp_path / "after")
    assert after.findings == []
    [socket] = after.raw_sockets
    assert socket["policy"]["rule"] == config["rules"][0]["name"]
    assert after.sockets[0]["turns"]["p50_us"] < 1000
