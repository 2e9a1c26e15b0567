"""Man pages and shell completions generated from the click commands, so that
they say what --help says. The build runs

    python -m tcpadvise.cli.manpages --man DIR --completions DIR [--version V]

(packaging/CMakeLists.txt) and `cmake --install` installs what it writes:
one page per command (tcpadvise.1, tcpadvise-record.1, tcpadvise-rules-list.1
...) and click's completion scripts for bash, zsh and fish.

A page is built from click's own pieces: the usage line, the help text (its
paragraphs reflowed by man, a paragraph marked with click's \\b kept as it
is), each parameter's help record as --help prints it, and the subcommands of
a group.
"""

import argparse
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path

import click
from click.shell_completion import get_completion_class

PROG = "tcpadvise"
COMPLETE_VAR = "_TCPADVISE_COMPLETE"
# Shell: file name of its completion script.
COMPLETIONS = {"bash": "tcpadvise.bash", "zsh": "_tcpadvise", "fish": "tcpadvise.fish"}


def commands(
    command: click.Command, parent: click.Context | None = None, name: str = PROG
) -> Iterator[click.Context]:
    """A context for `command` and for each of its visible subcommands, depth first."""
    ctx = click.Context(command, info_name=name, parent=parent)
    yield ctx
    for sub in subcommands(ctx):
        yield from commands(sub.command, ctx, sub.info_name)


def subcommands(ctx: click.Context) -> list[click.Context]:
    """A context for each visible subcommand of ctx's command (none but for a group)."""
    group = ctx.command
    if not isinstance(group, click.Group):
        return []
    found = ((name, group.get_command(ctx, name)) for name in group.list_commands(ctx))
    return [click.Context(sub, info_name=name, parent=ctx) for name, sub in found if sub and not sub.hidden]


def page_name(ctx: click.Context) -> str:
    """tcpadvise, tcpadvise-record, tcpadvise-rules-list..."""
    return ctx.command_path.replace(" ", "-")


def escape(text: str) -> str:
    """Text as roff shows it literally: backslashes and hyphens escaped, no line
    taken for a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n"))


def _paragraphs(help_text: str) -> Iterator[str]:
    """The help's paragraphs as roff: \\b ones verbatim, the others reflowed."""
    for paragraph in help_text.split("\n\n"):
        lines = paragraph.strip("\n").split("\n")
        if lines[0].strip() == "\b":
            yield ".PP\n.nf\n" + escape("\n".join(lines[1:])) + "\n.fi"
        elif paragraph.strip():
            yield ".PP\n" + escape(" ".join(line.strip() for line in lines))


def render_page(ctx: click.Context, version: str) -> str:
    """The man page of one command, in roff (man macros)."""
    command = ctx.command
    name = page_name(ctx)
    short = command.get_short_help_str(limit=300).rstrip(".")
    out = [
        f'.TH "{name.upper()}" "1" "" "{PROG} {escape(version)}" "{PROG} manual"',
        ".SH NAME",
        f"{escape(name)} \\- {escape(short)}",
        ".SH SYNOPSIS",
        f".B {escape(ctx.command_path)}",
        escape(" ".join(command.collect_usage_pieces(ctx))),
    ]
    out += [".SH DESCRIPTION", *_paragraphs(inspect.cleandoc(command.help or ""))]
    records = [record for param in command.get_params(ctx) if (record := param.get_help_record(ctx))]
    if records:
        out.append(".SH OPTIONS")
        for terms, text in records:
            out += [".TP", f".B {escape(terms)}", escape(text)]
    children = subcommands(ctx)
    if children:
        out.append(".SH COMMANDS")
        for sub in children:
            out += [".TP", f".B {escape(sub.info_name)}",
                    escape(sub.command.get_short_help_str(limit=300)) + f" See \\fB{escape(page_name(sub))}\\fR(1)."]
    see_also = [page_name(ctx.parent)] if ctx.parent is not None else []
    see_also += [page_name(sub) for sub in children]
    if see_also:
        out += [".SH SEE ALSO", ",\n".join(f".BR {escape(page)} (1)" for page in see_also)]
    return "\n".join(out) + "\n"


def write_man_pages(cli: click.Command, directory: Path, version: str) -> list[Path]:
    """One page per command into `directory` (created); returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for ctx in commands(cli):
        path = directory / f"{page_name(ctx)}.1"
        path.write_text(render_page(ctx, version))
        written.append(path)
    return written


def write_completions(cli: click.Command, directory: Path) -> list[Path]:
    """click's completion script for each shell into `directory` (created)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, file_name in COMPLETIONS.items():
        path = directory / file_name
        path.write_text(get_completion_class(shell)(cli, {}, PROG, COMPLETE_VAR).source())
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    from .main import cli  # imported here: the rest of this module needs no command

    parser = argparse.ArgumentParser(prog="python -m tcpadvise.cli.manpages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--man", type=Path, help="directory for the man pages")
    parser.add_argument("--completions", type=Path, help="directory for the shell completion scripts")
    parser.add_argument("--version", default="", help="the version the pages name")
    args = parser.parse_args(argv)
    if args.man:
        write_man_pages(cli, args.man, args.version)
    if args.completions:
        write_completions(cli, args.completions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
