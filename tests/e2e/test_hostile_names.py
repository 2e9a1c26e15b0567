"""The shim writes only valid traces, whatever a program is called: a real
client run under hostile names (a copied binary with a 240-character name,
and argv[0] holding invalid UTF-8, a character cut at the shim's limit,
terminal escapes and newlines) leaves a trace whose file name is short and
safe, whose text is strict UTF-8 JSON that the schema accepts, and whose
"program" holds the name (invalid bytes as the text \\xNN); `tcpadvise
report` reads it with exit 0."""
import json
import os
import shutil
import subprocess

import pytest

from testlib import assert_no_sanitizer_report, client_json, invoke, load_traces, prog, shim_env

NAME_MAX = 255

# (argv[0] as bytes, the "program" the trace must hold)
HOSTILE = {
    "invalid-utf8": (b"bad\xff\xfename\xc3", "bad\\xff\\xfename\\xc3"),
    "multibyte-at-127": (b"a" * 126 + "é€".encode() + b"z", "a" * 126 + "é€z"),
    "multibyte-cut-by-the-limit": (b"a" * 254 + "é".encode(), "a" * 254),
    "terminal-escapes-and-newlines": (b"evil\x1b[2J\x1b]0;owned\x07\nname\r\x9b", "evil\x1b[2J\x1b]0;owned\x07\nname\r\\x9b"),
    "c1-control-and-del": ("c1\u0085del\x7f".encode(), "c1\u0085del\x7f"),
}


def run_named(tmp_path, server, argv0, executable=None):
    """Runs the burst client as argv0 (executable: the file to run, when argv0 names none)."""
    out = tmp_path / "traces"
    out.mkdir()
    cmd = [argv0, "client", "--port", str(server.port), "--rounds", "3"]
    result = subprocess.run(cmd, executable=executable, env=shim_env(out), capture_output=True, text=True,
                            timeout=120)
    assert_no_sanitizer_report(result.stderr)
    return out, client_json(result)[0]


def values_of(node, key):
    """Every value of key anywhere in a JSON document."""
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == key] + [x for v in node.values() for x in values_of(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in values_of(v, key)]
    return []


def check_trace(out, did, program):
    (path,) = out.iterdir()
    name = os.fsencode(path.name)
    assert len(name) <= NAME_MAX and len(name) < 100, name
    name.decode("utf-8")  # strict
    assert not any(c < 0x20 or c == 0x7f for c in name) and not name.startswith(b"."), name
    text = path.read_bytes().decode("utf-8")  # strict UTF-8, or UnicodeDecodeError
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-finite number {c} in the trace"))
    trace = load_traces(out)[did["pid"]]  # validated against the schema
    assert trace["program"] == program
    report = invoke("report", out, "--format", "json")
    assert report.exit_code == 0, report.output
    assert program in values_of(json.loads(report.stdout), "program")
    text_report = invoke("report", out)
    assert text_report.exit_code == 0, text_report.output
    assert "Traceback" not in text_report.output


def test_a_240_character_program_name_gets_a_short_file_name_and_the_whole_name_inside(tmp_path, server_factory):
    server = server_factory()
    name = "n" * 230 + "-" + "x" * 9
    binary = tmp_path / name
    shutil.copy(prog("burst"), binary)
    out, did = run_named(tmp_path, server, str(binary))
    check_trace(out, did, name)
    (path,) = out.iterdir()
    assert path.name == f"{'n' * 64}.{did['pid']}.json"


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_argv0_leaves_a_valid_trace_that_report_reads(tmp_path, server_factory, case):
    argv0, program = HOSTILE[case]
    server = server_factory()
    # A symlink named like a path, so that the shim's name is argv[0]'s last part.
    link = tmp_path / "bin"
    link.mkdir()
    os.symlink(prog("burst"), link / "burst")
    out, did = run_named(tmp_path, server, os.fsencode(link) + b"/" + argv0, executable=link / "burst")
    check_trace(out, did, program)
