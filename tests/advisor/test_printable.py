"""Text output shows a traced program's control characters escaped, never raw."""

from tcpadvise.render.printable import printable
from testlib import invoke

from .conftest import make_trace, write_json


def test_printable_escapes_controls_and_keeps_text():
    assert printable("redis-server") == "redis-server"
    assert printable("\x1b[2J\x07a\u202eb\x9b") == "\\x1b[2J\\x07a\\u202eb\\x9b"
    assert printable("naïve 日本 👩\u200d💻") == "naïve 日本 👩\u200d💻"


def test_report_text_neutralises_a_hostile_program_name(tmp_path):
    write_json(
        tmp_path / "t.7.json", make_trace(program="\x1b[2J[/bold]evil\x07", pid=7)
    )
    result = invoke("report", tmp_path)
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\\x1b[2J[/bold]evil\\x07" in result.stdout


def test_report_json_keeps_the_name_as_it_was(tmp_path):
    write_json(tmp_path / "t.7.json", make_trace(program="\x1b[2Jevil", pid=7))
    result = invoke("report", "--format", "json", tmp_path)
    assert result.exit_code == 0, result.output
    assert "\\u001b[2Jevil" in result.stdout
