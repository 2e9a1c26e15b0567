"""The tcpadvise command line: thin click commands over record, traces and report."""

import gc
import io
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..ab import MAX_SEED
from ..bench import BENCH_SERVER_PORT
from ..bench.netns import PROFILES
from ..bench.servers import PINS
from ..bench.suites import CASE_NAMES, SEED_SUITES, SUITE_NAMES, Settings
from ..errors import BadInputError, OutputWriteError, TcpadviseError
from ..policy.config import BUILTIN_POLICIES
from ..record import DEFAULT_INTERVAL, DEFAULT_OUT_DIR
from .filters import filter_options
from .version import version_text

# Each command imports the modules it works with when it runs: `tcpadvise
# --help` (and every command's) must not pay for rich, numpy, scipy,
# jsonschema or the ELF reader (tests/advisor/test_commands.py).
if TYPE_CHECKING:
    from ..trace.reader import Inputs

CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text: a table for people; json: a stable document for scripts (both described above); "
    "html: one self-contained page with charts, to open in a browser (needs -o FILE, or stdout "
    "redirected to a file).",
)
output_option = click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the report to FILE (replaced whole, mode 0600, never through a symlink; not a device or "
    "pipe) instead of stdout.",
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
rules_option = click.option(
    "--rules",
    "rule_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A rule file of your own (repeatable): its rules join the built-in ones, replacing those of the same id.",
)
by_host_option = click.option(
    "--by-host",
    is_flag=True,
    help="One report per host (the host each trace was written on) instead of one over all of "
    "them; JSON: a list of the reports, each with its \"host\".",
)
interval_option = click.option(
    "--interval",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_INTERVAL,
    show_default=True,
    metavar="SECONDS",
    help="How often a running process rewrites its trace as a snapshot.",
)

# DAMAGED_EXIT: report was written, but damaged traces among the inputs were skipped.
DAMAGED_EXIT = 3


class _TcpadviseGroup(click.Group):
    """Turns every TcpadviseError into one line on stderr and its exit status."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except TcpadviseError as error:
            click.echo(f"tcpadvise: error: {error}", err=True)
            ctx.exit(error.exit_code)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit(0)


@click.group(cls=_TcpadviseGroup, context_settings=CONTEXT_SETTINGS)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Print the CLI's version, the shim 'record' would preload and the schema versions known, then exit.",
)
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
@click.option(
    "--ab",
    "ab_arms",
    metavar="NAME=POLICY,...",
    help="Run an A/B experiment instead: each new connection draws one of these arms at random "
    "(equal weights; the first is the control), e.g. control=observe,treat=coalesce. "
    "Then: tcpadvise ab report DIR.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_SEED),
    help="With --ab: the seed of the draws (default: random, saved in DIR).",
)
@click.option(
    "--call-sites",
    type=click.Choice(["off", "sample", "all"]),
    default="sample",
    show_default=True,
    help="Which writes have their call stack taken, so that the report names the code that "
    "writes: sample (a socket's first 4 writes, then about one in 1024), all (every write: "
    "exact counts, a few µs a write), or off (README, Call sites).",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Keep PATH up to date with the traces' metrics (as 'tcpadvise export --format prometheus') "
    "every --interval and at the end, for node_exporter's textfile collector (name it *.prom in its "
    "directory). Written atomically, mode 0600.",
)
@click.argument("command", nargs=-1, required=True, metavar="CMD [ARGS]...")
@click.pass_context
def record_command(
    ctx: click.Context,
    out_dir: Path,
    interval: float,
    policy: str | None,
    ab_arms: str | None,
    seed: int | None,
    call_sites: str,
    metrics_file: Path | None,
    command: tuple[str, ...],
) -> None:
    """Run CMD with the tcpadvise shim preloaded and record its TCP use.

    Each process of CMD (children too) that opens a TCP socket writes
    DIR/<program>.<pid>.json at exit, and a snapshot every --interval seconds
    while it runs; a fork child's final trace is instead a record of the
    spool its parent made, DIR/<program>.<pid>.<nonce>.spool (no file a
    connection for a fork-per-connection server). DIR/record.json tells what was run, how it ended and
    whether the shim could see the binary; 'tcpadvise report' ignores traces
    an earlier run left in DIR. SIGINT and SIGTERM are passed on to CMD.

    The shim is $TCPADVISE_SHIM if set, else that of the installation
    recorded when this package was installed (TCPADVISE_PREFIX=PREFIX pip
    install), else the one pkg-config finds (pkg-config --variable=shim
    tcpadvise), else build/preload/libtcpadvise.so of the source checkout
    this tcpadvise runs from.

    With --policy the shim also acts: nodelay sets TCP_NODELAY, cork corks
    each burst of writes until the program reads or waits, coalesce holds
    small writes and sends them as one (docs/policy-config.md says what each
    promises). The traces say which rule matched each socket and what the
    policy did. The config is compiled first (DIR/policy.compiled, beside
    DIR/policy.yaml for a built-in name) so that each process loads it in
    one read rather than parsing YAML at its start.

    The shim also samples the call stacks of writes (--call-sites): the
    report names, per socket group and in each finding, the function and
    file:line that writes (module+offset when the binary has no symbols),
    read from the binaries on this machine, matched by build-id.

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
    set up the run (no shim found, DIR or its policy files not writable);
    2, before CMD runs, for bad options, a --policy that is neither a
    built-in name nor a valid config, or a bad --ab.
    """
    from ..ab.experiment import experiment_config, parse_arms
    from ..record.record import record, summary_line

    if seed is not None and ab_arms is None:
        raise click.UsageError("--seed is the seed of --ab's draws: it needs --ab")
    experiment = None
    if ab_arms is not None:
        if policy is not None:
            raise click.UsageError("--ab and --policy exclude each other (an experiment's arms carry the policies)")
        experiment = experiment_config(parse_arms(ab_arms), seed)
    manifest = record(
        command, out_dir, interval, warn=_warn, policy=policy, experiment=experiment, call_sites=call_sites,
        metrics_file=metrics_file,
    )
    click.echo(summary_line(out_dir), err=True)
    ctx.exit(manifest["exit_status"])


@cli.command(name="report")
@format_option
@output_option
@rules_option
@click.option(
    "--calibration",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Figures measured on this machine (tcpadvise.calibration/1, as 'tcpadvise bench' writes): "
    "expected effects quote them instead of the seeds' figures.",
)
@click.option(
    "--emit-policy",
    "policy_file",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Also write the policy config that applies the findings' recommendations, for "
    "'tcpadvise record --policy FILE'.",
)
@by_host_option
@filter_options
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="PATH...")
def report_command(
    output_format: str,
    output: Path | None,
    rule_files: tuple[Path, ...],
    calibration: Path | None,
    policy_file: Path | None,
    by_host: bool,
    paths: tuple[Path, ...],
    min_severity: str,
    **filter_values,
) -> None:
    """Summarise recorded traces, socket by socket, and advise on them.

    PATH is a trace file or a directory of them (such as the DIR of
    'tcpadvise record -o DIR'); record.json there adds what was run. A
    spool (<program>.<pid>.<nonce>.spool, where a forking process's
    children write their final traces) is read as the traces it holds,
    each named <spool>#<pid>; records its children never finished are
    skipped with one warning for the spool (exit status 3).

    \b
    Example:
      tcpadvise report tcpadvise-out
      tcpadvise report --emit-policy policy.yaml tcpadvise-out
      tcpadvise report --format html -o report.html tcpadvise-out
      tcpadvise report --program redis-server --min-severity medium tcpadvise-out
      tcpadvise report --format json tcpadvise-out | jq '.findings[] | {rule, severity, why}'

    \b
    Text output: one row per socket (an open connection, or closed ones
    grouped by role, service port and peer; past 200, the 200 busiest and a
    line counting the others, which JSON lists), then a total row of all:
      process       program and pid
      connection    role (client/server/unknown), local -> peer address
      conns         connections in the row, open or closed, "stream" if
                    they only send, the pids of every process that held
                    the connection if several did
      writes        write calls, bytes, median (p50) write size
      writes/burst  writes between two reads, p50 and p99: many small
                    writes per burst is what Nagle and delayed ACKs punish
      turn          from the first write of a request to its reply, p50/p99
      reads         read calls and bytes
      nodelay       TCP_NODELAY as the kernel had it; "set by app" if the
                    program set it itself, "set by policy" if the shim did
      errors        failed calls by errno
    then warnings: what the traces cannot show (a static or Go binary the
    shim could not see, a snapshot of a process still running...);
    last the findings of the rulebook ('tcpadvise rules list'), most severe
    first (high, medium, low, info), each with: the scope it concerns (the
    sockets of one program, role and service, or a whole run), why, the
    evidence (each metric's value beside the threshold it passed), the
    policy to try and the change to make in the code, the expected effect
    and its source (a seed under ../shared/seeds/, or "measured here" from
    --calibration).

    \b
    JSON output (schema https://tcpadvise.dev/schemas/report/1, in the package as
    schemas/report-1.schema.json):
      traces    the trace files read
      sockets   one item per row: program, pid, pids (every process that
                held the connection: a prefork server's listener and child
                share one, counted once by its cookie), cookie, live,
                observed_s, nodelay_set_by (app|policy|null), stream
                (writes only, nothing read), kind
                (socket|group), connections, open, role, family, local,
                peer, service_port,
                options_set (what the program set), options (effective),
                writes {calls, bytes, by_api, size_p50, size_p99, mean_size,
                iovcnt_p50, syscall_ns_p50, syscall_ns_p99, gap_ns_p50},
                bursts {count, writes_p50, writes_p99, bytes_p50, bytes_p99},
                turns {count, p50_us, p99_us},
                reads {calls, bytes, by_api, size_p50, eof},
                errors {ERRNO: count}, tcp_info (as in the trace);
                sizes in bytes, times in ns unless named _us; a percentile
                is null when nothing was recorded
      findings  one item per rule and scope, most severe first: rule,
                title, severity (high|medium|low|info), confidence
                (high|medium|low), scope {program, role, local_port, peer,
                peer_port, pids, connections, affected_connections (those
                the rule held on, judged connection by connection too),
                sockets (indexes into sockets), command (for a run, else
                null)}, evidence [{metric,
                value, unit, op, threshold}] (op and threshold null for
                context), why, recommendation {policy (what record --policy
                accepts), code, note}, expected_effect, source {seeds,
                note, seed_effect, calibration}
      warnings  the warnings above, as sentences
      policy_effects  per socket group that writes, what adaptive cork
                or coalesce would do: {program, role, local_port,
                peer, peer_port, connections, bursts,
                multi_write_bursts, effect (none: every burst is one
                write, passed straight through | holds), text}

    HTML output: one self-contained page (no network needed to open it)
    with text's table and findings and, per socket group (the 20 with the
    most writes), charts of write sizes, writes per burst, turn times and
    a timeline of its 10 busiest socket items.

    In a directory, a file that is not a tcpadvise document (not JSON, or
    JSON without a tcpadvise schema, such as a report saved there) is
    skipped with a warning. A file named on its own that is not a trace, a
    trace of an unknown version or invalid, a bad rule file or
    calibration, is an error: one line on stderr, exit status 2. A damaged
    trace (invalid, cut short, of an unknown version) among good ones is
    skipped with a warning naming the file and the field: the report is
    written from the others and the exit status is 3.

    \b
    Exit status: 0 every trace read; 2 an error (nothing written);
    3 the report written, but damaged traces were skipped.
    """
    from ..model.filters import filter_inputs
    from ..model.streaming import stream_report
    from ..render.json import JsonReportWriter
    from ..render.printable import neutralised_report
    from ..render.text import render_text
    from ..rules.calibration import load_calibration
    from ..rules.rulebook import load_rulebook
    from ..trace.hosts import split_by_host
    from ..trace.reader import load_inputs
    from .filters import filters_from

    rulebook = load_rulebook(rule_files)
    measured = load_calibration(calibration) if calibration is not None else None
    filters = filters_from(filter_values)
    _require_html_destination(output_format, output)
    if by_host and policy_file is not None:
        raise click.UsageError("--emit-policy writes one config for all the traces: leave out --by-host")
    if by_host and output_format == "html":
        raise click.UsageError("--by-host writes text or json; for a page per host, filter the traces by host")
    # Every format reads the traces one socket at a time (model/streaming.py): what is held is a
    # compressed copy of each trace, the socket groups' sums and the busiest items; JSON writes
    # each socket item as it comes; the page keeps a few items per group for its timelines.
    inputs = filter_inputs(load_inputs(paths, compact=True), filters)
    if output_format == "html":
        from ..render.html import TIMELINE_SOCKETS, report_html  # matplotlib: imported only for html

        report = stream_report(inputs, filters, rulebook, measured, min_severity, sample=TIMELINE_SOCKETS)
        _emit_policy(policy_file, report.findings)
        _emit(report_html(report), output)
        _exit_if_damaged(inputs)
        return
    parts = split_by_host(inputs) if by_host else {None: inputs}

    def reports(out=None):
        """Each part's report; with out, each written there as JSON while it is read."""
        if out is not None:
            out.write(b"[" if by_host else b"")
        for number, (host, part) in enumerate(parts.items()):
            writer = None
            if out is not None:
                writer = JsonReportWriter(out, level=1 if by_host else 0)
                if by_host:
                    out.write(b"\n  " if number == 0 else b",\n  ")
                writer.begin([str(trace.path) for trace in part.traces], host)
            report = stream_report(part, filters, rulebook, measured, min_severity,
                                   sink=(lambda item, _raw: writer.item(item)) if writer is not None else None,
                                   with_total=writer is None)
            if writer is not None:
                writer.end(report.findings, report.warnings, report.policy_effects)
            yield host, report
        if out is not None:
            out.write((b"\n]" if parts else b"]") + b"\n" if by_host else b"\n")

    if output_format == "json":
        findings = _emit_streamed(lambda out: [report.findings for _, report in reports(out)], output)
        if not by_host:
            _emit_policy(policy_file, findings[0])
    else:
        done = dict(reports())
        if not by_host:
            _emit_policy(policy_file, done[None].findings)

        def render_all(console) -> None:
            for host, report in done.items():
                if by_host:
                    console.print(f"host {host}", style="bold underline")
                render_text(neutralised_report(report), console)

        _emit_text(render_all, output)
    _exit_if_damaged(inputs)


def _emit_policy(policy_file: Path | None, findings: list[dict]) -> None:
    """--emit-policy: the config that applies the findings' recommendations, and a line saying so."""
    from ..policy.config import write_policy_config

    if policy_file is None:
        return
    config = write_policy_config(policy_file, findings)
    click.echo(
        f"tcpadvise: wrote {len(config['rules'])} policy rule(s) to {policy_file}; "
        f"next: tcpadvise record --policy {policy_file} -- COMMAND",
        err=True,
    )


@cli.command(name="export")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["openmetrics", "prometheus"]),
    default="openmetrics",
    show_default=True,
    help="openmetrics: OpenMetrics text; prometheus: Prometheus's text format 0.0.4 (what "
    "node_exporter's textfile collector and 'promtool check metrics' read).",
)
@rules_option
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="Only traces written on this host (repeatable; the trace's host field).")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="PATH...")
def export_command(output_format: str, rule_files: tuple[Path, ...], hosts: tuple[str, ...],
                   paths: tuple[Path, ...]) -> None:
    """Print the traces' socket groups as metrics for Prometheus.

    PATH: trace files or directories, from any number of hosts. A socket
    group is one host's sockets of one program, role and service under one
    policy and experiment arm. Every metric has the labels host, program,
    role, port (a server's local port), peer (a client's peer ADDR:PORT),
    policy (the settings applied, "observe" for none), experiment, arm
    (empty where they do not apply).

    \b
    Example:
      tcpadvise export tcpadvise-out > tcpadvise.om
      tcpadvise export --format prometheus --host web1 out | promtool check metrics

    \b
    Metrics (counters end in _total):
      tcpadvise_connections, _writes, _written_bytes, _reads, _read_bytes,
      _turns; tcpadvise_errors{errno}; tcpadvise_policy_releases{cause}
      tcpadvise_write_size_bytes, _burst_writes, _turn_seconds: histograms
      tcpadvise_arm_connections, _arm_calls, _arm_errors and the histogram
      tcpadvise_arm_turn_seconds: per experiment arm, what 'ab report' reads
      tcpadvise_finding_info{rule,severity}: one per finding of the rulebook
      tcpadvise_traces: traces read
    Histogram buckets: 4 per power of two; the shim's finer buckets are
    counted at the first le at or above their top (README, Metrics).
    """
    from ..render.openmetrics import render
    from ..rules.rulebook import load_rulebook
    from ..trace.reader import load_inputs

    inputs = _on_hosts(load_inputs(paths, compact=True), hosts)
    click.echo(render(inputs, load_rulebook(rule_files), output_format), nl=False)


