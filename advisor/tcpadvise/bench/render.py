"""What `tcpadvise bench` shows a person: a progress bar while it runs, then a
table per suite with the seed's figures beside ours, and the notes that say
where today's kernel differs from the seeds' and why.

Every table fits the console's width with every figure whole: a table wider
than the console is printed as one block per row instead (the row's name,
then its figures as indented `label  value` lines, as the report does). A
terminal is as wide as it is; a pipe or a file is $COLUMNS columns wide if
that is set, else 80, whatever terminal the command runs in, so the same
results always give the same text, and its lines carry no trailing spaces.
"""

import io
import math
import os
import sys
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..render.layout import fits, labelled_block
from ..units import DASH, duration_unit, format_bytes, format_duration_us, ratio
from . import seeds
from .run import Progress as BenchProgress
from .stats import CONFIDENCE, NOT_RESOLVED, NOT_WITHIN, WITHIN
from .suites import SERVER_GOALS, goal_verdicts

_PENALTY_NAMES = {"fill": "filling one segment", "second": "a second segment", "fourth": "a fourth segment"}
_PENALTY_SIZES = {"fill": "mss", "second": "mss+1", "fourth": "3*mss+1"}


class ProgressBar(BenchProgress):
    """rich.progress on stderr: one bar per suite, counting load generator runs."""

    def __init__(self, console: Console):
        self._console = console
        self._progress = Progress(
            TextColumn("{task.description:<44}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self._tasks = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self._tasks:
            self._progress.stop()

    def start_suite(self, suite, title, total):
        # Started with the first suite: a run that fails before it leaves no empty bar behind.
        if not self._tasks:
            self._progress.start()
        self._tasks[suite] = self._progress.add_task(f"{suite}: {title}", total=total)

    def advance(self, suite):
        self._progress.advance(self._tasks[suite])

    def warn(self, message):
        self._progress.console.print(f"tcpadvise: warning: {message}", highlight=False)

    def note(self, message):
        self._progress.console.print(f"tcpadvise: {message}", highlight=False)


PIPED_WIDTH = 80


def piped_width() -> int:
    """The width of the summary in a pipe or a file: $COLUMNS if it is a positive number, else PIPED_WIDTH."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH


def print_summary(results: dict) -> None:
    """The summary on stdout: at the terminal's width, or as summary_text at piped_width()."""
    console = Console(highlight=False)
    if console.is_terminal:
        render_summary(results, console)
    else:
        sys.stdout.write(summary_text(results, piped_width()))


def summary_text(results: dict, width: int) -> str:
    """The summary as plain text `width` columns wide, without the trailing spaces rich pads lines with."""
    buffer = io.StringIO()
    render_summary(results, Console(file=buffer, width=width, highlight=False, color_system=None))
    return "\n".join(line.rstrip() for line in buffer.getvalue().split("\n"))


def render_summary(results: dict, console: Console) -> None:
    """Every suite's table, then the notes comparing them with the seeds."""
    console.print(f"[bold]tcpadvise bench[/bold]: {results['host']}")
    for table in summary_tables(results):
        console.print()
        table.show(console)
    for heading, lines in (
        ("Compared with the seeds", notes(results)),
        ("Reading the servers' figures", servers_notes(results)),
        ("Against the goals", goals(results)),
    ):
        if lines:
            console.print()
            console.print(f"[bold]{heading}[/bold]")
            for line in lines:
                console.print(f"- {line}", highlight=False)


class FigureTable:
    """A suite's table as text cells: the first column names the row, the others hold its figures."""

    def __init__(self, title: str, *columns: str):
        self.title = title
        self.columns = columns
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def show(self, console: Console) -> None:
        """As a table if it fits the console, else as one block per row."""
        table = self.as_table()
        if fits(console, table):
            console.print(table)
            return
        console.print(Text(self.title, style="bold"))
        for block in self.as_blocks():
            console.print(block)

    def as_table(self) -> Table:
        table = Table(title=self.title, title_justify="left", title_style="bold", header_style="bold")
        for index, column in enumerate(self.columns):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in self.rows:
            # Text, not markup: a cell such as "885 [844-1,193]" is a figure, never a style.
            table.add_row(*map(Text, row))
        return table

    def as_blocks(self) -> list[Text]:
        name_column, *labels = self.columns
        label_width = max(map(len, labels)) + 2
        return [
            labelled_block(f"{name_column} {name}".strip(), list(zip(labels, figures)), label_width)
            for name, *figures in self.rows
        ]


def summary_tables(results: dict) -> list[FigureTable]:
    """Every suite's tables, in the order the suites ran."""
    tables = {
        "pingpong": _pingpong_tables,
        "nagle": _nagle_table,
        "stream": _stream_tables,
        "rpc": _rpc_table,
        "servers": _servers_tables,
    }
    return [table for name, result in results["suites"].items() for table in tables[name](result)]


def _duration_ci(summary: dict | None) -> str:
    """'44.1 [43.9-48] ms': the median and its confidence interval, in the median's unit."""
    if summary is None:
        return DASH
    unit, convert = duration_unit(summary["median"])
    low, median, high = (convert(summary[key]) for key in ("ci_low", "median", "ci_high"))
    return f"{median:.3g} [{low:.3g}-{high:.3g}] {unit}"


def _mbit_s(value: float | None) -> str:
    if value is None:
        return DASH
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _mbit_ci(summary: dict | None) -> str:
    if summary is None:
        return DASH
    return f"{_mbit_s(summary['median'])} [{_mbit_s(summary['ci_low'])}-{_mbit_s(summary['ci_high'])}]"


def _percent(fraction: float | None) -> str:
    if fraction is None:
        return DASH
    # Below 1%, two significant digits: "0.096%" says more than "0%".
    return f"{100 * fraction:.2g}%" if 0 < abs(fraction) < 0.01 else f"{100 * fraction:.0f}%"


def _times(factor: float | None) -> str:
    return DASH if factor is None or math.isnan(factor) else f"{factor:.2g}x" if factor < 10 else f"{factor:,.0f}x"


def _pingpong_tables(result: dict) -> list[FigureTable]:
    shown = [
        point
        for point in result["points"]
        if point["label"] in _PENALTY_SIZES.values() or (point["request_bytes"] - 1) % 1000 == 0
    ]
    points = FigureTable(
        f"ping-pong (seed 000): N bytes, a 1-byte answer; MSS {result['mss']} B",
        "bytes",
        "segments",
        "n",
        "minimum",
        "median [95% CI]",
        "p99",
    )
    for point in shown:
        trip = point["round_trip_us"]
        label = f"{point['request_bytes']} ({point['label']})" if "mss" in point["label"] else point["label"]
        points.add_row(
            label,
            f"{point['segments_per_round']:.1f}",
            str(trip["count"]),
            format_duration_us(trip["minimum"]),
            _duration_ci(trip),
            format_duration_us(trip["p99"]),
        )
    by_label = {point["label"]: point for point in result["points"]}
    penalties = FigureTable(
        "penalty over a 1-byte message (seed 000's summary; the seed read minimums)",
        "",
        "bytes",
        "here, minimum",
        "here, median",
        *(f"seed: {network}" for network in seeds.PINGPONG_PENALTIES),
    )
    for name, title in _PENALTY_NAMES.items():
        penalties.add_row(
            title,
            str(by_label[_PENALTY_SIZES[name]]["request_bytes"]),
            _percent(result["penalties"]["minimum"][name]),
            _percent(result["penalties"]["median"][name]),
            *(_percent(network[name]) for network in seeds.PINGPONG_PENALTIES.values()),
        )
    return [points, penalties]


def _nagle_table(result: dict) -> list[FigureTable]:
    table = FigureTable(
        "15 two-byte writes, then a 2-byte reply (seed 004)",
        "arm",
        "round trip [95% CI]",
        "p99",
        "n",
        "segments/request",
        "far-end reads/request",
        "seed 004",
    )
    for key, arm in result["arms"].items():
        trip = arm["round_trip_us"]
        seed = seeds.NAGLE_ROUND_US.get(key)
        table.add_row(
            key,
            _duration_ci(trip),
            format_duration_us(trip["p99"]),
            str(trip["count"]),
            f"{arm['segments_per_round']:.1f}",
            f"{arm['far_reads_per_request']:.1f}",
            format_duration_us(seed) if seed else DASH,
        )
    return [table]


def _median(arm: dict) -> float | None:
    return arm["throughput_mbit_s"]["median"] if arm["throughput_mbit_s"] else None


def _stream_tables(result: dict) -> list[FigureTable]:
    by_size = FigureTable(
        "stream by write size (seed 003), Mbit/s measured by the receiver",
        "write",
        "Nagle on [95% CI]",
        "Nagle off [95% CI]",
        "on/off",
        "B/segment, off",
        "seed: on",
        "seed: off",
        "seed: on/off",
    )
    for row in result["by_size"]:
        on, off = _median(row["nagle"]), _median(row["nodelay"])
        seed_on, seed_off = seeds.STREAM_BY_SIZE_MBIT_S.get(row["write_bytes"], (None, None))
        by_size.add_row(
            format_bytes(row["write_bytes"]),
            _mbit_ci(row["nagle"]["throughput_mbit_s"]),
            _mbit_ci(row["nodelay"]["throughput_mbit_s"]),
            _times(ratio(on, off)),
            f"{row['nodelay']['bytes_per_segment']:,.0f}",
            _mbit_s(seed_on),
            _mbit_s(seed_off),
            _times(ratio(seed_on, seed_off)),
        )
    autotuned = _median(result["by_sndbuf"][-1])
    by_sndbuf = FigureTable(
        "bulk stream (64 KiB writes) by SO_SNDBUF (seed 003's window), Mbit/s",
        "SO_SNDBUF",
        "kernel's",
        "Mbit/s [95% CI]",
        "of autotuned",
        "write p99",
        "seed: window",
        "seed: of peak",
    )
    for row in result["by_sndbuf"]:
        size = row["sndbuf_set"]
        seed = seeds.STREAM_BY_WINDOW_MBIT_S.get(size)
        by_sndbuf.add_row(
            format_bytes(size) if size else "autotuned",
            format_bytes(row["sndbuf"]),
            _mbit_ci(row["throughput_mbit_s"]),
            _percent(ratio(_median(row), autotuned)),
            format_duration_us(row["write_us_p99"]),
            _mbit_s(seed),
            _percent(ratio(seed, seeds.STREAM_PEAK_MBIT_S)),
        )
    return [by_size, by_sndbuf]


def _rpc_table(result: dict) -> list[FigureTable]:
    table = FigureTable(
        f"requests as one write, or split with a {result['tail_bytes']}-byte tail, Nagle on (seed 002)",
        "bytes",
        "one write [95% CI]",
        "split [95% CI]",
        "split/one",
        "segments, split",
        "seed: TCP local",
    )
    for row in result["sizes"]:
        seed = seeds.RPC_TCP_LOCAL.get(row["request_bytes"])
        table.add_row(
            str(row["request_bytes"]),
            _duration_ci(row["one_write"]["round_trip_us"]),
            _duration_ci(row["split"]["round_trip_us"]),
            _times(row["split_over_one_write"]),
            f"{row['split']['segments_per_round']:.1f}",
            f"{seed:g}" if seed else DASH,
        )
    return [table]


def _share(fraction: float | None) -> str:
    """A figure against its reference, as a percentage: '99.6%'."""
    return DASH if fraction is None else f"{100 * fraction:.1f}%"


def _factor(factor: float | None) -> str:
    """'1.046x': a tenth of a per cent, enough to read a 5% goal."""
    return DASH if factor is None else f"{factor:.3f}x" if factor < 10 else f"{factor:,.0f}x"


def _interval(paired: dict | None, shown: Callable[[float], str], unit: str) -> str:
    """A paired ratio as 'median [low-high]' in `shown`'s form, the unit said once; the median alone when
    the interval is a point (one run, or the reference arm against itself)."""
    if paired is None:
        return DASH
    low, median, high = (shown(paired[key]) for key in ("ci_low", "median", "ci_high"))
    return median if low == high else f"{median} [{low.removesuffix(unit)}-{high}]"


def _share_ci(paired: dict | None) -> str:
    """'100.4% [99.8-100.9%]'."""
    return _interval(paired, _share, "%")


def _factor_ci(paired: dict | None) -> str:
    """'1.046x [1.031-1.060x]'."""
    return _interval(paired, _factor, "x")


def _rate_ci(summary: dict | None) -> str:
    """'80,890 [79,130-84,388]'; the median alone from one run (one sample: no interval)."""
    if summary is None:
        return DASH
    low, median, high = (f"{summary[key]:,.0f}" for key in ("ci_low", "median", "ci_high"))
    return median if summary["runs"] < 2 else f"{median} [{low}-{high}]"


def _cpu_ci(summary: dict | None) -> str:
    """'8.190 [8.171-8.222] µs': four significant digits of the largest (to a tenth of a percent), the same
    decimals throughout; the median alone from one run."""
    if summary is None:
        return DASH
    unit, convert = duration_unit(summary["median"])
    low, median, high = (convert(summary[key]) for key in ("ci_low", "median", "ci_high"))
    decimals = max(0, 3 - math.floor(math.log10(high))) if high > 0 else 0
    if summary["runs"] < 2:
        return f"{median:.{decimals}f} {unit}"
    return f"{median:.{decimals}f} [{low:.{decimals}f}-{high:.{decimals}f}] {unit}"


def _servers_tables(result: dict) -> list[FigureTable]:
    tables = []
    # Without a cgroup to count the servers' CPU time in, its columns are left out (result["left_out"] says why).
    cpu = result.get("cpu_source") is not None
    # Each table is titled with its case's name, as --case chooses it and the goal lines say it.
    for name, server in result["servers"].items():
        columns = ["requests/s [95% CI]", "of baseline [95% CI]"]
        if cpu:
            columns += ["CPU/request [95% CI]", "CPU/request of baseline [95% CI]"]
        # Every arm runs as often (a failed run stops the bench): the count is said once, in the title.
        runs = max((arm["requests_per_s"]["runs"] for arm in server["arms"].values() if arm["requests_per_s"]),
                   default=0)
        table = FigureTable(
            f"{name}: {server['title']}; requests/s"
            + (" and the server's CPU time per request" if cpu else "")
            + f" by the server's policy, {runs} run{'s' if runs != 1 else ''} each",
            "policy",
            *columns,
        )
        for policy, arm in server["arms"].items():
            cells = [_rate_ci(arm["requests_per_s"]), _share_ci(arm.get("vs_baseline_paired"))]
            if cpu:
                cells += [_cpu_ci(arm["cpu_us_per_request"]), _share_ci(arm["cpu_vs_baseline_paired"])]
            table.add_row(policy, *cells)
        tables.append(table)
    for name, client in result["clients"].items():
        runs = max((arm["round_trip_us"]["runs"] for arm in client["arms"].values() if arm["round_trip_us"]),
                   default=0)
        table = FigureTable(
            f"{name}: {client['title']}: the client under each policy, and as one writev, "
            f"{runs} run{'s' if runs != 1 else ''} each",
            "policy",
            "round trip [95% CI]",
            "p99",
            "of writev [95% CI]",
            "segments/request",
        )
        for policy, arm in client["arms"].items():
            trip = arm["round_trip_us"]
            table.add_row(
                policy,
                _duration_ci(trip),
                format_duration_us(trip["p99"]) if trip else DASH,
                _factor_ci(arm.get("vs_writev_paired")),
                f"{arm['segments_per_round']:.1f}" if arm["segments_per_round"] is not None else DASH,
            )
        tables.append(table)
    return tables


def servers_notes(results: dict) -> list[str]:
    """What the servers suite's figures are: the baseline, the "of baseline" ratios and how a goal line judges
    them, what the servers' CPU time per request is, why it is the figure to read against the 1% goal, and how
    finely this run resolves the goals."""
    result = results["suites"].get("servers")
    if result is None or not (result["servers"] or result["clients"]):
        return []
    goal = result["goals"]
    cpu = result.get("cpu_source") is not None and bool(result["servers"])
    limits = []
    if result["servers"]:
        limits.append(f"requests/s at least {_share(1 - goal['server_within'])} of the baseline's")
        if cpu:
            limits.append(f"CPU/request at most {_share(1 + goal['server_within'])}")
    if result["clients"]:
        limits.append(f"a client's round trip at most {_factor(1 + goal['client_within'])} the writev client's")
    lines = [(
        "baseline: the server, or the client, without the shim. \"of baseline\" and \"of writev\": each run's "
        "figure over the baseline's (the writev client's) run of the same round (the arms run one after the "
        "other, round by round, so that a load drifting over minutes weighs on both alike), median [95% CI] of "
        "those ratios. The goal lines read them: an adaptive policy is within its goal when its whole interval "
        f"meets it ({', '.join(limits)}), not within when the whole interval is beyond it, else not resolved; "
        "a figure with one sample a run has the exact interval of its median (order statistics: with 7 runs the "
        "lowest to the highest run, 98.4%), and with fewer than 6 runs none that covers 95%: every goal is then "
        "not resolved."
    )]
    if result.get("pin"):
        lines.append(f"Where they ran: {result['pin']}.")
    if not cpu:
        return lines
    # Half an interval, in % of the baseline: how finely the goal lines resolve a difference.
    widths = {
        figure: [(paired["ci_high"] - paired["ci_low"]) / 2 for server in result["servers"].values()
                 for policy in goal["adaptive"]
                 if (paired := server["arms"][policy].get(field)) and paired.get("confidence", CONFIDENCE) >= CONFIDENCE]
        for figure, field, _ in SERVER_GOALS
    }
    resolution = (
        f"in this run the adaptive policies' intervals are ±{_spread(widths['cpu_us_per_request'])} for "
        f"CPU/request, ±{_spread(widths['requests_per_s'])} for requests/s; a difference narrower than its "
        "interval is not resolved (more runs, or a quieter machine, narrow it)"
        if widths["requests_per_s"] and widths["cpu_us_per_request"]
        else "with fewer than 6 runs an arm there is no 95% interval to say how finely it resolves a difference "
        "(--runs 7 or more)"
    )
    return [
        *lines,
        (
            "CPU/request: the CPU time the server's whole process tree spent while the client ran (every process "
            "and thread, the ones that exited during the run too, as PostgreSQL's backend per connection), over "
            f"the requests the client made; from a cgroup the server ran in ({result['cpu_source']}). The "
            "server's start is not in it. What the shim adds is work in the server's own processes: this counts "
            "it, where requests/s also moves with how the CPUs are shared between the client, the server and "
            "anything else running."
        ),
        f"So CPU/request is the figure to read against a 1% goal: {resolution}.",
    ]


def _spread(fractions: list[float]) -> str:
    """'0.2-0.9%': the range of the servers' half-widths."""
    low, high = min(fractions), max(fractions)
    return _percent_1(low) if _percent_1(low) == _percent_1(high) else f"{_percent_1(low)[:-1]}-{_percent_1(high)}"


def _percent_1(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


_VERDICT_WORDS = {WITHIN: "within", NOT_WITHIN: "not within", NOT_RESOLVED: "not resolved at"}


def _goal_line(subject: str, arms: dict, field: str, verdicts: dict[str, str], goal: float, what: str,
               reference: str, aside: str = "") -> str:
    """One goal line: each adaptive policy's paired ratio `field` (its runs against the reference arm's run of
    the same round), median [95% CI], and its verdict against `goal` (a fraction)."""
    shown = _factor_ci if field == "vs_writev_paired" else _share_ci
    shares = [f"{policy} {shown(arms[policy].get(field))}" for policy in verdicts]
    said = [f"{' and '.join(policies)} {_VERDICT_WORDS[verdict_]} {_percent(goal)}"
            for verdict_ in _VERDICT_WORDS
            if (policies := [policy for policy, given in verdicts.items() if given == verdict_])]
    return (f"{subject}: adaptive " + " and ".join(shares) + f" {what} (each run against {reference}'s run of "
            f"its round: median [95% CI]{aside}); " + "; ".join(said) + ".")


def goals(results: dict) -> list[str]:
    """Whether the adaptive policies met the servers suite's goals: a line per server and figure, and per
    client, each on its paired ratio (suites.goal_verdicts, judged again from the figures given)."""
    result = results["suites"].get("servers")
    if result is None:
        return []
    goal = result["goals"]
    verdicts = goal_verdicts(result)
    what = {"requests_per_s": "of the baseline's requests/s",
            "cpu_us_per_request": "of the baseline's CPU time per request"}
    lines = []
    for name, server in result["servers"].items():
        for figure, field, _ in SERVER_GOALS:
            if figure in verdicts["servers"][name]:
                lines.append(_goal_line(name, server["arms"], field, verdicts["servers"][name][figure],
                                        goal["server_within"], what[figure], "the baseline"))
    for name, client in result["clients"].items():
        no_shim = _factor_ci(client["arms"]["baseline"].get("vs_writev_paired"))
        lines.append(_goal_line(name, client["arms"], "vs_writev_paired", verdicts["clients"][name]["round_trip_us"],
                                goal["client_within"], "the writev client's round trip", "the writev client",
                                f"; baseline, no shim: {no_shim}"))
    lines += result["left_out"]
    return lines


def notes(results: dict) -> list[str]:
    """Where this path differs from the seeds' and why, one sentence or two per finding."""
    suites = results["suites"]
    lines = []
    if "pingpong" in suites:
        lines += _pingpong_notes(suites["pingpong"], results["path"])
    if "nagle" in suites:
        lines += _nagle_notes(suites["nagle"])
    if "stream" in suites:
        lines += _stream_notes(suites["stream"])
    if "rpc" in suites:
        lines += _rpc_notes(suites["rpc"])
    return lines


def _pingpong_notes(result: dict, path: dict) -> list[str]:
    mss = result["mss"]
    # As the seed, from minimums; but on a tbf link the minimum is a message that found the bucket full.
    statistic = "median" if path.get("rate_bit_s") else "minimum"
    penalties = result["penalties"][statistic]
    lan = seeds.PINGPONG_PENALTIES["Wired LAN"]
    lines = []
    if mss > max(point["request_bytes"] for point in result["points"] if "mss" not in point["label"]):
        lines.append(
            f"The segment here holds {mss} bytes, so the seed's whole 1-9901 byte sweep fits in one segment: "
            f"the second- and fourth-segment penalties were measured at {mss + 1} and {3 * mss + 1} bytes."
        )
    lines.append(
        f"Penalty over a 1-byte message, from {statistic}s: "
        + ", ".join(
            f"{_PENALTY_NAMES[name]} {_percent(penalties[name])} (seed, wired LAN: {_percent(lan[name])})"
            for name in _PENALTY_NAMES
        )
        + "."
    )
    if path["name"] == "loopback":
        lines.append(
            "Loopback has no wire: a larger message costs its copies and a second segment one more pass "
            "through the stack, where the seed's LAN paid serialisation time per byte and per frame."
        )
    elif path.get("rate_bit_s"):
        frame_us = (mss + 66) * 8 / path["rate_bit_s"] * 1e6
        one_byte = next(point for point in result["points"] if point["label"] == "1")
        lines.append(
            f"At this rate a full frame takes {format_duration_us(frame_us)} to serialise, against "
            f"{format_duration_us(one_byte['round_trip_us']['median'])} for the whole 1-byte round trip: "
            "the round trip grows with the bytes on the wire, as on the seed's slower links. (tbf is a token "
            "bucket, not a wire: the first two frames after a pause leave at once, hence the low minimums.)"
        )
    return lines


def _nagle_notes(result: dict) -> list[str]:
    arms = {key: arm["round_trip_us"]["median"] for key, arm in result["arms"].items()}
    lines = [
        (
            f"Nagle with delayed ACKs still stalls: {format_duration_us(arms['plain'])} a round "
            f"(seed: {format_duration_us(seeds.NAGLE_ROUND_US['plain'])}); Linux's minimum delayed-ACK "
            "timer is still 40 ms, and Nagle holds the 14 small writes after the first until that ACK."
        ),
        (
            f"TCP_NODELAY {format_duration_us(arms['nodelay'])} and TCP_CORK {format_duration_us(arms['cork'])} "
            f"(seed: {format_duration_us(seeds.NAGLE_ROUND_US['nodelay'])} and "
            f"{format_duration_us(seeds.NAGLE_ROUND_US['cork'])}): the stall is gone either way; NODELAY still "
            f"sends {result['arms']['nodelay']['segments_per_round']:.1f} segments a request where CORK and "
            f"writev send {result['arms']['writev']['segments_per_round']:.1f}."
        ),
    ]
    if "shim-coalesce" in arms:
        lines.append(
            f"Under the shim, the unmodified program gets {format_duration_us(arms['shim-coalesce'])} with "
            f"coalesce and {format_duration_us(arms['shim-cork'])} with cork, against "
            f"{format_duration_us(arms['writev'])} for its own writev."
        )
    return lines


def _stream_notes(result: dict) -> list[str]:
    by_size = {row["write_bytes"]: row for row in result["by_size"]}
    small = by_size[128]
    on, off = _median(small["nagle"]), _median(small["nodelay"])
    seed_on, seed_off = seeds.STREAM_BY_SIZE_MBIT_S[128]
    writes_per_segment = small["nodelay"]["bytes_per_segment"] / 128
    if writes_per_segment >= 2:
        why = (
            f"Linux's autocorking merged about {writes_per_segment:.0f} writes into each segment: it holds a "
            "small write back while an earlier segment of the socket still waits in the qdisc or the device, "
            "even with TCP_NODELAY, so small writes cost system calls more than segments."
        )
    else:
        why = (
            f"{small['nodelay']['bytes_per_segment']:,.0f} bytes a segment: nearly every write left as a "
            "segment of its own, as in the seed (Linux's autocorking merges them only while an earlier "
            "segment still waits in the qdisc or the device)."
        )
    lines = [
        (
            f"128-byte writes with Nagle off stream at {_percent(ratio(off, on))} of Nagle on "
            f"(seed: {_percent(seed_off / seed_on)}). {why}"
        ),
    ]
    by_sndbuf = {row["sndbuf_set"]: row for row in result["by_sndbuf"]}
    limited, autotuned = by_sndbuf[4096], by_sndbuf[None]
    lines.append(
        f"SO_SNDBUF=4096 (the kernel makes it {limited['sndbuf']} bytes): "
        f"{_percent(ratio(_median(limited), _median(autotuned)))} of the autotuned stream, each 64 KiB write "
        f"waiting up to {format_duration_us(limited['write_us_p99'])} (p99) for room (seed, a 4 KB window "
        f"on 1 Gbit/s: {_percent(seeds.STREAM_BY_WINDOW_MBIT_S[4096] / seeds.STREAM_PEAK_MBIT_S)} of peak). "
        f"Autotuning grew the buffer to {format_bytes(autotuned['sndbuf'])}; setting SO_SNDBUF at all turns "
        "it off."
    )
    return lines


def _rpc_notes(result: dict) -> list[str]:
    rows = result["sizes"]
    stalled = [row["request_bytes"] for row in rows if row["stalled"]]
    predicted = [row["request_bytes"] for row in rows if row["lone_partial_segment"]]
    tail = result["tail_bytes"]
    lines = [
        (
            f"A request split into a large write and a {tail}-byte tail, Nagle on, waits for a delayed ACK at "
            f"{len(stalled)} of {len(rows)} sizes ({', '.join(map(str, stalled)) or 'none'}; up to "
            f"{_times(max(row['split_over_one_write'] for row in rows))} one write), where SunOS 4.0.1 was slow "
            f"for 4045-4952 and 8090-8960 bytes "
            f"({_times(seeds.RPC_TCP_LOCAL[4096] / seeds.RPC_TCP_LOCAL[4000])} at 4096)."
        ),
    ]
    rule = (
        "Linux's Nagle holds the tail until the large write's last, partial segment is ACKed, and the far "
        "end ACKs every second full segment at once but delays the ACK of a partial one that arrives alone"
    )
    if stalled == predicted:
        mss = max(row["split"]["mss"] for row in rows)
        lines.append(
            f"{rule}: with a {mss}-byte MSS that is exactly the sizes whose large write is an even "
            "number of full segments (none included) plus a partial one."
        )
    else:
        spared = [size for size in predicted if size not in stalled]
        unexpected = [size for size in stalled if size not in predicted]
        lines.append(
            f"{rule}, which predicts stalls at {', '.join(map(str, predicted)) or 'no size'} here."
            + (
                f" Spared: {', '.join(map(str, spared))}; the large write's last segment may still have been "
                "queued in the socket (TCP small queues on a slow link) when the tail came, and left with it."
                if spared
                else ""
            )
            + (f" Stalled though not predicted: {', '.join(map(str, unexpected))}." if unexpected else "")
        )
    return lines
