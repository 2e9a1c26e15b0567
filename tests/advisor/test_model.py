"""The report's model of connections: streams, findings per connection,
counting by cookie, loopback, who set TCP_NODELAY, numbers as written, and the
inputs and commands a user gives."""
import io
import json
import os

import pytest
from rich.console import Console
from testlib import invoke

from tcpadvise import schemas
from tcpadvise.rules.advice import advise
from tcpadvise.errors import NotATraceError, NoTracesError
from tcpadvise.record.record import record
from tcpadvise.render.json import render_json
from tcpadvise.render.text import render_text
from tcpadvise.model.report import REPORT_SCHEMA, build_report
from tcpadvise.model.sockets import merge_sockets, socket_figures
from tcpadvise.rules.rulebook import load_rulebook
from tcpadvise.trace.reader import load_inputs
from tcpadvise.units import format_value

from .conftest import make_hist, make_socket, make_trace, write_json, write_trace


def advised(directory, *traces):
    for trace in traces:
        write_trace(directory, trace)
    report = build_report(load_inputs([directory]))
    report.findings = advise(report, load_rulebook())
    assert list(schemas.errors(REPORT_SCHEMA, json.loads(render_json(report)))) == []
    return report


def rules(report):
    return sorted(finding["rule"] for finding in report.findings)