@cli.command(name="serve-metrics")
@click.option("--listen", default="127.0.0.1:9465", show_default=True, metavar="ADDR:PORT",
              help="Address and port to serve /metrics on.")
@rules_option
@click.option("--host", "hosts", multiple=True, metavar="NAME", help="Only traces written on this host (repeatable).")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), metavar="DIR")
def serve_metrics_command(listen: str, rule_files: tuple[Path, ...], hosts: tuple[str, ...], directory: Path) -> None:
    """Serve /metrics for the traces in DIR while the programs run.

    DIR is a 'tcpadvise record -o DIR' directory (or any with traces): each
    scrape re-reads it, at most once a second, so A/B arms can be watched
    live; the metrics are those of 'tcpadvise export'. Runs until
    interrupted.

    \b
    Example:
      tcpadvise record -o out --ab control=observe,treat=coalesce -- ./server &
      tcpadvise serve-metrics --listen 127.0.0.1:9465 out
    """
    from ..render.serve_metrics import MetricsSource, parse_listen, serve
    from ..rules.rulebook import load_rulebook

    address = parse_listen(listen)
    source = MetricsSource(directory, load_rulebook(rule_files), hosts)
    try:
        serve(address, source, ready=lambda server: click.echo(
            f"tcpadvise: serving http://{listen}/metrics for {directory}", err=True))
    except KeyboardInterrupt:
        pass


