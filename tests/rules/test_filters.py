"""report's filters on a real recording: sockets narrowed before the rulebook runs, findings by severity."""

import json
import os

from tcpadvise.rules import SEVERITIES
from testlib import assert_one_line_error, invoke


def report_json(*args):
    result = invoke("report", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_filters_keep_the_sockets_asked_for(recorded):
    directory = recorded("nagle-delayed-ack")
    everything = report_json(directory)
    assert everything["findings"], "the corpus case should have findings"
    first = everything["sockets"][0]
    by_role = report_json("--role", first["role"], directory)
    assert by_role["sockets"] and all(
        item["role"] == first["role"] for item in by_role["sockets"]
    )
    by_program = report_json(
        "--program", first["program"], "--pid", first["pids"][0], directory
    )
    assert by_program["sockets"] and all(
        item["program"] == first["program"] for item in by_program["sockets"]
    )
    port = first["service_port"]
    by_port = report_json("--port", port, directory)
    assert by_port["sockets"] and all(
        port in (item["service_port"], item["local"]["port"], item["peer"]["port"])
        for item in by_port["sockets"]
    )
    nothing = report_json("--program", "no-such-program", directory)
    assert nothing["sockets"] == [] and nothing["findings"] == []
    # Findings are of the sockets kept: their indexes point into the filtered list.
    for finding in by_role["findings"]:
        assert all(
            index < len(by_role["sockets"]) for index in finding["scope"]["sockets"]
        )


def test_peer_and_host_filters(recorded):
    directory = recorded("nagle-delayed-ack")
    client = next(
        item for item in report_json(directory)["sockets"] if item["role"] == "client"
    )
    peer = f"{client['peer']['addr']}:{client['peer']['port']}"
    assert all(
        item["peer"]["port"] == client["peer"]["port"]
        for item in report_json("--peer", peer, directory)["sockets"]
    )
    # Traces name the host they were written on (uname's node name).
    assert report_json("--host", os.uname().nodename, directory)["sockets"]
    assert report_json("--host", "web-1", directory)["sockets"] == []


def test_min_severity_drops_less_severe_findings(recorded):
    directory = recorded("nagle-delayed-ack")
    findings = report_json(directory)["findings"]
    for severity in SEVERITIES:
        kept = report_json("--min-severity", severity, directory)["findings"]
        limit = SEVERITIES.index(severity)
        assert kept == [
            finding
            for finding in findings
            if SEVERITIES.index(finding["severity"]) <= limit
        ]


def test_a_bad_filter_value_is_a_usage_error(recorded):
    result = invoke("report", "--role", "boss", recorded("nagle-delayed-ack"))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert_one_line_error(invoke("report", "--program", "x"), 2, "no trace given")
