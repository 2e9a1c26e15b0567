"""The report read one socket at a time (trace/stream.py, model/streaming.py): the same report as
the one built from whole traces, damaged traces found as before, and memory that does not grow with
the trace (issue 17)."""

import copy
import html
import io
import json
import os
import pathlib
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from testlib import invoke

from tcpadvise.model.filters import Filters
from tcpadvise.model.metrics import scope_key
from tcpadvise.model.report import TABLE_ROWS, build_report
from tcpadvise.model.streaming import stream_report
from tcpadvise.policy.effect import policy_effects
from tcpadvise.render.html import _MAX_GROUP_CHARTS, TIMELINE_SOCKETS
from tcpadvise.render.json import JsonReportWriter, dumps
from tcpadvise.rules.advice import advise
from tcpadvise.rules.rulebook import load_rulebook
from tcpadvise.trace import check, reader, stream
from tcpadvise.trace.reader import load_inputs
from tcpadvise.units import format_bytes, format_value

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


@pytest.fixture(scope="module")
def traces_of(tmp_path_factory):
    """A directory holding one trace of the recorded sockets repeated `count` times (10,000: 20 MB)."""
    made = {}

    def make(count: int) -> pathlib.Path:
        if count not in made:
            made[count] = tmp_path_factory.mktemp(f"sockets-{count}")
            trace = RECORDED if count == len(RECORDED["sockets"]) else {**RECORDED, "sockets": _copies(RECORDED, count)}
            write_json(made[count] / "server.7.json", trace)
        return made[count]

    return make


def test_memory_does_not_grow_with_the_trace(traces_of, tmp_path):
    """The report of a 20 MB trace (10,000 sockets) peaks within 40 MiB of that of a 5 kB one. Read
    whole, as before, it took about 8 bytes per byte of trace (160 MB more) for text, more for JSON."""
    large, small = traces_of(10_000), traces_of(len(RECORDED["sockets"]))
    assert (large / "server.7.json").stat().st_size > 18e6
    baseline = _peak_rss(["--format", "json", str(small)], tmp_path)
    for output_format in ("json", "text"):
        grown = _peak_rss(["--format", output_format, str(large)], tmp_path) - baseline
        print(f"{output_format}: {grown / 2**20:.0f} MiB more than for the small trace ({baseline / 2**20:.0f} MiB)")
        assert grown < 40 * 2**20, f"{output_format}: {grown / 2**20:.0f} MiB more for a 20 MB trace"


def test_the_page_s_memory_does_not_grow_with_the_trace(traces_of, tmp_path):
    """The HTML page of the 20 MB trace peaks within 24 MiB of that of a 0.8 MB trace of the same
    socket groups (400 sockets: the table full, every chart of the large one's drawn, since what
    a page draws is bounded, not nothing). Made from every socket at once, as before, it took
    about 200 MiB more (2 MiB now)."""
    pages = {}
    peaks = {}
    for count in (400, 10_000):
        pages[count] = tmp_path / f"{count}.html"
        peaks[count] = _peak_rss(["--format", "html", "-o", str(pages[count]), str(traces_of(count))], tmp_path)
    groups = {count: re.search(r"(\d+) socket group\(s\)", page.read_text()).group(1) for count, page in pages.items()}
    assert groups[400] == groups[10_000], groups
    grown = peaks[10_000] - peaks[400]
    print(f"html: {grown / 2**20:.0f} MiB more than for 400 sockets ({peaks[400] / 2**20:.0f} MiB)")
    assert grown < 24 * 2**20, f"html: {grown / 2**20:.0f} MiB more for a 20 MB trace"