@cli.group(name="rules")
def rules_group() -> None:
    """The rulebook behind the findings of 'tcpadvise report'.

    Rules are YAML data (schema https://tcpadvise.dev/schemas/rules/1, in the package as
    schemas/rules-1.schema.json): a condition over documented metrics
    ('tcpadvise rules metrics'), a severity, a confidence, a recommendation
    (a policy and a code change) and the source of its expected effect.
    Add your own with 'tcpadvise report --rules FILE'.

    \b
    Example:
      tcpadvise rules list
      tcpadvise rules show nagle-delayed-ack
      tcpadvise rules check my-rules.yaml && tcpadvise report --rules my-rules.yaml tcpadvise-out
    """


@rules_group.command(name="list")
@rules_option
def rules_list_command(rule_files: tuple[Path, ...]) -> None:
    """List the rules: id, severity, subject, sources and title.

    \b
    Example:
      tcpadvise rules list --rules my-rules.yaml

    Severity shows each level a rule can give, most severe first. Sources are
    seed numbers (../shared/seeds/NNN_*.txt) or another reference; a rule
    from a --rules file names its file.
    """
    from ..rules.rulebook import builtin_rule_files, load_rulebook

    rules = load_rulebook(rule_files).rules
    width = max(len(rule.id) for rule in rules)
    builtin_origins = {str(path) for path in builtin_rule_files()}
    for rule in rules:
        severity = rule.data["severity"]
        levels = [severity] if isinstance(severity, str) else [entry["level"] for entry in severity]
        seeds = [seed[:3] for seed in rule.data["source"].get("seeds", [])]
        origin = "" if rule.origin in builtin_origins else f"  (from {rule.origin})"
        click.echo(
            f"{rule.id:<{width}}  {'/'.join(levels):<8}  {rule.subject:<5}  "
            f"{','.join(seeds) or 'note':<7}  {rule.data['title']}{origin}"
        )


