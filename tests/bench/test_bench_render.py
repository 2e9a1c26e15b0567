"""The summary `tcpadvise bench` prints, from the results of a real loopback
run (data/loopback.results.json), at the widths people read it in: every line
fits, every figure whole, no trailing spaces."""

import json
import re
from pathlib import Path

import pytest
from tcpadvise import schemas
from tcpadvise.bench.render import print_summary, summary_tables, summary_text

RESULTS = json.loads((Path(__file__).parent / "data" / "loopback.results.json").read_text())
TABLE_CORNER = "┏"


def shown_cells(text: str) -> set[str]:
    """Every cell of the text's tables and blocks as printed: between a table's rules, or after a block's label."""
    cells = set()
    for line in text.splitlines():
        if "│" in line:
            cells |= {cell.strip() for cell in line.split("│")}
        elif line.startswith("  "):
            cells.add(re.split(r"\s{2,}", line.strip(), maxsplit=1)[-1])
    return cells


def test_the_results_are_what_bench_writes():
    assert schemas.errors(RESULTS["schema"], RESULTS) == []


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_every_line_fits_without_trailing_spaces(width):
    lines = summary_text(RESULTS, width).splitlines()
    assert max(map(len, lines)) <= width
    assert [line for line in lines if line != line.rstrip()] == []


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_every_figure_is_shown_whole(width):
    text = summary_text(RESULTS, width)
    assert "…" not in text
    lines, cells = text.splitlines(), shown_cells(text)
    for table in summary_tables(RESULTS):
        for name, *figures in table.rows:
            # A row's name is a cell of the table, or its block's heading.
            assert name in cells or f"{table.columns[0]} {name}".strip() in lines
            assert [figure for figure in figures if figure not in cells] == []


def test_at_80_columns_a_table_too_wide_is_a_block_per_row():
    text = summary_text(RESULTS, 80)
    lines = text.splitlines()
    # The ping-pong points (78 columns) stay a table; the nagle arms (over 100) do not.
    assert text.count(TABLE_CORNER) == 1
    plain = lines.index("arm plain")
    assert lines[plain + 1 : plain + 3] == [
        "  round trip [95% CI]    44 [44-44] ms",
        "  p99                    44.0 ms",
    ]
    assert "  Nagle on [95% CI]   14,733 [13,748-17,855]" in lines


def test_at_160_columns_every_table_is_a_table():
    text = summary_text(RESULTS, 160)
    assert text.count(TABLE_CORNER) == len(summary_tables(RESULTS))
    assert "arm plain" not in text.splitlines()


def test_durations_are_in_microseconds_not_us():
    text = summary_text(RESULTS, 80)
    assert "µs" in text
    assert re.findall(r"\d us\b", text) == []


@pytest.mark.parametrize(("columns", "width"), [(None, 80), ("160", 160), ("0", 80), ("wide", 80)])
def test_piped_the_summary_is_80_columns_unless_COLUMNS_says_otherwise(monkeypatch, capsys, columns, width):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    print_summary(RESULTS)
    assert capsys.readouterr().out == summary_text(RESULTS, width)