class _Tables(HTMLParser):
    """The tables of an HTML fragment: each a list of rows, each row its cells' text (a <br> a newline)."""

    def __init__(self, fragment: str):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._open: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(fragment)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._open.append([])
            self.tables.append(self._open[-1])
        elif tag == "tr" and self._open:
            self._open[-1].append([])
        elif tag in ("td", "th") and self._open:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag):
        if tag == "table":
            self._open.pop()
        elif tag in ("td", "th") and self._cell is not None:
            self._open[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def page_parts(page: str) -> dict:
    """What the report page shows, read back from its HTML: the header's counts, the socket table's
    rows, the note under it, each finding (rule, evidence rows, call-site rows) and each group
    section (heading, its note, its timeline note, its call-site rows)."""
    head = re.search(r"(\d+) trace\(s\), (\d+) process\(es\), (\d+) socket item\(s\), (\d+) socket group\(s\)", page)
    sockets = page[page.index('<h2 id="sockets">'):page.index('<h2 id="findings">')]
    findings = page[page.index('<h2 id="findings">'):page.index('<h2 id="groups">')]
    groups = page[page.index('<h2 id="groups">'):]
    notes = re.findall(r'<p class="note">(.*?)</p>', sockets)
    cards = []
    for card in findings.split('<div class="card">')[1:]:
        tables = _Tables(card).tables
        evidence = [table for table in tables if table and table[0] == ["metric", "value", "threshold"]]
        sites = [table for table in tables if table and table[0][0] == "call site"]
        cards.append({"rule": html.unescape(re.search(r'<span class="mono">(.*?)</span>', card).group(1)),
                      "evidence": evidence[0][1:] if evidence else [],
                      "sites": sites[0][1:] if sites else []})
    sections = []
    for section in groups.split('<section class="card"')[1:]:
        section_notes = [html.unescape(note) for note in re.findall(r'<p class="note">(.*?)</p>', section)]
        sites = [table for table in _Tables(section).tables if table and table[0][0] == "call site"]
        sections.append({"heading": html.unescape(re.search(r"<h3>(.*?)</h3>", section).group(1)),
                         "note": section_notes[0],
                         "timeline": next((note for note in section_notes if note.startswith("Timeline")), None),
                         "sites": sites[0][1:] if sites else []})
    return {"traces": int(head.group(1)), "processes": int(head.group(2)), "items": int(head.group(3)),
            "groups": int(head.group(4)), "rows": _Tables(sockets).tables[0][1:] if "<table>" in sockets else [],
            "table_note": html.unescape(notes[0]) if notes else None, "findings": cards, "sections": sections}


def _text_rows(text: str) -> list[list[str]]:
    """The rows of the text report's socket table, the total row ("all") last, each as the words
    of its cells, sorted: what it shows, whatever the layout (a row is lines up to a blank line, the
    total its line and those indented under it)."""
    lines = text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.startswith("───")) + 1
    total = next(number for number, line in enumerate(lines) if line.startswith("all "))
    end = next(number for number in range(total + 1, len(lines) + 1)
               if number == len(lines) or not lines[number].startswith(" "))
    rows = [sorted(row.split()) for row in "\n".join(lines[start:total]).split("\n\n") if row.strip()]
    return rows + [sorted(" ".join(lines[total:end]).split())]