@rules_group.command(name="show")
@rules_option
@click.argument("rule_id", metavar="ID")
def rules_show_command(rule_files: tuple[Path, ...], rule_id: str) -> None:
    """Print rule ID as written in its file, comments included.

    Two lines come first: the file and line, then where the seed files and
    the docs ({docs}) it names are (shipped with tcpadvise).

    \b
    Example:
      tcpadvise rules show sndbuf-limited
    """
    from ..resources import DOCS_DIR, DOCS_PLACEHOLDER, SEEDS_DIR
    from ..rules.rulebook import load_rulebook

    rule = load_rulebook(rule_files).get(rule_id)
    if rule is None:
        raise BadInputError(f"no rule has the id '{rule_id}' ('tcpadvise rules list' names them)")
    click.echo(f"# {rule.origin}, line {rule.line}")
    click.echo(f"# seeds: files of {SEEDS_DIR}; {DOCS_PLACEHOLDER}: {DOCS_DIR}")
    click.echo(rule.source_text, nl=False)


@rules_group.command(name="check")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE...")
@click.pass_context
def rules_check_command(ctx: click.Context, files: tuple[Path, ...]) -> None:
    """Check rule files: every mistake with its line and column, or a summary.

    Checks the schema (https://tcpadvise.dev/schemas/rules/1), then what it cannot: metric names
    and units against their comparisons, {metric} placeholders, level and
    variant lists, calibration measurements, the ids of suppressed_by
    (against the built-in rules and the files given).

    \b
    Example:
      tcpadvise rules check my-rules.yaml

    \b
    Output: "FILE:LINE:COLUMN: message" per mistake and exit status 2, or
    "FILE: N rule(s): ID, ..." per file and exit status 0.
    """
    from ..rules.rulebook import check_rule_files

    rules, problems = check_rule_files(files)
    for problem in problems:
        click.echo(problem)
    if problems:
        ctx.exit(2)
    for file in files:
        ids = [rule.id for rule in rules if rule.origin == str(file)]
        click.echo(f"{file}: {len(ids)} rule(s): {', '.join(ids)}")


@rules_group.command(name="metrics")
def rules_metrics_command() -> None:
    """List the metrics a rule can test, with their units.

    Scope metrics describe the sockets of one program, role and service
    (several processes and connections folded together); run metrics, one
    'tcpadvise record' run. A metric that cannot be computed (no turns, no
    tcp_info, sockets that disagree) has no value, and no condition on it
    holds. Units: bytes, us (microseconds), count, ratio, fraction (0 to 1),
    bool, text.

    \b
    Example:
      tcpadvise rules metrics | grep tcp.
    """
    from ..model.metrics import METRICS

    width = max(len(name) for name in METRICS)
    for metric in METRICS.values():
        click.echo(f"{metric.name:<{width}}  {metric.unit:<8}  {metric.subject:<5}  {metric.description}")


@cli.group(name="ab")
def ab_group() -> None:
    """A/B experiments: compare socket policies on live traffic."""