def stream_socket(writes=2000, size=128, nodelay=True, sndbuf=None, errors=None, peer="127.0.0.1", open_=True,
                  segments=None):
    """A connection that only sends: `writes` writes of `size` bytes, its one burst unfinished."""
    socket = make_socket(open=open_, kind="socket" if open_ else "group", peer={"addr": peer, "port": 5201},
                         service_port=5201, errors=errors or {})
    socket["options"] = {"nodelay": nodelay, "cork": False, "sndbuf": 2 * sndbuf if sndbuf else 2_626_560,
                         "rcvbuf": 131072}
    socket["options_set"] = {**({"TCP_NODELAY": 1} if nodelay else {}), **({"SO_SNDBUF": sndbuf} if sndbuf else {})}
    socket["writes"] = {"calls": writes + sum((errors or {}).values()), "bytes": writes * size,
                        "by_api": {"write": writes}, "size": make_hist([size] * writes),
                        "iovcnt": make_hist([1] * writes, unit="count"),
                        "syscall_ns": make_hist([2000] * (writes // 16), unit="ns"),
                        "gap_ns": make_hist([3000] * (writes - 1), unit="ns")}
    socket["bursts"] = {"count": 0, "writes": make_hist([], unit="count"), "bytes": make_hist([])}
    socket["turns"] = {"count": 0, "ns": make_hist([], unit="ns")}
    socket["reads"] = {"calls": 0, "bytes": 0, "by_api": {}, "size": make_hist([]), "eof": 0}
    socket["tcp_info"] = {"rtt_us": 30.0, "rttvar_us": 15.0, "snd_mss": 32768, "samples": 1,
                          "data_segs_out": writes if segments is None else segments, "total_retrans": 0}
    return socket


def nagle_socket(turn_ns):
    """A request/reply connection: two small writes a request with Nagle on, turns of `turn_ns`."""
    socket = make_socket()
    socket["writes"].update(calls=40, bytes=40 * 20, size=make_hist([20] * 40))
    socket["bursts"] = {"count": 20, "writes": make_hist([2] * 20, unit="count"), "bytes": make_hist([40] * 20)}
    socket["turns"] = {"count": 20, "ns": make_hist([turn_ns] * 20, unit="ns")}
    return socket


def test_an_open_write_only_socket_is_a_stream_and_gets_small_writes_nodelay(tmp_path):
    report = advised(tmp_path, make_trace(sockets=[stream_socket()]))
    (finding,) = report.findings
    assert finding["rule"] == "small-writes-nodelay" and finding["severity"] == "medium"
    assert {item["metric"]: item["value"] for item in finding["evidence"]}["stream"] is True
    assert "e+" not in finding["why"]


def test_autocorked_small_writes_are_a_low_finding(tmp_path):
    report = advised(tmp_path, make_trace(sockets=[stream_socket(segments=100)]))
    (finding,) = report.findings
    assert finding["rule"] == "small-writes-nodelay" and finding["severity"] == "low"


def test_a_stream_is_its_own_scope_beside_the_conversation_on_the_same_port(tmp_path):
    control = nagle_socket(100_000)
    control.update(peer={"addr": "127.0.0.1", "port": 5201}, service_port=5201, open=False, kind="group")
    report = advised(tmp_path, make_trace(sockets=[control, stream_socket()]))
    (finding,) = [finding for finding in report.findings if finding["rule"] == "small-writes-nodelay"]
    assert finding["scope"]["sockets"] == [1] and finding["scope"]["connections"] == 1


@pytest.mark.parametrize("evidence", [{"errors": {"EAGAIN": 1500}}, {"partial": 400}])
def test_eagain_or_partial_writes_show_a_small_send_buffer(tmp_path, evidence):
    socket = stream_socket(writes=2000, size=65536, nodelay=False, sndbuf=4096, errors=evidence.get("errors"))
    socket["bursts"] = {"count": 1, "writes": make_hist([2000], unit="count"), "bytes": make_hist([4096])}
    if "partial" in evidence:
        socket["writes"]["partial"] = evidence["partial"]
    report = advised(tmp_path, make_trace(sockets=[socket]))
    (finding,) = report.findings
    assert finding["rule"] == "sndbuf-limited"
    tested = {item["metric"] for item in finding["evidence"] if item["op"] is not None}
    assert tested & {"writes.eagain_share", "writes.partial_share"}


def test_a_finding_on_one_connection_is_not_averaged_away(tmp_path):
    # Three connections of one scope; one waits 40 ms a turn, two answer in 50 us: the scope's median
    # turn is fast, the slow connection's finding must surface all the same.
    sockets = [nagle_socket(50_000), nagle_socket(40_000_000), nagle_socket(50_000)]
    for port, socket in zip((40001, 40002, 40003), sockets):
        socket["local"] = {"addr": "127.0.0.1", "port": port}
    report = advised(tmp_path, make_trace(sockets=sockets))
    (finding,) = report.findings
    assert finding["rule"] == "nagle-delayed-ack"
    assert finding["scope"]["connections"] == 3 and finding["scope"]["affected_connections"] == 1
    assert finding["scope"]["sockets"] == [0, 1, 2]
    console = Console(file=io.StringIO(), width=200)
    render_text(report, console)
    assert "1 of them with this finding" in console.file.getvalue()


def test_entries_of_one_cookie_count_once(tmp_path):
    listener_side = make_socket(cookie=77, kind="socket", open=False, role="server",
                                local={"addr": "127.0.0.1", "port": 5432}, peer={"addr": "127.0.0.1", "port": 40000},
                                service_port=5432)
    for section in ("writes", "reads"):
        listener_side[section].update(calls=0, bytes=0)
    child_side = {**make_socket(), **{key: listener_side[key] for key in ("cookie", "role", "local", "peer",
                                                                           "service_port")}}
    other = make_socket(cookie=78, role="server", local={"addr": "127.0.0.1", "port": 5432},
                        peer={"addr": "127.0.0.1", "port": 40001}, service_port=5432)
    report = advised(tmp_path, make_trace(program="postgres", pid=10, sockets=[listener_side]),
                     make_trace(program="postgres", pid=11, ppid=10, sockets=[child_side, other]))
    assert sum(item["connections"] for item in report.sockets) == 2
    (merged,) = [item for item in report.sockets if item["cookie"] == 77]
    assert merged["pids"] == [10, 11] and merged["pid"] == 11
    assert merged["writes"]["calls"] == child_side["writes"]["calls"]


def test_rtt_variance_is_silent_on_loopback(tmp_path):
    def varying(peer):
        socket = make_socket(peer={"addr": peer, "port": 443}, service_port=443)
        socket["tcp_info"] = {"rtt_us": 40_000.0, "rttvar_us": 30_000.0, "data_segs_out": 500,
                              "total_retrans": 0, "samples": 1}
        return socket

    assert "rtt-variance" not in rules(advised(tmp_path / "lo", make_trace(sockets=[varying("127.0.0.1")])))
    assert "rtt-variance" not in rules(advised(tmp_path / "lo6", make_trace(sockets=[varying("::1")])))
    assert "rtt-variance" in rules(advised(tmp_path / "wan", make_trace(sockets=[varying("192.0.2.7")])))


@pytest.fixture(autouse=True)
def _directories(tmp_path):
    for name in ("lo", "lo6", "wan"):
        (tmp_path / name).mkdir()


@pytest.mark.parametrize(("options_set", "policy", "expected"), [
    ({"TCP_NODELAY": 1}, None, "app"),
    ({}, {"rule": "rule 1", "settings": {"nodelay": True}, "counters": {}, "conflicts": []}, "policy"),
    ({}, None, None),
])
def test_who_set_nodelay(tmp_path, options_set, policy, expected):
    socket = make_socket(options_set=options_set, options={"nodelay": expected is not None, "cork": False})
    if policy:
        socket["policy"] = policy
    report = advised(tmp_path, make_trace(sockets=[socket]))
    assert report.sockets[0]["nodelay_set_by"] == expected
    console = Console(file=io.StringIO(), width=200)
    render_text(report, console)
    text = console.file.getvalue()
    assert ("set by app" in text) == (expected == "app") and ("set by policy" in text) == (expected == "policy")


def test_json_numbers_keep_full_precision(tmp_path):
    socket = make_socket()
    socket["writes"]["size"] = make_hist([10, 10, 20, 101])
    socket["writes"]["bytes"] = 141
    report = advised(tmp_path, make_trace(sockets=[socket]))
    assert json.loads(render_json(report))["sockets"][0]["writes"]["mean_size"] == 35.25


@pytest.mark.parametrize(("value", "unit", "text"), [
    (3_114_270.0, "count", "3114270"),
    (3_114_270.4, "ratio", "3114270"),
    (0.000123, "ratio", "0.000123"),
    (0.3333, "ratio", "0.333"),
    (1e-5, "fraction", "0.001%"),
    (123_456_789.0, "bytes_per_s", "117.7 MiB/s"),
    (941.0, "mbit_s", "941 Mbit/s"),
    (12_345_678.9, "mbit_s", "12345679 Mbit/s"),
])
def test_text_never_prints_scientific_notation(value, unit, text):
    assert format_value(value, unit) == text


def test_a_report_saved_into_the_trace_directory_is_skipped_with_a_warning(tmp_path):
    write_trace(tmp_path, make_trace())
    # What `tcpadvise report DIR --format json > DIR/report.json` leaves: the shell creates the file
    # empty before tcpadvise runs, and the next run finds a report there.
    (tmp_path / "report.json").write_text("")
    first = invoke("report", "--format", "json", tmp_path)
    assert first.exit_code == 0, first.output
    document = json.loads(first.stdout)
    assert any("skipped" in warning and "report.json" in warning for warning in document["warnings"])
    (tmp_path / "report.json").write_text(first.stdout)
    second = invoke("report", "--format", "json", tmp_path)
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["sockets"] == document["sockets"]
    # Named on its own, a file that is no trace is still an error.
    with pytest.raises(NotATraceError):
        load_inputs([tmp_path / "report.json"])


def test_a_directory_of_only_other_json_files_has_no_traces(tmp_path):
    write_json(tmp_path / "package.json", {"name": "x"})
    with pytest.raises(NoTracesError, match="package.json"):
        load_inputs([tmp_path])


def test_a_command_with_a_slash_runs_as_given_not_from_path(tmp_path, fake_shim, monkeypatch):
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "date"
    mine.write_text("#!/bin/sh\necho mine > ran\n")
    mine.chmod(0o755)
    prog = tmp_path / "prog"
    prog.write_text("#!/bin/sh\nexit 7\n")
    prog.chmod(0o755)
    assert record(["./date"], tmp_path / "out", 5.0, warn=lambda _: None)["exit_status"] == 0
    assert (tmp_path / "ran").read_text() == "mine\n"
    # Not on PATH at all: it runs all the same (it failed with 126).
    assert "." not in os.environ["PATH"].split(":")
    assert record(["./prog"], tmp_path / "out", 5.0, warn=lambda _: None)["exit_status"] == 7


def test_a_fork_parents_unused_copies_are_not_counted_again(tmp_path):
    """The shim's prefork shape: the parent's unused copies fold into one group without a cookie, each
    child holds one inherited connection; a copy that kept its cookie (a group of one) matches its child."""
    def served(cookie):
        socket = make_socket(cookie=cookie, inherited=True, used=True, role="server", service_port=5432,
                             local={"addr": "127.0.0.1", "port": 5432}, peer={"addr": "127.0.0.1", "port": 40000})
        return socket

    copies = make_socket(kind="group", open=False, connections=3, cookie=0, used=False, inherited=False,
                         role="server", service_port=5432, local={"addr": "127.0.0.1", "port": 5432},
                         peer={"addr": "127.0.0.1", "port": 0})
    lone_copy = {**copies, "connections": 1, "cookie": 103}
    for socket in (copies, lone_copy):
        for section in ("writes", "reads"):
            socket[section] = {**socket[section], "calls": 0, "bytes": 0}
    children = [make_trace(program="postgres", pid=20 + n, ppid=10, sockets=[served(100 + n)]) for n in range(4)]
    report = advised(tmp_path, make_trace(program="postgres", pid=10, sockets=[copies, lone_copy]), *children)
    assert sum(item["connections"] for item in report.sockets) == 4
    assert sorted(item["pids"] for item in report.sockets) == [[10, 23], [20], [21], [22]]


def test_the_shims_own_write_counts_are_evidence(tmp_path):
    socket = stream_socket(writes=2000, size=65536, nodelay=False, sndbuf=4096)
    socket["reads"].update(calls=3, bytes=40)  # a conversation: the socket's errors could be its reads'
    socket["bursts"] = {"count": 2, "writes": make_hist([1000, 1000], unit="count"), "bytes": make_hist([4096, 4096])}
    socket["writes"].update(eagain=900, syscall_ns_total_est=1e6)
    report = advised(tmp_path, make_trace(sockets=[socket]))
    (finding,) = report.findings
    values = {item["metric"]: item["value"] for item in finding["evidence"]}
    assert finding["rule"] == "sndbuf-limited" and values["writes.eagain_share"] == 900 / 2000


def test_a_trace_written_as_a_signal_stopped_the_program_says_so(tmp_path):
    report = advised(tmp_path, make_trace(stop_signal="TERM"))
    assert any("stopped by SIGTERM" in warning for warning in report.warnings)


def test_text_shows_the_busiest_socket_items_and_counts_the_rest(tmp_path):
    # 250 connections of one client; the busiest 200 are listed, the total counts all 250.
    sockets = []
    for index in range(250):
        socket = make_socket(cookie=index + 1, local={"addr": "127.0.0.1", "port": 30000 + index})
        socket["writes"]["calls"] = index
        sockets.append(socket)
    report = advised(tmp_path, make_trace(sockets=sockets))
    console = Console(file=io.StringIO(), width=200)
    render_text(report, console)
    text = console.file.getvalue()
    listed = {port for port in range(30000, 30250) if f"127.0.0.1:{port}" in text}
    assert listed == set(range(30050, 30250))  # the 200 with the most calls
    assert "... and 50 more socket items" in text
    assert "250 socket items" in text and "250 socket item(s)" in text


def test_sampled_turns_show_how_many_the_figures_come_from(tmp_path):
    # A socket that sampled its turns (turns.sampled) beside one that recorded them all: the total's
    # percentiles come from the sampled one's recorded turns and all of the other's.
    sampled = make_socket(cookie=1, local={"addr": "127.0.0.1", "port": 30001})
    sampled["turns"]["count"] = 5000
    sampled["turns"]["sampled"] = {"recorded": 520}
    full = make_socket(cookie=2, local={"addr": "127.0.0.1", "port": 30002})
    report = advised(tmp_path, make_trace(sockets=[sampled, full]))
    total = merge_sockets([sampled, full])
    assert total["turns"]["count"] == 5000 + full["turns"]["count"]
    assert total["turns"]["sampled"] == {"recorded": 520 + full["turns"]["count"]}
    assert socket_figures(sampled)["turns"]["recorded"] == 520
    assert "recorded" not in socket_figures(full)["turns"]
    assert merge_sockets([full, full])["turns"].get("sampled") is None
    console = Console(file=io.StringIO(), width=200)
    render_text(report, console)
    text = console.file.getvalue()
    assert "~ from 520 of 5,000 turns" in text
    assert text.count("~ from") == 2  # the sampled socket and the total
