import io
import json
from importlib import resources

import jsonschema
import pytest
from rich.console import Console

from tcpadvise.render.json import render_json
from tcpadvise.render.text import render_text
from tcpadvise.model.report import REPORT_SCHEMA, build_report
from tcpadvise.trace.reader import load_inputs

from .conftest import make_hist, make_manifest, make_socket, make_trace, write_json, write_trace


def report_of(directory, *traces, manifest=None):
    for trace in traces:
        write_trace(directory, trace)
    if manifest is not None:
        write_json(directory / "record.json", manifest)
    return build_report(load_inputs([directory]))


def empty_socket():
    socket = make_socket()
    for section, names in (
        ("writes", ("size", "iovcnt", "syscall_ns", "gap_ns")),
        ("bursts", ("writes", "bytes")),
        ("reads", ("size",)),
    ):
        for name in names:
            socket[section][name] = make_hist([], unit=socket[section][name]["unit"])
    socket["turns"]["ns"] = make_hist([], unit="ns")
    return socket


def test_socket_item_summarises_the_trace_socket(tmp_path):
    item = report_of(tmp_path, make_trace()).sockets[0]
    assert item["program"] == "client" and item["pid"] == 4242
    assert item["kind"] == "socket" and item["role"] == "client" and item["service_port"] == 6379
    assert item["peer"] == {"addr": "127.0.0.1", "port": 6379}
    writes = item["writes"]
    assert (writes["calls"], writes["bytes"], writes["by_api"]) == (4, 140, {"send": 3, "writev": 1})
    assert writes["size_p50"] == 10  # exact: values below 256 have a bucket each
    assert writes["size_p99"] == 100
    assert writes["mean_size"] == 35
    assert writes["iovcnt_p50"] == 1
    assert item["bursts"] == {"count": 2, "writes_p50": 2, "writes_p99": 2, "bytes_p50": 20, "bytes_p99": 120}
    assert item["turns"]["count"] == 2
    assert item["turns"]["p50_us"] == 50.0
    assert item["turns"]["p99_us"] == 80.0
    assert item["reads"] == {"calls": 3, "bytes": 128, "by_api": {"recv": 3}, "size_p50": 64, "eof": 1}
    assert item["tcp_info"]["rtt_us"] == 50.0


def test_percentiles_are_null_when_nothing_was_recorded(tmp_path):
    item = report_of(tmp_path, make_trace(sockets=[empty_socket()])).sockets[0]
    assert item["writes"]["size_p50"] is None
    assert item["writes"]["mean_size"] is None
    assert item["bursts"]["writes_p99"] is None
    assert item["turns"]["p50_us"] is None
    assert item["reads"]["size_p50"] is None


def test_json_report_matches_its_schema_and_leaves_histograms_out(tmp_path):
    socket_without_tcp_info = make_socket()
    del socket_without_tcp_info["tcp_info"]
    report = report_of(tmp_path, make_trace(sockets=[make_socket(), empty_socket(), socket_without_tcp_info]))
    document = json.loads(render_json(report))
    schema = json.loads(resources.files("tcpadvise").joinpath("schemas", "report-1.schema.json").read_text())
    jsonschema.validate(document, schema)
    assert document["schema"] == REPORT_SCHEMA
    assert document["traces"] == [str(tmp_path / "client.4242.json")]
    assert document["findings"] == []
    assert "buckets" not in json.dumps(document)
    assert document["sockets"][2]["tcp_info"] == {}


def test_findings_can_be_added_without_reshaping(tmp_path):
    report = report_of(tmp_path, make_trace())
    report.findings.append({"socket": 0, "rule": "example"})
    assert report.to_json()["findings"] == [{"socket": 0, "rule": "example"}]
    assert report.raw_sockets[0]["writes"]["size"]["count"] == 4


def test_total_adds_every_socket(tmp_path):
    server = make_socket(role="server", connections=3, kind="group", open=False)
    server["writes"]["by_api"] = {"write": 2}
    server["errors"] = {"EPIPE": 1}
    total = report_of(tmp_path, make_trace(sockets=[make_socket(), server])).total()
    assert total["connections"] == 4
    assert total["writes"]["calls"] == 8
    assert total["writes"]["by_api"] == {"send": 3, "writev": 1, "write": 2}
    assert total["errors"] == {"EPIPE": 1}
    assert total["writes"]["size_p99"] == 100