@ab_group.command(name="report")
@format_option
@output_option
@click.option("--experiment", metavar="NAME", help="Which experiment, when the traces hold several.")
@click.option(
    "--min-effect",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.05,
    show_default=True,
    help="Smallest change of the mean turn time, as a fraction of control's, worth a verdict.",
)
@by_host_option
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="PATH...")
def ab_report_command(
    output_format: str,
    output: Path | None,
    experiment: str | None,
    min_effect: float,
    by_host: bool,
    paths: tuple[Path, ...],
) -> None:
    """Say which arm of an experiment wins.

    PATH is a trace, or a directory of traces, from any number of processes
    and hosts (record with 'tcpadvise record --ab control=observe,treat=coalesce
    -- CMD', or a config with an experiment: docs/policy-config.md). Every
    snapshot carries the connections still open, so a running experiment can
    be looked at as often as you like: the verdict uses a 95% always-valid
    confidence sequence, which holds at every look. Arms are compared over
    connections, the unit that was randomised: each connection's mean turn
    time (its first write of a request to the first byte of the reply, the
    same under every policy), lower is better.

    \b
    Example:
      tcpadvise record -o trial --interval 1 --ab control=observe,treat=coalesce -- ./client
      tcpadvise ab report trial      # while it runs, and again after
      tcpadvise ab report --format html -o trial.html trial

    \b
    Per arm: connections (and how many are live), turns, turn p50/p90/p99,
    throughput, segments and calls per turn, errors (EAGAIN and EINTR are not
    errors), and whether the guardrail stopped it. Split: the arms drawn
    against the weights (a sample-ratio-mismatch chi-square test), with a
    warning when an arm is empty or the split is off. Against control: the
    ratio of geometric means with its confidence sequence and always-valid
    p-value; the fixed-horizon bootstrap interval and rank test are shown
    too, valid only at a size fixed in advance. Verdict: the winner (beyond
    chance, and by at least --min-effect), no difference (within
    --min-effect), or not enough data (with the connections per arm that
    would tell). Keep --min-effect the same between looks.

    \b
    JSON (schemas/ab-report-1.schema.json): experiment, seed, state (running or
    finished), live_connections, control, arms [{name, connections,
    live_connections, drawn, turns, turn_p50_us, ..., stopped, stop_reasons}],
    split {drawn, expected, p_value, ok, empty_arms}, comparisons [{arm,
    ratio, ratio_cs, always_valid_p, significant, equivalent, fixed_horizon
    {ci95_us, p_value}, ...}], verdict {outcome, winner, reason,
    connections_needed}, warnings.

    HTML: one self-contained page with the verdict, the arms, each arm's
    turn-time distribution and per-connection means, and against control
    the confidence sequence and the fixed-horizon interval, drawn.
    """
    from ..ab.experiment import build_ab_report, collect
    from ..render.json import dumps
    from ..render.printable import neutralised
    from ..render.text import render_ab_text
    from ..trace.hosts import split_by_host
    from ..trace.reader import load_inputs

    _require_html_destination(output_format, output)
    # An experiment is read from each trace's "experiment" block: the sockets are never held (compact).
    inputs = load_inputs(paths, compact=True)
    if by_host:
        _emit_by_host(
            output_format,
            output,
            {host: (report, lambda console, report=report: render_ab_text(neutralised(report), console))
             for host, report in ((host, build_ab_report(part, experiment, min_effect))
                                  for host, part in split_by_host(inputs).items())},
        )
        return
    report = build_ab_report(inputs, experiment, min_effect)
    if output_format == "html":
        from ..render.html import ab_html

        _emit(ab_html(report, collect(inputs, report["experiment"])), output)
    elif output_format == "json":
        _emit(dumps(report), output)
    else:
        _emit_text(lambda console: render_ab_text(neutralised(report), console), output)


# REGRESSION_EXIT: diff --fail-on-regression found a turn time that grew or a finding that appeared.
REGRESSION_EXIT = 1


