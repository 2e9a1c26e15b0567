"""The report read one socket at a time (trace/stream.py, model/streaming.py): the same report as
the one built from whole traces, damaged traces found as before, and memory that does not grow with
the trace (issue 17)."""

import copy
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tcpadvise.model.filters import Filters
from tcpadvise.model.report import build_report
from tcpadvise.model.streaming import stream_report
from tcpadvise.policy.effect import policy_effects
from tcpadvise.render.json import JsonReportWriter, dumps
from tcpadvise.rules.advice import advise
from tcpadvise.rules.rulebook import load_rulebook
from tcpadvise.trace import check, reader, stream
from tcpadvise.trace.reader import load_inputs

from .conftest import make_hist, make_socket, make_trace, write_json, write_trace
from .test_model import nagle_socket

DATA = pathlib.Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "recorded-trace.json").read_text())


def _copies(trace: dict, count: int) -> list[dict]:
    """The trace's sockets repeated count times, each a connection of its own (cookie, ports)."""
    sockets = []
    for index in range(count):
        socket = copy.deepcopy(trace["sockets"][index % len(trace["sockets"])])
        socket["cookie"] = 1_000_000 + index
        socket["local"]["port"] = 20_000 + index % 50
        socket["peer"]["port"] = 30_000 + index % 7
        socket["service_port"] = socket["peer"]["port"] if socket["role"] == "client" else socket["local"]["port"]
        sockets.append(socket)
    return sockets


