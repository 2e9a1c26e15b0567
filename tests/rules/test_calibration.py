"""report --calibration: a finding quotes the figure measured here when the
calibration has its rule's measurement, and the seed's figure otherwise."""

import json

import pytest

from tcpadvise import schemas
from tcpadvise.rules.calibration import CALIBRATION_SCHEMA, measurement_fields
from tcpadvise.rules.rulebook import load_rulebook

from .conftest import advised, invoke

# What `tcpadvise bench` is to write: one measurement per seed experiment.
FULL_CALIBRATION = {
    "schema": "tcpadvise.calibration/1",
    "host": "test machine, loopback",
    "measured_unix_ns": 1_700_000_000_000_000_000,
    "measurements": {
        "nagle": {"plain_us": 41800, "nodelay_us": 65, "cork_us": 20, "writev_us": 19},
        "large_write_tail": {"request_bytes": 8004, "split_us": 41900, "one_write_us": 30},
        "small_writes": {"write_bytes": 64, "nodelay_mbit_s": 62, "nagle_mbit_s": 209, "batched_mbit_s": 930},
        "sndbuf": {"sndbuf_bytes": 4096, "limited_mbit_s": 35, "autotuned_mbit_s": 14000},
        "extra_segment": {"one_segment_us": 21, "two_segments_us": 27},
    },
}


def write_calibration(tmp_path, document) -> str:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(document))
    return path


def test_the_documented_example_is_valid_and_names_every_measurement_a_rule_uses():
    assert schemas.errors(CALIBRATION_SCHEMA, FULL_CALIBRATION) == []
    used = {
        rule.data["expected_effect"]["measured"]["measurement"]
        for rule in load_rulebook().rules
        if "measured" in rule.data["expected_effect"]
    }
    assert used == set(FULL_CALIBRATION["measurements"])
    for name, figures in FULL_CALIBRATION["measurements"].items():
        assert set(measurement_fields(name)) == set(figures)


def test_a_matching_measurement_gives_the_local_figure(tmp_path, recorded):
    calibration = write_calibration(tmp_path, FULL_CALIBRATION)
    [finding] = advised(recorded("nagle-delayed-ack"), calibration=calibration).findings
    assert finding["expected_effect"] == (
        "measured here: 15 two-byte writes and a reply took 41.8 ms a round as is, 20.0 µs with TCP_CORK, "
        "19.0 µs as one writev and 65.0 µs with TCP_NODELAY."
    )
    assert finding["source"]["calibration"] == str(calibration)
    assert finding["source"]["seed_effect"].startswith("Seed 004")


def test_without_the_measurement_the_seed_figure_stays(tmp_path, recorded):
    only_sndbuf = {**FULL_CALIBRATION, "measurements": {"sndbuf": FULL_CALIBRATION["measurements"]["sndbuf"]}}
    calibration = write_calibration(tmp_path, only_sndbuf)
    [finding] = advised(recorded("nagle-delayed-ack"), calibration=calibration).findings
    assert finding["expected_effect"] == finding["source"]["seed_effect"]
    assert finding["source"]["calibration"] is None


def test_a_measurement_unknown_to_this_version_is_ignored(tmp_path, recorded):
    newer = {**FULL_CALIBRATION, "measurements": {"zerocopy": {"plain_us": 3, "zerocopy_us": 2}}}
    calibration = write_calibration(tmp_path, newer)
    [finding] = advised(recorded("nagle-delayed-ack"), calibration=calibration).findings
    assert finding["expected_effect"].startswith("Seed 004")


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            {"schema": "tcpadvise.calibration/2", "measurements": {}},
            "invalid https://tcpadvise.dev/schemas/calibration/1 at schema",
        ),
        (
            {"schema": "tcpadvise.calibration/1", "measurements": {"nagle": {"plain_us": 1}}},
            "at measurements/nagle: 'nodelay_us' is a required property",
        ),
        (
            {
                "schema": "tcpadvise.calibration/1",
                "measurements": {"extra_segment": {"one_segment_us": -1, "two_segments_us": 1}},
            },
            "at measurements/extra_segment/one_segment_us",
        ),
    ],
    ids=["wrong-schema", "missing-field", "negative"],
)
def test_a_bad_calibration_is_one_line_and_exit_2(tmp_path, recorded, document, fragment):
    calibration = write_calibration(tmp_path, document)
    result = invoke("report", "--calibration", calibration, recorded("nagle-delayed-ack"))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("tcpadvise: error: ") and fragment in line


def test_a_calibration_that_is_not_json_is_one_line_and_exit_2(tmp_path, recorded):
    calibration = tmp_path / "calibration.json"
    calibration.write_text("{not json")
    result = invoke("report", "--calibration", calibration, recorded("nagle-delayed-ack"))
    assert result.exit_code == 2
    assert result.stderr == f"tcpadvise: error: {calibration}: the calibration is not JSON\n"