@cli.command(name="diff")
@click.argument("before", type=click.Path(exists=True, path_type=Path))
@click.argument("after", type=click.Path(exists=True, path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: a table for people; json: a document for scripts (schema https://tcpadvise.dev/schemas/diff/1).")
@output_option
@rules_option
@click.option("--fail-on-regression", is_flag=True,
              help=f"Exit {REGRESSION_EXIT} when a group's turn p50 or p99 grew significantly or a finding appeared.")
def diff_command(before: Path, after: Path, output_format: str, output: Path | None, rule_files: tuple[Path, ...],
                 fail_on_regression: bool) -> None:
    """Compare two recordings, before and after a change.

    BEFORE and AFTER are each a trace file or a directory of them (as for
    'report'). For every socket group in both (as the report's findings
    scope them: a program's server on one local port, or its client
    connections to one peer address and port; streams apart): turn p50
    and p99, writes per burst (p50), each with the change and its 95%
    interval, and data segments per write. Then the groups found on one
    side only, and the findings that appeared or went away.

    The intervals come from scipy.stats.bootstrap (percentile method, 999
    resamples, a fixed seed: the same inputs print the same intervals)
    over the samples of each side's histograms; a change whose interval
    excludes 0 is marked '*' (JSON: "significant"). The turns of one
    connection are treated as independent, a simplification that
    narrows the interval when they are not.

    \b
    Example:
      tcpadvise record -o before -- ./client
      tcpadvise record -o after --policy nodelay -- ./client
      tcpadvise diff before after

    \b
    Exit status: 0 compared; 1 with --fail-on-regression, a regression;
    2 an error (a path that holds no trace, a bad rule file);
    3 compared, but damaged traces were skipped.
    """
    from ..model.diff import diff_reports, regressed
    from ..model.filters import Filters
    from ..model.streaming import stream_report
    from ..render.json import dumps
    from ..render.printable import neutralised
    from ..render.text import render_diff_text
    from ..rules.rulebook import load_rulebook
    from ..trace.reader import load_inputs

    rulebook = load_rulebook(rule_files)
    sides = []
    for path in (before, after):
        # Each side read one socket at a time (model/streaming.py): its groups' sums and findings.
        inputs = load_inputs((path,), compact=True)
        sides.append((inputs, stream_report(inputs, Filters(), rulebook, with_total=False)))
    document = diff_reports(sides[0][1], sides[1][1])
    if output_format == "json":
        _emit(dumps(document), output)
    else:
        _emit_text(lambda console: render_diff_text(neutralised(document), console), output)
    for inputs, _ in sides:
        _exit_if_damaged(inputs)
    if fail_on_regression and regressed(document):
        sys.exit(REGRESSION_EXIT)


def _cases(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[tuple[str, int | None], ...]:
    """--case NAME[=RUNS], repeated: (name, runs or None) in the order given, a name once."""
    cases: dict[str, int | None] = {}
    for value in values:
        name, equals, runs = value.partition("=")
        if name not in CASE_NAMES:
            raise BadInputError(f"--case {value}: {name!r} is not a case of the servers suite; the cases: "
                                f"{', '.join(CASE_NAMES)}")
        if equals and not (runs.isdigit() and int(runs) >= 1):
            raise BadInputError(f"--case {value}: RUNS must be a whole number of at least 1 (--case {name}=31)")
        cases[name] = int(runs) if equals else cases.get(name)
    return tuple(cases.items())


@cli.command(name="bench")
@click.argument("named_suites", nargs=-1, metavar="[SUITE]...", type=click.Choice(SUITE_NAMES))
@click.option(
    "--suite",
    "suites",
    multiple=True,
    type=click.Choice(SUITE_NAMES),
    help="A suite to run (the same as naming it); repeat for several. Default: the four seeds' suites.",
)
@click.option(
    "-o",
    "--out",
    "calibration_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("calibration.json"),
    show_default=True,
    metavar="FILE",
    help="The calibration to write; the full results go beside it as NAME.results.json.",
)
@click.option("--target", metavar="HOST:PORT", help="Measure the path to a 'tcpadvise bench-server' you run there.")
@click.option(
    "--link",
    type=click.Choice(list(PROFILES)),
    metavar="PROFILE",
    help=f"Measure a veth pair between two network namespaces instead of loopback: "
    f"{', '.join(PROFILES)} (needs root).",
)
@click.option(
    "--plot",
    "plot_dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Also draw one PNG chart per suite into DIR.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Also write one self-contained page with every suite's chart and the tables (opens offline).",
)
@click.option("--runs", type=click.IntRange(min=1), default=Settings.runs, show_default=True,
              help="Runs of every arm (a fresh process and connection each).")
@click.option("--rounds", type=click.IntRange(min=1), default=Settings.rounds, show_default=True,
              help="Round trips per message size and run; an arm that stalls stops after ROUNDS x 2 ms.")
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="Length of each stream run (default: 0.3 on loopback and fast links, 1 at 10mbit, 2 at 1mbit) "
              "and of each server run (default: 2).")
@click.option("--pin", type=click.Choice(PINS), default="none", show_default=True,
              help="Where each server and its load client run (servers suite): where the scheduler puts them "
              "(none), the server on one CPU and the client on another (split), or both on one (same: the "
              "server's CPU/request moves least).")
@click.option("--case", "cases", multiple=True, metavar="NAME[=RUNS]", callback=_cases,
              help=f"Run only this case of the servers suite, RUNS times if given (else --runs); repeat for "
              f"several. Default: every case. The cases: {', '.join(CASE_NAMES)}.")
def bench_command(
    named_suites: tuple[str, ...],
    suites: tuple[str, ...],
    calibration_path: Path,
    target: str | None,
    link: str | None,
    plot_dir: Path | None,
    html_path: Path | None,
    runs: int,
    rounds: int,
    seconds: float | None,
    pin: str,
    cases: tuple[tuple[str, int | None], ...],
) -> None:
    """Measure the seeds' experiments, or the policies on real servers, here.

    By default, reproduces the benchmarks the advice cites (../shared/seeds)
    with tcpadvise-loadgen, and writes FILE for 'tcpadvise report
    --calibration FILE', whose findings then quote the effect measured here
    instead of the seed's. 'tcpadvise bench servers' measures what each
    policy costs real servers and gains multi-write clients.

    \b
    Example:
      tcpadvise bench -o calibration.json --plot plots
      tcpadvise bench --suite nagle --html bench.html
      sudo tcpadvise bench --link 100mbit --suite pingpong --suite rpc
      tcpadvise report --calibration calibration.json tcpadvise-out
      tcpadvise bench servers --runs 7 -o servers.json --plot plots
      tcpadvise bench servers --case redis --case nagle=31 --runs 11

    \b
    Suites (the seed each reproduces):
      pingpong  000  N bytes and a 1-byte answer, N from 1 to 9901 in steps
                     of 100, then exactly one segment (MSS), one byte more
                     and three segments plus one; the penalty for filling a
                     segment, a second and a fourth, as the seed's summary
      nagle     004  15 two-byte writes then a 2-byte reply: as is (Nagle
                     on), TCP_NODELAY, TCP_CORK, one writev, and the same
                     program under the shim's nodelay, cork and coalesce
      stream    003  throughput by write size (1 B to 64 KiB) with Nagle
                     on and off, and by SO_SNDBUF (4 KiB to 1 MiB)
      rpc       002  requests of 512 to 8960 bytes (around 4096 and 8192)
                     as one write, and as a large write plus a 4-byte tail
      servers   -    not run unless named: redis-server (redis-benchmark
                     GET), memcached (memcslap get), nginx (wrk, a 4 KiB
                     file, sendfile off) and PostgreSQL (pgbench -C -S) on
                     loopback, each server under no shim (baseline),
                     observe, adaptive cork and coalesce and their fixed
                     forms; requests/s as the client counts them, and
                     the CPU time the server's whole process tree spent
                     per request while the client ran (from a cgroup the
                     server runs in: v2 cpu.stat, else v1 cpuacct; needs
                     root, else left out with the reason), each against
                     the baseline (goal: adaptive within 1%; the CPU time
                     moves less from run to run than requests/s, which
                     also moves with how the CPUs are shared: it is the
                     figure to read against 1%). Then 15 x 2 B
                     writes and a 16 B header then a 1000 B body under the
                     same policies and as one writev (goal: adaptive within
                     5% of writev). Every ratio is paired: each run over
                     the reference's run of the same round, median and
                     95% interval (exact, of order statistics: with 7
                     runs the lowest to the highest); a goal is met when
                     the whole interval is within it, missed when all of
                     it is beyond, else not resolved (fewer than 6 runs
                     never resolve a goal: --runs 7 or more). Each
                     server run lasts --seconds (default 2); a server not
                     installed is left out with a warning. --case NAME
                     runs only that case (redis, memcached, nginx,
                     postgres; the clients nagle, header-body: the names
                     the tables and goal lines start with), NAME=RUNS
                     that many times (the clients are quick: more runs
                     resolve 5% sooner); the results say which ran and
                     how often (cases). --pin same runs each server and
                     its client on one CPU (its CPU/request moves least
                     from run to run), split on two. The servers' traces go to tmpfs (/dev/shm)
                     when there is one: a fork-per-connection server
                     writes a trace file per connection, whose creation
                     on disk is the file system's cost. It yields no
                     calibration.

    \b
    Paths: loopback by default. --link builds two network namespaces
    joined by a veth pair (MTU 1500, addresses 198.18.0.1-2) with a tbf
    rate limit (veth: none), and removes them afterwards, on errors and
    Ctrl-C too. --target measures the path to another machine, where
    'tcpadvise bench-server' runs.

    \b
    Statistics: every arm runs --runs times, arms interleaved; the first
    rounds of each run are warm-up and not counted. Each figure pools the
    runs: count n, minimum, median with its 95% confidence interval
    (bootstrap over runs, then samples; with one sample a run, the exact
    interval of order statistics, at least 95%), p99. Throughput is what the
    receiver got per interval, after the first third of the run. On
    loopback and --link, both ends of a round trip share one CPU
    (taskset), so that cross-CPU wake-ups do not drown what the bytes
    cost; streams get the CPUs the scheduler gives them.

    \b
    Output: a progress bar on stderr; the tables, the seeds' figures beside
    ours and notes on where they differ on stdout, as wide as the terminal
    (in a pipe or a file, $COLUMNS or else 80 columns; a table wider than
    that is printed as a block per row, every figure whole); FILE
    (tcpadvise.calibration/1: nagle, large_write_tail, small_writes,
    sndbuf, extra_segment, and nagle_shim, segment_penalties) and
    NAME.results.json (every summary, per arm and size). With the defaults
    it takes under a minute on loopback, about one at 100mbit, several at
    10mbit and 1mbit (raise --runs, --rounds and --seconds for tighter
    intervals).

    Exit status: 0; 2 for bad options or --link without root; 1 if a run
    fails (the message names the arm) or FILE or DIR cannot be written.
    """
    from rich.console import Console

    from ..bench.render import ProgressBar, print_summary, summary_text
    from ..bench.run import prepare_plot_directory, run_bench, write_outputs

    chosen = {*named_suites, *suites}
    if cases and "servers" not in chosen:
        raise BadInputError("--case chooses among the servers suite's cases: name the suite too "
                            "(tcpadvise bench servers --case redis)")
    settings = Settings(tuple(name for name in SUITE_NAMES if name in chosen) or SEED_SUITES, runs, rounds, seconds,
                        cases, pin)
    if plot_dir is not None:
        prepare_plot_directory(plot_dir)
    with ProgressBar(Console(stderr=True)) as progress:
        result = run_bench(settings, progress, target=target, link=link)
    results_path = write_outputs(result, calibration_path)
    print_summary(result.results)
    written = [str(calibration_path), str(results_path)]
    if plot_dir is not None:
        # matplotlib takes half a second to import: only for --plot and --html.
        from ..bench.plot import write_plots

        written += [str(path) for path in write_plots(result.results, plot_dir)]
    if html_path is not None:
        from ..render.html import bench_html

        # A page is wider than a terminal: 120 columns keep most tables tables.
        _write_output(html_path, bench_html(result.results, summary_text(result.results, 120)))
        written.append(str(html_path))
    click.echo(f"tcpadvise bench: wrote {', '.join(written)}", err=True)


@cli.command(name="bench-server")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on ('::' for IPv6).")
@click.option("--port", type=click.IntRange(0, 65535), default=BENCH_SERVER_PORT, show_default=True,
              help="Port to listen on; 0 lets the kernel choose.")
def bench_server_command(host: str, port: int) -> None:
    """Run the far end of 'tcpadvise bench --target' on this machine.

    Answers every suite's requests and swallows its streams until Ctrl-C,
    one thread per connection. Run it on the other machine of the path you
    want to measure.

    \b
    Example (on host B, then on host A):
      tcpadvise bench-server --port 7357
      tcpadvise bench --target B:7357 -o calibration-to-b.json
    """
    from ..bench.run import serve

    serve(host, port, announce=lambda bound: click.echo(
        f"tcpadvise bench-server: listening on {host}:{bound}; measure with "
        f"'tcpadvise bench --target THIS-HOST:{bound}' (Ctrl-C stops)", err=True))


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
    from ..policy.config import check_config

    check = check_config(file)
    for line in check.lines:
        click.echo(line, err=not check.ok)
    if not check.ok:
        raise SystemExit(2)


@config_group.command(name="compile")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True,
              help="Where to write the compiled config (a new file, mode 0600).")
def config_compile_command(file: Path, output: Path) -> None:
    """Compile a policy config for a program started without tcpadvise record.

    The shim reads a YAML config through yaml-cpp, which costs about 2 ms at
    the start of every process (bench/start_cost.py); a compiled config is
    read in microseconds. Point TCPADVISE_CONFIG at the compiled file. It is
    tied to this build of the shim: recompile after upgrading tcpadvise (a
    stale one makes the shim warn and only observe). `tcpadvise record
    --policy` compiles the config itself.

    \b
    Example:
      tcpadvise config compile policy.yaml -o /etc/tcpadvise/policy.compiled
      LD_PRELOAD=/usr/local/lib/tcpadvise/libtcpadvise.so \\
        TCPADVISE_CONFIG=/etc/tcpadvise/policy.compiled ./server
    """
    from ..errors import PolicyWriteError
    from ..policy.config import compile_config
    from ..safefile import write_atomically

    compiled = compile_config(file)
    try:
        write_atomically(output, compiled)
    except OSError as error:
        raise PolicyWriteError(f"{output}: cannot write the compiled config ({error.strerror})") from None
    click.echo(f"tcpadvise: wrote {output}", err=True)


def _require_html_destination(output_format: str, output: Path | None) -> None:
    """An html page is for a file: refused on a terminal (before the work), where it would be noise."""
    if output_format == "html" and output is None and click.get_text_stream("stdout").isatty():
        raise click.UsageError("--format html writes a page for a browser: give -o FILE (or redirect stdout to a file)")


def _emit(text: str | bytes, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    _write_output(output, text)
    click.echo(f"tcpadvise: wrote {output}", err=True)


def _emit_streamed(write, output: Path | None):
    """write(out) writes bytes to out as they are made (a JSON report read one socket at a time),
    to stdout or to -o FILE (as _write_output: renamed into place once complete); its result."""
    from ..safefile import open_atomically

    if output is None:
        out = click.get_binary_stream("stdout")
        result = write(out)
        out.flush()
        return result
    _check_output(output)
    try:
        with open_atomically(output) as out:
            result = write(out)
    except OSError as error:
        raise OutputWriteError(f"{output}: cannot write ({error.strerror or error})") from None
    click.echo(f"tcpadvise: wrote {output}", err=True)
    return result


def _check_output(output: Path) -> None:
    """A rename would replace a device or pipe (/dev/stdout, a FIFO) with a plain file, so a path
    that is, or leads to, anything but a regular file is refused; stdout is there for those."""
    try:
        kind = output.stat().st_mode
    except OSError:
        kind = None
    if kind is not None and not stat.S_ISREG(kind):
        raise OutputWriteError(f"{output}: not a regular file (leave out -o to write to stdout)")


def _write_output(output: Path, text: str | bytes) -> None:
    """Write a report file through safefile: a new file renamed into place (_check_output first)."""
    from ..safefile import write_atomically

    _check_output(output)
    try:
        write_atomically(output, text)
    except OSError as error:
        raise OutputWriteError(f"{output}: cannot write ({error.strerror or error})") from None


def _emit_text(render, output: Path | None) -> None:
    """Text to the terminal as is; to -o FILE without colours, 120 columns wide.

    markup=False: a program named '[bold]' is a name, not rich markup. Text for a pipe or a file
    has no trailing spaces (rich pads its tables to their width).
    """
    from rich.console import Console

    if output is None and click.get_text_stream("stdout").isatty():
        render(Console(highlight=False, markup=False))
        return
    buffer = io.StringIO()
    width = 120 if output is not None else Console().width  # what rich would use on this stdout
    render(Console(file=buffer, highlight=False, markup=False, width=width, color_system=None))
    text = "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))
    if output is None:
        click.echo(text, nl=False)
    else:
        _emit(text, output)


def _emit_by_host(output_format: str, output: Path | None, reports: dict) -> None:
    """One report per host: {host: (JSON document, text renderer)}; JSON is a list of the documents with their host."""
    from rich.console import Console

    from ..render.json import dumps

    if output_format == "html":
        raise click.UsageError("--by-host writes text or json; for a page per host, filter the traces by host")
    if output_format == "json":
        _emit(dumps([{"host": host, **document} for host, (document, _) in reports.items()]), output)
        return

    def render_all(console: Console) -> None:
        for host, (_, render) in reports.items():
            console.print(f"host {host}", style="bold underline")
            render(console)

    _emit_text(render_all, output)


def _exit_if_damaged(inputs: "Inputs") -> None:
    """Exit DAMAGED_EXIT once the report is out if damaged traces among the inputs were skipped."""
    if inputs.damaged:
        _warn(f"{len(inputs.damaged)} damaged trace(s) skipped (exit status {DAMAGED_EXIT}); see the warnings")
        sys.exit(DAMAGED_EXIT)


def _on_hosts(inputs: "Inputs", hosts: tuple[str, ...]) -> "Inputs":
    """The inputs written on `hosts` (all of them when none is named); an error if that leaves none."""
    from ..trace.hosts import only_hosts, trace_host

    if not hosts:
        return inputs
    kept = only_hosts(inputs, hosts)
    if not kept.traces:
        found = ", ".join(sorted({trace_host(trace) for trace in inputs.traces}))
        raise BadInputError(f"no trace written on {', '.join(hosts)} (these traces are of: {found})")
    return kept


def _warn(message: str) -> None:
    click.echo(f"tcpadvise: warning: {message}", err=True)


# _YOUNG_COLLECTION: new container objects between two collections of the youngest generation
# (Python's default is 700). Reading a trace makes millions that die young (each socket decoded, its
# summary, then dropped); collected every 700, the live ones of the moment were promoted again and
# again, and the full collections that these promotions set off took 0.5 s of the 100 MB trace's
# report. Every 10,000: under 0.1 s, the same peak memory.
_YOUNG_COLLECTION = 10_000


def main() -> None:
    gc.set_threshold(_YOUNG_COLLECTION, *gc.get_threshold()[1:])
    cli(prog_name="tcpadvise")
