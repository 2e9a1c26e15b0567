"""`--format html`: the pages of report and ab report, opened in a real
browser (chromium through Playwright, tests/browserlib.py) from a file:// URL
with the network refused. The run behind them is real: the burst client under
the shim, an A/B experiment of observe against nodelay, with call sites."""
import json
import os
import pty
import re
import stat
import subprocess
import sys

import pytest
from browserlib import assert_page_is_whole, open_page
from tcpadvise.ab.experiment import collect
from tcpadvise.render.html import ab_html
from tcpadvise.symbols.symbolize import site_text
from tcpadvise.trace.reader import Inputs
from testlib import REPO, Server, assert_one_line_error, invoke, prog, shim_path

from .conftest import make_hist, make_socket, make_trace, write_json, write_trace
from .test_ab import experiment_trace, report_of
from .test_report_stream import page_parts

needs_shim = pytest.mark.skipif(not shim_path().exists(), reason="needs the built shim (cmake --build build)")
# HOSTILE: a program name as a trace may carry it: markup, a script, a remote image, matplotlib's `$`.
HOSTILE = '<script>document.title="pwned"</script><img src="http://198.51.100.7/x.png">$x$&'


def _record(out, *options, client=()):
    """`tcpadvise record -o OUT OPTIONS -- burst client ...` against a burst server of its own."""
    if not shim_path().exists():
        pytest.skip("needs the built shim (cmake --build build)")
    server = Server(["--request", "8"])
    try:
        result = subprocess.run(
            [sys.executable, "-m", "tcpadvise", "record", "-o", str(out), "--call-sites", "sample", *options, "--",
             prog("burst"), "client", "--port", str(server.port), "--writes", "4", "--size", "2", *client],
            env={**os.environ, "TCPADVISE_SHIM": str(shim_path()), "PYTHONPATH": str(REPO / "advisor")},
            capture_output=True, text=True, timeout=60, check=False)
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    """A real run: the burst client's messages of 4 two-byte writes, each waiting for a reply, on 2
    connections of 4 rounds (Nagle and delayed ACKs: about 40 ms a round); call sites sampled."""
    return _record(tmp_path_factory.mktemp("html") / "observed", client=["--rounds", "4", "--connections", "2"])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real experiment: the same client on 16 connections of 2 rounds, half drawn to nodelay."""
    return _record(tmp_path_factory.mktemp("html") / "trial", "--ab", "control=observe,treat=nodelay", "--seed", "3",
                   client=["--rounds", "2", "--connections", "16"])


@needs_shim
def test_report_page_opens_offline_with_every_chart_drawn(observed, tmp_path):
    page = tmp_path / "report.html"
    result = invoke("report", "--format", "html", "-o", page, observed)
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and f"wrote {page}" in result.stderr
    assert stat.S_IMODE(page.stat().st_mode) == 0o600
    visit = open_page(page, tmp_path / "artifacts" / "report.png")
    # One group (burst client -> the server): its histograms and its timeline.
    assert_page_is_whole(visit, charts=2)
    assert visit.title == "tcpadvise report"
    # The finding with its evidence, and the call site the shim sampled, named from the binary.
    assert "nagle-delayed-ack" in visit.text and "bursts.writes_p50" in visit.text
    assert re.search(r"RunRounds.*burst\.cc:\d+", visit.text), visit.text
    assert "burst client → 127.0.0.1:" in visit.text
    # Its figures are text's and JSON's: the group's call sites and writes, each finding's sites.
    parts = page_parts(page.read_text())
    text = invoke("report", observed, env={"COLUMNS": "200"}).stdout
    document = json.loads(invoke("report", "--format", "json", observed).stdout)
    (section,) = parts["sections"]
    assert section["sites"] and [f"{site}: {writes} writes" for site, writes, *_ in section["sites"]] == \
        [line.strip().split(" writes")[0] + " writes" for line in text.split(f"call sites: {section['heading']}\n")[1]
         .splitlines()[:len(section["sites"])]]
    assert any(card["sites"] for card in parts["findings"])
    for card, finding in zip(parts["findings"], document["findings"], strict=True):
        assert [(site, int(writes)) for site, writes, *_ in card["sites"]] == \
            [(site_text(site), site["writes"]) for site in finding["call_sites"][:len(card["sites"])]]


@needs_shim
def test_ab_page_shows_each_arm_and_the_intervals(recorded, tmp_path):
    page = tmp_path / "ab.html"
    result = invoke("ab", "report", "--format", "html", "-o", page, recorded)
    assert result.exit_code == 0, result.output
    visit = open_page(page, tmp_path / "artifacts" / "ab.png")
    # The arms' turn times and per-connection means; the comparison with control once there is one.
    assert_page_is_whole(visit, charts=1)
    report = invoke("ab", "report", "--format", "json", recorded)
    verdict = json.loads(report.stdout)["verdict"]
    assert f"Verdict: {'winner: ' + verdict['winner'] if verdict['winner'] else verdict['outcome']}" in visit.text
    for name in ("control", "treat"):
        assert name in visit.text
    if verdict["outcome"] != "not enough data":
        assert len(visit.charts) == 2 and "95% confidence sequence" in visit.text


def test_traced_strings_are_text_not_markup(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    write_json(traces / "hostile.json", make_trace([make_socket()], program=HOSTILE))
    page = tmp_path / "hostile.html"
    assert invoke("report", "--format", "html", "-o", page, traces).exit_code == 0
    html = page.read_text()
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in html
    visit = open_page(page, tmp_path / "artifacts" / "hostile.png")
    assert_page_is_whole(visit, charts=2)
    assert visit.title == "tcpadvise report" and HOSTILE in visit.text


def test_zero_byte_writes_join_the_lowest_bin(tmp_path):
    socket = make_socket()
    socket["writes"]["size"] = make_hist([0, 0, 0, 5, 1400])
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace([socket]))
    page = tmp_path / "zeros.html"
    assert invoke("report", "--format", "html", "-o", page, traces).exit_code == 0
    assert_page_is_whole(open_page(page, tmp_path / "artifacts" / "zeros.png"), charts=2)


def test_arm_names_are_text_in_the_page_and_in_the_charts(tmp_path):
    # Arm names come from the traces: markup in the page, `$` in matplotlib's labels.
    trace = experiment_trace({"<b>$c$": [3e5] * 12, "t<i>$": [1e5] * 12})
    report = report_of(trace)
    html = ab_html(report, collect(Inputs(traces=[trace], manifests=[], stale=[])))
    assert "<b>" not in html and "<i>" not in html and "&lt;b&gt;$c$" in html
    page = tmp_path / "arms.html"
    page.write_text(html)
    visit = open_page(page, tmp_path / "artifacts" / "arms.png")
    assert_page_is_whole(visit, charts=2)


def test_page_refers_to_nothing_outside_itself(observed):
    html = invoke("report", "--format", "html", observed).stdout
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|link|iframe|object|embed|img)\b", html)
    # matplotlib's SVG refers to its own glyphs and clip paths (#id); nothing else is referred to.
    assert set(re.findall(r'href="(.)', html)) <= {"#"}, re.findall(r'href="[^#][^"]*"', html)
    assert set(re.findall(r"url\((.)", html)) <= {"#"}
    assert "default-src 'none'" in html


def test_html_on_a_terminal_is_refused_before_the_work(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace())
    leader, follower = pty.openpty()
    try:
        result = subprocess.run([sys.executable, "-m", "tcpadvise", "report", "--format", "html", str(traces)],
                                stdout=follower, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
                                env={**os.environ, "PYTHONPATH": str(REPO / "advisor")})
    finally:
        os.close(follower)
        os.close(leader)
    assert result.returncode == 2
    assert "give -o FILE (or redirect stdout to a file)" in result.stderr and "Traceback" not in result.stderr


def test_unwritable_output_is_one_line(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace())
    result = invoke("report", "--format", "html", "-o", tmp_path / "missing" / "r.html", traces)
    assert_one_line_error(result, 1, "r.html: cannot write")


def test_output_replaces_a_symlink_not_its_target(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace())
    target = tmp_path / "precious"
    target.write_text("keep")
    page = tmp_path / "r.html"
    page.symlink_to(target)
    assert invoke("report", "--format", "json", "-o", page, traces).exit_code == 0
    assert target.read_text() == "keep" and not page.is_symlink()
    assert page.read_text().startswith("{")


def test_an_experiment_too_small_to_compare_still_has_its_page(tmp_path):
    trace = experiment_trace({"control": [3e5], "treat": [1e5, 2e5]})
    report = report_of(trace)
    assert report["comparisons"] == []
    page = tmp_path / "small.html"
    page.write_text(ab_html(report, collect(Inputs(traces=[trace], manifests=[], stale=[]))))
    visit = open_page(page, tmp_path / "artifacts" / "small.png")
    assert_page_is_whole(visit, charts=1)
    assert "Verdict: not enough data" in visit.text and "No arm has enough connections" in visit.text


def test_a_trace_without_sockets_is_a_page_without_charts(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace([]))
    page = tmp_path / "empty.html"
    assert invoke("report", "--format", "html", "-o", page, traces).exit_code == 0
    visit = open_page(page, tmp_path / "artifacts" / "empty.png")
    assert_page_is_whole(visit, charts=0)
    assert visit.charts == [] and "No TCP sockets in these traces." in visit.text


def test_output_to_a_pipe_or_device_is_refused_not_replaced(tmp_path):
    # A rename onto a FIFO (or /dev/stdout) would put a plain file in its place.
    traces = tmp_path / "traces"
    traces.mkdir()
    write_trace(traces, make_trace())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    for output in (fifo, link):
        result = invoke("report", "--format", "html", "-o", output, traces)
        assert_one_line_error(result, 1, f"{output}: not a regular file (leave out -o to write to stdout)")
    assert stat.S_ISFIFO(fifo.stat().st_mode) and link.is_symlink()
