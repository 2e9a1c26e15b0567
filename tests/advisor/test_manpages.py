"""The man pages generated from the click commands (tcpadvise.cli.manpages): one per
command, saying what --help says, valid roff."""

import shutil
import subprocess

import click
import pytest
from tcpadvise.cli import cli
from tcpadvise.cli.manpages import (
    commands,
    escape,
    render_page,
    write_completions,
    write_man_pages,
)


@click.group()
def toy() -> None:
    """A toy.

    .hidden would be a roff request; so would 'quoted.

    \b
    Example:
      toy run --fast -n 3
    """


@toy.command(name="run")
@click.option("-n", "--count", type=int, default=1, show_default=True, help="How many times.")
def toy_run(count: int) -> None:
    """Run it, \\ with a backslash."""


def test_one_page_per_command_named_by_its_path(tmp_path):
    pages = write_man_pages(cli, tmp_path, "0.1.0")
    names = {path.stem for path in pages}
    assert {"tcpadvise", "tcpadvise-record", "tcpadvise-rules-show", "tcpadvise-ab-report"} <= names
    assert len(names) == len(list(commands(cli)))


def test_a_page_has_the_help_verbatim_blocks_options_and_subcommands():
    ctx, run_ctx = commands(toy, name="toy")
    page = render_page(ctx, "9.9")
    assert page.startswith('.TH "TOY" "1" "" "tcpadvise 9.9"')
    assert ".SH NAME\ntoy \\- A toy\n" in page
    # Lines that would be requests are escaped; \b paragraphs kept line by line.
    assert "\\&.hidden would be a roff request; so would 'quoted." in page
    assert ".nf\nExample:\n  toy run \\-\\-fast \\-n 3\n.fi" in page
    assert ".SH COMMANDS\n.TP\n.B run\nRun it, \\e with a backslash. See \\fBtoy\\-run\\fR(1)." in page
    run_page = render_page(run_ctx, "9.9")
    assert ".TP\n.B \\-n, \\-\\-count INTEGER\nHow many times.  [default: 1]" in run_page
    assert ".SH SEE ALSO\n.BR toy (1)" in run_page


def test_escape_leaves_nothing_roff_would_read():
    assert escape("a-b \\ c\n.x\n'y") == "a\\-b \\e c\n\\&.x\n\\&'y"


def test_pages_are_valid_roff(tmp_path):
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed")
    for page in write_man_pages(cli, tmp_path, "0.1.0"):
        result = subprocess.run(["groff", "-man", "-ww", "-z", str(page)], capture_output=True, text=True, check=True)
        assert result.stderr == "", (page.name, result.stderr)


def test_completion_scripts_for_three_shells(tmp_path):
    scripts = write_completions(cli, tmp_path)
    assert sorted(path.name for path in scripts) == ["_tcpadvise", "tcpadvise.bash", "tcpadvise.fish"]
    assert all("_TCPADVISE_COMPLETE" in path.read_text() for path in scripts)