def test_the_page_shows_the_figures_text_and_json_show(tmp_path):
    """The page is made from the streamed report: every figure it shares with text and JSON (counts,
    the table's rows and total, the findings' evidence, each group's sums) is the same."""
    write_json(tmp_path / "server.7.json", {**RECORDED, "pid": 7, "sockets": _copies(RECORDED, 260)})
    slow = [nagle_socket(40_000_000), nagle_socket(100_000), nagle_socket(100_000)]
    write_trace(tmp_path, make_trace(slow, program="cl\u00e9ent"))
    wide = {"COLUMNS": "200"}
    page = page_parts(invoke("report", "--format", "html", tmp_path, env=wide).stdout)
    document = json.loads(invoke("report", "--format", "json", tmp_path, env=wide).stdout)
    text = invoke("report", tmp_path, env=wide).stdout
    items = document["sockets"]

    assert (page["traces"], page["items"]) == (len(document["traces"]), len(items)) == (2, 263)
    keys = {scope_key(item): None for item in items}
    assert page["groups"] == len(keys) > _MAX_GROUP_CHARTS
    # The table: text's rows (the TABLE_ROWS busiest, then the total of all), word for word.
    assert len(page["rows"]) == TABLE_ROWS + 1
    assert [sorted(" ".join(row).split()) for row in page["rows"]] == _text_rows(text)
    assert page["table_note"].startswith(f"Showing the {TABLE_ROWS} busiest socket items of 263 ")
    assert f"... and {263 - TABLE_ROWS} more socket items" in text
    busiest = sorted(range(len(items)), key=lambda index: -(items[index]["writes"]["calls"] + items[index]["reads"]["calls"]))
    assert [row[4].split("\n")[0] for row in page["rows"][:-1]] == \
        [f"{items[index]['writes']['calls']} calls" for index in sorted(busiest[:TABLE_ROWS])]
    # The findings: JSON's, in order, each evidence value as text shows it.
    assert [card["rule"] for card in page["findings"]] == [finding["rule"] for finding in document["findings"]]
    assert any(finding["rule"] == "nagle-delayed-ack" for finding in document["findings"])
    evidence_lines = [line for line in text.splitlines() if line.lstrip().startswith("evidence ")]
    for card, finding, line in zip(page["findings"], document["findings"], evidence_lines, strict=True):
        assert [row[:2] for row in card["evidence"]] == \
            [[item["metric"], format_value(item["value"], item["unit"])] for item in finding["evidence"]]
        for metric, value, _ in card["evidence"]:
            assert f"{metric} {value}" in line
    # Each group drawn: its connections, socket items, writes and bytes are the sums of JSON's items.
    assert len(page["sections"]) == _MAX_GROUP_CHARTS
    for section in page["sections"]:
        members = [item for item in items if _heading(item) == section["heading"]]
        assert len({scope_key(item) for item in members}) == 1, section["heading"]
        connections = sum(item["connections"] for item in members)
        writes = sum(item["writes"]["calls"] for item in members)
        written = format_bytes(sum(item["writes"]["bytes"] for item in members))
        assert f"; {connections} connection(s) in {len(members)} socket item(s); {writes} writes, {written}" \
            in section["note"], section
        shown = min(len(members), TIMELINE_SOCKETS)
        assert section["timeline"].startswith(f"Timeline: showing {shown} of {len(members)} socket items")
    drawn = sorted((sum(item["writes"]["calls"] for item in items if scope_key(item) == key) for key in keys),
                   reverse=True)[:_MAX_GROUP_CHARTS]
    assert sorted((int(re.search(r"; (\d+) writes", section["note"]).group(1)) for section in page["sections"]),
                  reverse=True) == drawn


def _heading(item: dict) -> str:
    """A group section's heading for the group of a JSON socket item."""
    where = (f"server :{item['local']['port']}" if item["role"] == "server"
             else f"{item['role']} → {item['peer']['addr']}:{item['peer']['port']}")
    return f"{item['program']} {where}"


def test_each_group_keeps_its_busiest_items_for_the_timeline(tmp_path, tiny_chunks):
    """stream_report(sample=N): per group, the N items with the most calls (the first of equals), in
    report order, as JSON has them; no sample unless asked."""
    sockets = _copies(RECORDED, 60)
    for index, socket in enumerate(sockets):
        socket["writes"]["calls"] = (index * 37) % 11  # busy and idle items mixed, with ties
        socket["duration_ns"] = 1_000 + index  # which socket it is
    write_json(tmp_path / "server.7.json", {**RECORDED, "pid": 7, "sockets": sockets})
    items = []
    report = stream_report(load_inputs([tmp_path], compact=True), Filters(), load_rulebook(()),
                           sink=lambda item, _raw: items.append(item), sample=3)
    by_group: dict[tuple, list[int]] = {}
    for index, item in enumerate(items):
        by_group.setdefault(scope_key(item), []).append(index)
    assert len(report.samples) == len(by_group) > 1
    calls = [item["writes"]["calls"] + item["reads"]["calls"] for item in items]
    for sample, indexes in zip(report.samples, by_group.values(), strict=True):
        busiest = sorted(sorted(indexes, key=lambda index: -calls[index])[:3])
        assert len(sample) == min(3, len(indexes))
        assert [(sampled.duration_ns, sampled.local_port, sampled.pid) for sampled in sample] == \
            [(1_000 + index, items[index]["local"]["port"], 7) for index in busiest]
    assert stream_report(load_inputs([tmp_path], compact=True), Filters(), load_rulebook(())).samples == []