def _whole_and_streamed(paths):
    """The JSON document of build_report (traces read whole) and of stream_report (read in chunks)."""
    rulebook = load_rulebook(())
    whole = build_report(load_inputs(paths))
    whole.findings = advise(whole, rulebook)
    whole.policy_effects = policy_effects(whole)
    items = []
    streamed = stream_report(load_inputs(paths, compact=True), Filters(), rulebook,
                             sink=lambda item, _raw: items.append(item))
    document = {**whole.to_json(), "sockets": items, "findings": streamed.findings, "warnings": streamed.warnings,
                "policy_effects": streamed.policy_effects}
    return json.loads(json.dumps(whole.to_json())), json.loads(json.dumps(document)), whole, streamed


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Every trace read in chunks, and chunks so small that values and characters span them; the
    first trace's file kept open, the others' copied compressed."""
    monkeypatch.setattr(stream, "WHOLE_BELOW", 0)
    monkeypatch.setattr(stream, "KEEP_OPEN", 1)
    monkeypatch.setattr(stream, "CHUNK", 97)


def test_streamed_report_is_the_whole_report(tmp_path, tiny_chunks):
    big = {**RECORDED, "pid": 7, "sockets": _copies(RECORDED, 40)}
    write_json(tmp_path / "server.7.json", big)
    # One connection of three waits for the delayed ACK: a finding held on it alone.
    slow = [nagle_socket(40_000_000), nagle_socket(100_000), nagle_socket(100_000)]
    write_trace(tmp_path, make_trace(slow, program="cl\u00e9ent"))
    whole, streamed, whole_report, streamed_report = _whole_and_streamed([tmp_path])
    assert isinstance(load_inputs([tmp_path], compact=True).traces[0].data["sockets"], stream.TraceSockets)
    assert len(whole["sockets"]) == 43
    assert any(finding["scope"]["affected_connections"] == 1 for finding in whole["findings"])
    assert streamed == whole
    assert streamed_report.total() == whole_report.total()
    assert streamed_report.call_site_groups() == whole_report.call_site_groups()
    assert streamed_report.shown_sockets() == whole_report.shown_sockets()


def test_an_ascii_trace_kept_open_is_read_again_at_its_spans(tmp_path, tiny_chunks, monkeypatch):
    # Read again socket by socket at the byte spans found when it was checked, each parsed by orjson;
    # the non-ASCII trace beside it (its characters are not its bytes) through the chunked reader.
    write_json(tmp_path / "server.7.json", {**RECORDED, "pid": 7, "sockets": _copies(RECORDED, 30)})
    loaded = load_inputs([tmp_path], compact=True)
    assert stream.file_kept_open(loaded.traces[0].data) and loaded.traces[0].data["sockets"]._spans
    whole, streamed, _, _ = _whole_and_streamed([tmp_path])
    assert len(whole["sockets"]) == 30 and streamed == whole
    utf8 = make_trace([make_socket(), make_socket(cookie=7)], program="cl\u00e9ent")
    (tmp_path / "client.4242.json").write_text(json.dumps(utf8, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setattr(stream, "KEEP_OPEN", 2)
    loaded = load_inputs([tmp_path], compact=True)
    assert all(stream.file_kept_open(trace.data) for trace in loaded.traces)
    assert [trace.data["program"] for trace in loaded.traces] == ["cl\u00e9ent", "python3"]
    assert loaded.traces[0].data["sockets"]._spans is None and loaded.traces[1].data["sockets"]._spans
    whole, streamed, _, _ = _whole_and_streamed([tmp_path])
    assert len(whole["sockets"]) == 32 and streamed == whole


def test_shared_connections_and_handed_off_copies_are_counted_once(tmp_path, tiny_chunks):
    # A prefork server: the parent's unused copy (no cookie, grouped) and the child's inherited one;
    # a connection both hold by cookie.
    parent = make_trace([make_socket(role="server", cookie=0, used=False, connections=2),
                         make_socket(role="server", cookie=555)], program="srv", pid=10)
    child = make_trace([make_socket(role="server", inherited=True, cookie=0),
                        make_socket(role="server", cookie=555)], program="srv", pid=11, ppid=10)
    write_trace(tmp_path, parent)
    write_trace(tmp_path, child)
    whole, streamed, _, _ = _whole_and_streamed([tmp_path])
    assert [item["pids"] for item in whole["sockets"]] == [[10], [10, 11], [11]]
    assert whole["sockets"][0]["connections"] == 1
    assert streamed == whole


def test_a_damaged_large_trace_is_skipped_as_before(tmp_path, tiny_chunks):
    good = make_trace()
    write_trace(tmp_path, good)
    damaged = make_trace([make_socket(), make_socket()], pid=5)
    damaged["sockets"][1]["writes"]["calls"] = 2**70
    write_trace(tmp_path, damaged)
    read_whole = load_inputs([tmp_path])
    read_streamed = load_inputs([tmp_path], compact=True)
    assert read_streamed.warnings == read_whole.warnings
    assert len(read_streamed.warnings) == 1 and "sockets/1/writes/calls" in read_streamed.warnings[0]
    assert read_streamed.damaged == read_whole.damaged and len(read_streamed.traces) == 1


@pytest.mark.parametrize("text", [
    '{"schema": "tcpadvise.trace/1", "sockets": [1, 2',           # cut short
    '{"schema": "tcpadvise.trace/1", "sockets": [NaN]}',          # not JSON
    '{"sockets": [{}], "schema": "tcpadvise.trace/1"}',           # sockets first: read whole
    '[1, 2]',
])
def test_what_the_chunked_reader_does_not_take_is_read_whole(tmp_path, tiny_chunks, text):
    path = tmp_path / "odd.1.json"
    path.write_text(text)
    assert stream.scan(path, reader._names_trace, reader._usable_socket, reader._usable_header) is None


def test_the_json_writer_writes_what_dumps_writes(tmp_path):
    """JsonReportWriter's pieces are the bytes of dumps on the whole document, at the top and a level
    down (--by-host's list)."""
    write_json(tmp_path / "server.7.json", {**RECORDED, "sockets": _copies(RECORDED, 12)})
    write_trace(tmp_path, make_trace([nagle_socket(40_000_000)], pid=8))
    whole, _, _, _ = _whole_and_streamed([tmp_path])
    for level, host in ((0, None), (1, "db1")):
        out = io.BytesIO()
        writer = JsonReportWriter(out, level)
        writer.begin(whole["traces"], host)
        for item in whole["sockets"]:
            writer.item(item)
        writer.end(whole["findings"], whole["warnings"], whole["policy_effects"])
        expected = dumps(whole if level == 0 else [{"host": host, **whole}])
        assert (b"[\n  " if level else b"") + out.getvalue() + (b"\n]\n" if level else b"\n") == expected
    assert whole["sockets"] and whole["findings"]


def _strict_matches_check(socket: dict) -> bool:
    """_usable_socket (the strict schema first) says what the schema and check say."""
    try:
        valid = reader._fast_validator(reader._SOCKET_SCHEMA).is_valid(socket)
    except (ValueError, OverflowError, TypeError):
        valid = False
    return reader._usable_socket(socket) == (valid and check.problem(socket) is None)


@pytest.mark.parametrize("mutate", [
    lambda s: None,
    lambda s: s["writes"].__setitem__("calls", 2**64 + 1),
    lambda s: s.__setitem__("duration_ns", 1e300),
    lambda s: s.__setitem__("duration_ns", 2.0**64),
    lambda s: s.__setitem__("duration_ns", 1.5e19),  # within check's bound, past the strict schema's
    lambda s: s["writes"]["size"].__setitem__("sum", 2**64),
    lambda s: s["writes"]["size"].__setitem__("sum", 2**64 - 1),
    lambda s: s["writes"]["size"].__setitem__("scale", 2.0**64),
    lambda s: s.__setitem__("future_field", {"deep": [2**65]}),
    lambda s: s.__setitem__("tcp_info", {"samples": 0, "rtt_us": 5.0}),
    lambda s: s["writes"]["size"].update(sub_buckets=64, buckets=[[64 * 66 - 1, 1]]),
    lambda s: s["writes"]["size"].update(sub_buckets=128, buckets=[[128 * 66, 1]]),
    lambda s: s["writes"].__setitem__("size", {k: v for k, v in make_hist([5]).items() if k != "scale"}
                                      | {"buckets": [[8, 4, 1]]}),
])
def test_the_strict_schema_accepts_nothing_check_refuses(mutate):
    socket = copy.deepcopy(RECORDED["sockets"][0])
    mutate(socket)
    assert _strict_matches_check(socket)


def _peak_rss(args: list[str], tmp_path) -> int:
    """Peak RSS in bytes of `tcpadvise report ARGS` run in a fresh process: its VmHWM (ru_maxrss
    would count the RSS of this process, which Linux carries across fork and exec)."""
    code = (f"import re, sys; sys.argv = ['tcpadvise', 'report', *{args!r}]\n"
            "from tcpadvise.cli import main\n"
            "try:\n    main()\nfinally:\n"
            "    status = open('/proc/self/status').read()\n"
            "    print(re.search(r'VmHWM:\\s*(\\d+) kB', status).group(1), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "120"}, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.strip().splitlines()[-1]) * 1024


def test_memory_does_not_grow_with_the_trace(tmp_path):
    """The report of a 20 MB trace (10,000 sockets) peaks within 40 MiB of that of a 5 kB one. Read
    whole, as before, it took about 8 bytes per byte of trace (160 MB more) for text, more for JSON."""
    small = tmp_path / "small"
    small.mkdir()
    write_json(small / "server.7.json", RECORDED)
    large = tmp_path / "large"
    large.mkdir()
    path = write_json(large / "server.7.json", {**RECORDED, "sockets": _copies(RECORDED, 10_000)})
    assert path.stat().st_size > 18e6
    baseline = _peak_rss(["--format", "json", str(small)], tmp_path)
    for output_format in ("json", "text"):
        grown = _peak_rss(["--format", output_format, str(large)], tmp_path) - baseline
        print(f"{output_format}: {grown / 2**20:.0f} MiB more than for the small trace ({baseline / 2**20:.0f} MiB)")
        assert grown < 40 * 2**20, f"{output_format}: {grown / 2**20:.0f} MiB more for a {path.stat().st_size / 1e6:.0f} MB trace"
