import json

import pytest
from testlib import assert_one_line_error, invoke

from .conftest import make_manifest, make_socket, make_trace, write_json, write_trace


def write_text(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize("command", [[], ["record"], ["report"]])
def test_help_teaches_what_an_example_and_the_output(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.stdout
    assert "tcpadvise report" in result.stdout


def test_report_help_documents_the_json_keys():
    text = invoke("report", "--help").stdout
    for key in ("report-1.schema.json", "findings", "warnings", "size_p50", "writes_p99", "p50_us", "tcp_info"):
        assert key in text


@pytest.mark.parametrize(
    ("make_input", "fragment"),
    [
        (lambda d: write_text(d / "a.json", "{oops"), "not JSON"),
        (lambda d: write_json(d / "a.json", {"hello": 1}), "not a tcpadvise trace"),
        (
            lambda d: write_json(d / "a.json", make_trace(schema="tcpadvise.trace/9")),
            "knows tcpadvise.trace/1",
        ),
        (lambda d: write_json(d / "a.json", make_trace(pid="one")), "invalid tcpadvise.trace/1 at pid"),
        (lambda d: d / "missing.json", "no such file or directory"),
        (lambda d: d, "no traces here"),
    ],
    ids=["not-json", "not-a-trace", "unknown-version", "invalid", "missing", "empty-directory"],
)
def test_report_bad_input_is_one_line_and_exit_2(tmp_path, make_input, fragment):
    assert_one_line_error(invoke("report", str(make_input(tmp_path))), 2, fragment)


def test_report_without_paths_is_one_line_and_exit_2():
    assert_one_line_error(invoke("report"), 2, "no trace given")


def test_report_json_has_the_documented_keys(tmp_path):
    write_trace(tmp_path, make_trace(sockets=[make_socket(), make_socket(role="server")]))
    result = invoke("report", "--format", "json", str(tmp_path))
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert list(document) == ["schema", "traces", "sockets", "findings", "warnings", "policy_effects"]
    item = document["sockets"][0]
    for key in (
        "program",
        "pid",
        "kind",
        "connections",
        "role",
        "family",
        "local",
        "peer",
        "service_port",
        "options_set",
        "options",
        "writes",
        "bursts",
        "turns",
        "reads",
        "errors",
        "tcp_info",
    ):
        assert key in item
    assert set(item["writes"]) == {
        "calls",
        "bytes",
        "by_api",
        "size_p50",
        "size_p99",
        "mean_size",
        "iovcnt_p50",
        "syscall_ns_p50",
        "syscall_ns_p99",
        "gap_ns_p50",
    }
    assert set(item["bursts"]) == {"count", "writes_p50", "writes_p99", "bytes_p50", "bytes_p99"}
    assert set(item["turns"]) == {"count", "p50_us", "p99_us"}
    assert set(item["reads"]) == {"calls", "bytes", "by_api", "size_p50", "eof"}


def test_report_text_lists_sockets_and_warnings(tmp_path):
    write_trace(tmp_path, make_trace(final=False))
    result = invoke("report", str(tmp_path))
    assert result.exit_code == 0
    assert "127.0.0.1:6379" in result.stdout
    assert "warning: client (pid 4242): figures are from a periodic snapshot" in result.stdout


def test_report_on_a_silent_static_run_explains_it(tmp_path):
    write_json(tmp_path / "record.json", make_manifest(static=True))
    result = invoke("report", str(tmp_path))
    assert result.exit_code == 0
    assert "no TCP call was intercepted" in result.stdout
    assert "statically linked" in result.stdout


def test_record_without_a_command_is_a_usage_error():
    result = invoke("record")
    assert result.exit_code == 2
    assert "Missing argument" in result.stderr


def test_record_command_not_found_exits_127(tmp_path, fake_shim):
    result = invoke("record", "-o", str(tmp_path), "--", "no-such-command-tcpadvise")
    assert_one_line_error(result, 127, "no-such-command-tcpadvise: command not found")


def test_record_without_a_shim_exits_125(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(tmp_path / "gone.so"))
    assert_one_line_error(invoke("record", "--", "true"), 125, "TCPADVISE_SHIM")


def test_record_passes_the_exit_status_and_tells_what_next(tmp_path, fake_shim):
    result = invoke("record", "-o", str(tmp_path / "out"), "--", "sh", "-c", "exit 7")
    assert result.exit_code == 7
    assert result.stderr.splitlines()[-1] == (
        f"tcpadvise: traces in {tmp_path / 'out'}: 0 processes, 0 TCP connections, 0 writes; "
        f"next: tcpadvise report {tmp_path / 'out'}"
    )


def test_record_options_stop_at_the_command(tmp_path, fake_shim):
    # "-o" after the command belongs to the command, not to tcpadvise.
    result = invoke("record", "-o", str(tmp_path), "sh", "-c", "exit 4", "-o", "ignored")
    assert result.exit_code == 4
    assert not (tmp_path / "ignored").exists()


def test_record_warns_once_about_a_static_binary(tmp_path, fake_shim, static_binary):
    result = invoke("record", "-o", str(tmp_path), "--", str(static_binary))
    assert result.exit_code == 0
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tcpadvise: warning:")]
    assert len(warnings) == 1 and "statically linked" in warnings[0]


def test_record_rejects_a_bad_interval():
    result = invoke("record", "--interval", "0", "--", "true")
    assert result.exit_code == 2