@pytest.mark.parametrize(
    ("binary", "expected"),
    [
        ({"static": True, "go": False}, "statically linked, and LD_PRELOAD cannot reach it"),
        ({"static": True, "go": True}, "Go binary, and Go makes system calls without libc"),
        ({"static": False, "go": False}, "it made no TCP connection through libc"),
    ],
)
def test_manifest_without_sockets_explains_why(tmp_path, binary, expected):
    report = report_of(tmp_path, manifest=make_manifest(**binary, exit_status=3))
    assert report.sockets == []
    [warning] = report.warnings
    assert warning.startswith("'client --port 6379' ran (exit status 3) but no TCP call was intercepted")
    assert expected in warning


def test_traces_without_sockets_and_no_manifest(tmp_path):
    report = report_of(tmp_path, make_trace(sockets=[]))
    assert report.warnings == ["these traces hold no TCP socket: there is nothing to report on"]


def test_shim_warnings_snapshots_and_dropped_groups_are_reported(tmp_path):
    trace = make_trace(final=False, groups_dropped=7, shim_warnings=["socket table full"])
    warnings = report_of(tmp_path, trace).warnings
    assert warnings[0] == "client (pid 4242): shim: socket table full"
    assert "snapshot" in warnings[1] and "still running or was killed" in warnings[1]
    assert "7 closed connections" in warnings[2]


def test_policy_fail_open_and_deferred_errors_are_reported(tmp_path):
    policy = {"rule": "r", "settings": {"coalesce": {"max_bytes": 1448, "max_delay_us": 200}},
              "counters": {"flushes": {}, "bytes_held": 30, "max_bytes_held": 30, "longest_hold_ns": 1.0,
                           "corks": 0, "deferred_errors": {"EBADF": 2}}, "conflicts": []}
    trace = make_trace(sockets=[make_socket(policy=policy)],
                       policy_fail_open="the policy deadline thread cannot start")
    warnings = report_of(tmp_path, trace).warnings
    assert any("failed open (the policy deadline thread cannot start)" in w for w in warnings), warnings
    assert any("could not be delivered (EBADF x2)" in w for w in warnings), warnings


def test_leftover_traces_are_ignored_with_a_warning(tmp_path):
    report = report_of(
        tmp_path,
        make_trace(pid=1, written_unix_ns=10),
        make_trace(pid=2),
        manifest=make_manifest(started_unix_ns=100),
    )
    assert [item["pid"] for item in report.sockets] == [2]
    assert any("ignored 1 trace(s)" in warning for warning in report.warnings)


def render(report, width):
    output = io.StringIO()
    render_text(report, Console(file=output, width=width, highlight=False))
    return output.getvalue()


def mixed_report(directory):
    ipv6 = make_socket(
        family="ipv6",
        local={"addr": "::1", "port": 41000},
        peer={"addr": "::1", "port": 443},
        options_set={"TCP_NODELAY": 1},
        options={"nodelay": True},
        errors={"EAGAIN": 5},
    )
    return report_of(directory, make_trace(sockets=[make_socket(), ipv6], final=False))


def assert_complete(text):
    assert "\x1b[" not in text
    assert "tcpadvise report: 1 trace(s), 1 process(es), 2 socket item(s)" in text
    assert "127.0.0.1:40000" in text and "→ 127.0.0.1:6379" in text
    assert "[::1]:41000" in text and "[::1]:443" in text
    assert "set by app" in text
    assert "EAGAIN 5" in text
    assert "140 B" in text and "p50 50.0 µs" in text
    assert "2 socket items" in text
    assert "\nwarning: client (pid 4242): figures are from a periodic snapshot" in text


def test_wide_console_gets_a_table(tmp_path):
    text = render(mixed_report(tmp_path), width=200)
    assert_complete(text)
    assert "writes/burst" in text.splitlines()[1]


def test_narrow_pipe_gets_one_block_per_socket(tmp_path):
    text = render(mixed_report(tmp_path), width=80)
    assert_complete(text)
    assert "client pid 4242  client 127.0.0.1:40000 → 127.0.0.1:6379  1 open" in text
    assert "  writes/burst  p50 2, p99 2" in text
    assert max(len(line) for line in text.splitlines() if not line.startswith("warning")) <= 80


def test_text_report_without_sockets_shows_only_the_warning(tmp_path):
    text = render(report_of(tmp_path, manifest=make_manifest(static=True)), width=80)
    assert text.splitlines()[0] == "tcpadvise report: 0 trace(s), 0 process(es), 0 socket item(s)"
    assert text.splitlines()[1].startswith("warning: 'client --port 6379' ran")
    assert "statically linked" in text
