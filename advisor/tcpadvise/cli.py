"""The tcpadvise command line: thin click commands over record, traces and report."""

from pathlib import Path

import click
from rich.console import Console

from .errors import TcpadviseError
from .policy import BUILTIN_POLICIES, check_config
from .record import DEFAULT_INTERVAL, DEFAULT_OUT_DIR, record, summary_line
from .render import render_json, render_text
from .report import build_report
from .traces import load_inputs

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: a table for people; json: a stable document for scripts (both described above).",
)
out_dir_option = click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_OUT_DIR,
    show_default=True,
    metavar="DIR",
    help="Directory for the traces and record.json; created if missing.",
)
interval_option = click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_INTERVAL,
    show_default=True,
    metavar="SECONDS",
    help="How often a running process rewrites its trace as a snapshot.",
)


class _TcpadviseGroup(click.Group):
    """Turns every TcpadviseError into one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TcpadviseError as error:
            click.echo(f"tcpadvise: error: {error}", err=True)
            ctx.exit(error.exit_code)


@click.group(cls=_TcpadviseGroup, context_settings=CONTEXT_SETTINGS)
def cli() -> None:
    """Record how an unmodified program uses TCP, then report on it.

    \b
    Example:
      tcpadvise record -- curl -s https://example.com/ -o /dev/null
      tcpadvise report tcpadvise-out

    'record' runs the program with a shim preloaded (LD_PRELOAD) that counts
    every TCP write, read and option per socket; 'report' turns those traces
    into a table or JSON. Run 'tcpadvise COMMAND --help' for each.
    """


@cli.command(
    name="record", options_metavar="[OPTIONS] --", context_settings={"allow_interspersed_args": False}
)
@out_dir_option
@interval_option
@click.option(
    "--policy",
    metavar="NAME|FILE",
    help=f"Apply a policy while recording: a built-in name ({', '.join(BUILTIN_POLICIES)}) "
    "for every socket, or a config file of rules (docs/policy-config.md; check it with "
    "'tcpadvise config check FILE'). Default: observe only.",
)
@click.argument("command", nargs=-1, required=True, metavar="CMD [ARGS]...")
@click.pass_context
def record_command(
    ctx: click.Context, out_dir: Path, interval: float, policy: str | None, command: tuple[str, ...]
) -> None:
    """Run CMD with the tcpadvise shim preloaded and record its TCP use.

    Each process of CMD (children too) that opens a TCP socket writes
    DIR/<program>.<pid>.json at exit, and a snapshot every --interval seconds
    while it runs. DIR/record.json tells what was run, how it ended and
    whether the shim could see the binary; 'tcpadvise report' ignores traces
    an earlier run left in DIR. SIGINT and SIGTERM are passed on to CMD.

    The shim is $TCPADVISE_SHIM if set, else build/preload/libtcpadvise.so of
    the source checkout this tcpadvise runs from, else
    <prefix>/lib/tcpadvise/libtcpadvise.so (this Python's prefix, then /usr/local).

    With --policy the shim also acts: nodelay sets TCP_NODELAY, cork corks
    each burst of writes until the program reads or waits, coalesce holds
    small writes and sends them as one (docs/policy-config.md says what each
    promises). The traces say which rule matched each socket and what the
    policy did.

    \b
    Example:
      tcpadvise record -o out -- redis-benchmark -q -n 1000
      tcpadvise record -o out-coalesce --policy coalesce -- ./client
      tcpadvise report out

    \b
    Output, on stderr (CMD's own output is untouched):
      - first, a warning if CMD (or a script's interpreter) is statically
        linked or a Go binary: LD_PRELOAD cannot see those, CMD runs anyway;
      - at the end, one line: where the traces are, how many processes,
        TCP connections and writes they hold, and the report command to run.

    \b
    Exit status: CMD's own, 128+N if it was killed by signal N; 127 if CMD
    is not found, 126 if it cannot be run, 125 if tcpadvise itself cannot
    set up the run (no shim found, DIR not writable).
    """
    manifest = record(command, out_dir, interval, warn=_warn, policy=policy)
    click.echo(summary_line(out_dir), err=True)
    ctx.exit(manifest["exit_status"])


@cli.command(name="report")
@format_option
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="PATH...")
def report_command(output_format: str, paths: tuple[Path, ...]) -> None:
    """Summarise recorded traces, socket by socket.

    PATH is a trace file or a directory of them (such as the DIR of
    'tcpadvise record -o DIR'); record.json there adds what was run.

    \b
    Example:
      tcpadvise report tcpadvise-out
      tcpadvise report --format json tcpadvise-out | jq '.sockets[].writes'

    \b
    Text output: one row per socket (an open connection, or closed ones
    grouped by role, service port and peer), then a total row:
      process       program and pid
      connection    role (client/server/unknown), local -> peer address
      conns         connections in the row, open or closed
      writes        write calls, bytes, median (p50) write size
      writes/burst  writes between two reads, p50 and p99: many small
                    writes per burst is what Nagle and delayed ACKs punish
      turn          from the last write of a burst to the first reply, p50/p99
      reads         read calls and bytes
      nodelay       TCP_NODELAY as the kernel had it; "set by app" if the
                    program set it itself
      errors        failed calls by errno
    then warnings: what the traces cannot show (a static or Go binary the
    shim could not see, a snapshot of a process still running...).

    \b
    JSON output (schema tcpadvise.report/1, in the package as
    schemas/report-1.schema.json):
      traces    the trace files read
      sockets   one item per row: program, pid, kind (socket|group),
                connections, open, role, family, local, peer, service_port,
                options_set (what the program set), options (effective),
                writes {calls, bytes, by_api, size_p50, size_p99, mean_size,
                iovcnt_p50, syscall_ns_p50, syscall_ns_p99, gap_ns_p50},
                bursts {count, writes_p50, writes_p99, bytes_p50, bytes_p99},
                turns {count, p50_us, p99_us},
                reads {calls, bytes, by_api, size_p50, eof},
                errors {ERRNO: count}, tcp_info (as in the trace);
                sizes in bytes, times in ns unless named _us; a percentile
                is null when nothing was recorded
      findings  advice (empty for now)
      warnings  the warnings above, as sentences

    Input that is not a tcpadvise trace, of an unknown version or invalid is
    an error: one line on stderr, exit status 2.
    """
    report = build_report(load_inputs(paths))
    if output_format == "json":
        click.echo(render_json(report), nl=False)
    else:
        render_text(report, Console(highlight=False))


@cli.group(name="config")
def config_group() -> None:
    """Work with policy configs (docs/policy-config.md)."""


@config_group.command(name="check")
@click.argument("file", type=click.Path(path_type=Path))
def config_check_command(file: Path) -> None:
    """Check a policy config with the shim's own parser.

    Prints every mistake as FILE:LINE:COLUMN: message and exits 2, or the
    rules it found and exits 0. A config the shim cannot read makes it
    observe only (with one warning), so check a config before you use it.

    \b
    Example:
      tcpadvise config check policy.yaml
      tcpadvise record --policy policy.yaml -- ./server
    """
    check = check_config(file)
    for line in check.lines:
        click.echo(line, err=not check.ok)
    if not check.ok:
        raise SystemExit(2)


def _warn(message: str) -> None:
    click.echo(f"tcpadvise: warning: {message}", err=True)


def main() -> None:
    cli(prog_name="tcpadvise")
