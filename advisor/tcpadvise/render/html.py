"""`--format html`: one self-contained page for people to look at.

The charts are matplotlib figures rendered to SVG and put inline, text drawn
as paths: the page loads no script, font, style sheet or image from anywhere
(its Content-Security-Policy forbids it), so it opens from a file:// URL on a
machine without network and can be mailed as is. Every string from a trace
(program names, addresses, call sites, arguments, arm names) is
HTML-escaped, and `$` escaped in the charts' text (matplotlib would read it
as mathematics).

Three pages: `report_html` (the busiest socket items and their total, the
findings with evidence and call sites, then per socket group: write sizes,
writes per burst, turn times and a timeline of its busiest items; made from
the streamed report, model/streaming.py, so it holds no more sockets than the
text report does),
`ab_html` (each arm's turn-time distribution, the per-connection means the
verdict compares, and each arm's confidence sequence and fixed-horizon
interval against control) and `bench_html` (bench's charts and tables).
"""

import datetime
import html
import inspect
import io
import math
from collections import Counter

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from ..model import hist
from ..model.metrics import Scope
from ..model.streaming import SampledSocket, StreamedReport
from ..rules import SEVERITIES
from ..symbols.symbolize import site_text
from ..trace import represents
from ..units import format_bytes, format_duration_us, format_value
from .text import _OP_SYMBOLS, _figure_cells, _identity_cells, _policy_text, _scope_text, _total_identity_cells

# _MAX_GROUP_CHARTS: socket groups drawn (the busiest by writes).
_MAX_GROUP_CHARTS = 20
# TIMELINE_SOCKETS: the socket items a group's timeline draws at most, its busiest (most calls):
# stream_report keeps these per group while it reads, a bounded heap each.
TIMELINE_SOCKETS = 10
# _CALL_SITES_SHOWN: the sites a table names, those with the most writes first (JSON has them all).
_CALL_SITES_SHOWN = 20
# _BINS_PER_DOUBLING: a chart's bins per power of two (the shim keeps 128, too fine to see);
# _MAX_BINS: bins of a chart at most (40 doublings), whatever a trace claims.
_BINS_PER_DOUBLING = 4
_MAX_BINS = 160
_ARM_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
# _HORIZONTAL: boxplot's sideways option, renamed in matplotlib 3.10 (vert= warns since).
_HORIZONTAL = (
    {"orientation": "horizontal"} if "orientation" in inspect.signature(Axes.boxplot).parameters else {"vert": False}
)
_CSP = "default-src 'none'; style-src 'unsafe-inline'"
_STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       max-width: 1180px; margin: 0 auto; padding: 1.5em 2em 4em; background: #fbfbfc; }
h1 { font-size: 1.6em; margin: 0 0 .2em; }
h2 { font-size: 1.25em; margin: 2em 0 .6em; padding-bottom: .25em; border-bottom: 2px solid #d9dde6; }
h3 { font-size: 1.05em; margin: 1.6em 0 .4em; }
.sub { color: #5b6475; margin: 0 0 1.2em; }
code, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: .92em; }
table { border-collapse: collapse; margin: .5em 0 1em; background: #fff; }
th, td { padding: .3em .7em; border-bottom: 1px solid #e4e7ee; text-align: left; vertical-align: top; }
th { background: #eef1f6; font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
.card { background: #fff; border: 1px solid #dfe3ea; border-radius: 8px; padding: .8em 1.2em; margin: 1em 0; }
.chart { margin: .4em 0; overflow-x: auto; }
.chart svg { max-width: 100%; height: auto; }
.warning { background: #fff7e0; border-left: 4px solid #e0a800; padding: .4em .8em; margin: .4em 0; }
.badge { display: inline-block; padding: .05em .55em; border-radius: 1em; font-size: .85em; font-weight: 600;
         color: #fff; margin-right: .5em; }
.sev-high { background: #c62828; } .sev-medium { background: #e06c00; }
.sev-low { background: #2e7d32; } .sev-info { background: #546e7a; }
.verdict { font-size: 1.1em; font-weight: 600; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .25em 1em; margin: .6em 0; }
dt { color: #5b6475; } dd { margin: 0; }
.note { color: #5b6475; font-size: .92em; }
a { color: #1f5fbf; text-decoration: none; } a:hover { text-decoration: underline; }
nav ul { margin: .4em 0 0; padding-left: 1.4em; }
"""


def _m(text) -> str:
    """A traced string as matplotlib text: `$` is a dollar sign, not the start of mathematics."""
    return str(text).replace("$", r"\$")


def report_html(report: StreamedReport) -> str:
    """The page of `tcpadvise report --format html`, of a report streamed with its total and a
    sample of TIMELINE_SOCKETS per group."""
    scopes = [subject for subject in report.subjects if isinstance(subject, Scope)]
    body = [
        "<h1>tcpadvise report</h1>",
        (f'<p class="sub">{len(report.traces)} trace(s), {represents.processes(report.traces)} process(es), '
        f"{report.socket_count} socket item(s), {len(scopes)} socket group(s); traces written "
        f"{_e(_when(report))}</p>"),
        *_warnings(report.warnings),
        _contents(scopes),
        '<h2 id="sockets">Sockets</h2>',
        _socket_table(report),
        _findings_section(report.findings),
        '<h2 id="groups">Socket groups</h2>',
        ('<p class="note">A group is the sockets of one program, role and service. Histograms count calls '
        "(log scale of sizes and times, 4 bins per doubling); a turn runs from the first write of a request "
        "to the first byte of its reply, as the application sees it.</p>"),
    ]
    drawn = _busiest(scopes)
    if len(scopes) > len(drawn):
        body.append(f'<p class="note">Charts for the {len(drawn)} groups with the most writes of '
                    f"{len(scopes)}.</p>")
    for number, index in enumerate(drawn):
        body.append(_scope_section(scopes[index], report.samples[index], report.groups[index]["call_sites"], number))
    return _page("tcpadvise report", body)


def _busiest(scopes: list[Scope]) -> list[int]:
    """The indexes of the groups that get charts: those with the most writes first."""
    return sorted(range(len(scopes)), key=lambda index: -scopes[index].merged["writes"]["calls"])[:_MAX_GROUP_CHARTS]


def _where(scope: Scope) -> str:
    return f"server :{scope.local_port}" if scope.role == "server" else f"{scope.role} → {scope.peer}:{scope.peer_port}"


def _contents(scopes: list[Scope]) -> str:
    links = "".join(
        f'<li><a href="#group-{number}">{_e(scopes[index].program)} {_e(_where(scopes[index]))}</a></li>'
        for number, index in enumerate(_busiest(scopes))
    )
    return (
        '<nav class="card"><a href="#sockets">Sockets</a> · <a href="#findings">Findings</a> · '
        f'<a href="#groups">Socket groups</a>{f"<ul>{links}</ul>" if links else ""}</nav>'
    )


def ab_html(ab_report: dict, experiment) -> str:
    """The page of `tcpadvise ab report --format html`; `experiment` is ab.collect's, behind ab_report."""
    arms = list(experiment.arms.values())
    state = ab_report["state"]
    verdict = ab_report["verdict"]
    headline = f"winner: {verdict['winner']}" if verdict["outcome"] == "winner" else verdict["outcome"]
    split = ab_report["split"]
    split_p = "-" if split["p_value"] is None else format_value(split["p_value"], "ratio")
    body = [
        f"<h1>Experiment {_e(ab_report['experiment'])}</h1>",
        (f'<p class="sub">seed {ab_report["seed"]}, control: {_e(ab_report["control"])}, {_e(state)}, '
        f"{ab_report['live_connections']} connection(s) live; traces written "
        f"{_e(_unix_ns_text(ab_report['as_of_unix_ns']))}</p>"),
        (f'<div class="card"><p class="verdict">Verdict: {_e(headline)}</p><p>{_e(verdict["reason"])}</p>'
        f'<p class="note">{_e(ab_report["metric"])}; {_e(ab_report["method"])}; smallest effect worth a '
        f"verdict: {ab_report['min_effect']:.0%}.</p></div>"),
        *_warnings(ab_report["warnings"]),
        "<h2>Arms</h2>",
        _arm_table(ab_report),
        (f"<p>Split: {_e(', '.join(f'{name} {n}' for name, n in split['drawn'].items()))} "
        f"(sample-ratio test p={_e(split_p)}{'' if split['ok'] else ', <strong>off the weights</strong>'})</p>"),
        "<h2>Turn times per arm</h2>",
        ('<p class="note">Left: every turn of each arm, as a fraction of the arm\'s turns. Right: each '
        "connection's mean turn time, the unit that was randomised and that the verdict compares.</p>"),
        _chart(_arm_distributions(arms), "ab-arms"),
        "<h2>Against control</h2>",
        _comparison_section(ab_report),
    ]
    return _page(f"tcpadvise experiment {ab_report['experiment']}", body)


def bench_html(results: dict, summary_text: str) -> str:
    """The page of `tcpadvise bench --html FILE`: bench.plot's charts, then the summary tables as text."""
    from ..bench.plot import suite_figures

    path = results["path"]["description"]
    body = [
        "<h1>tcpadvise bench</h1>",
        f'<p class="sub">Path: {_e(path)}; suites: {_e(", ".join(results["suites"]))}</p>',
    ]
    for name, figure in suite_figures(results):
        body += [f"<h2>{_e(name)}</h2>", _chart(figure, f"bench-{name}")]
    body += ["<h2>Figures</h2>", f'<pre class="mono card">{_e(summary_text)}</pre>']
    return _page("tcpadvise bench", body)


def _page(title: str, body: list[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _unix_ns_text(unix_ns: int) -> str:
    if not unix_ns:
        return "-"
    return datetime.datetime.fromtimestamp(unix_ns / 1e9, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _when(report: StreamedReport) -> str:
    written = [trace.data["written_unix_ns"] for trace in report.traces]
    if not written:
        return "-"
    first, last = _unix_ns_text(min(written)), _unix_ns_text(max(written))
    return first if first == last else f"{first} to {last}"


def _warnings(warnings: list[str]) -> list[str]:
    return [f'<div class="warning">warning: {_e(warning)}</div>' for warning in warnings]


def _socket_table(report: StreamedReport) -> str:
    """The socket items text shows (past TABLE_ROWS, the busiest) and, of several, their total."""
    if not report.socket_count:
        return "<p>No TCP sockets in these traces.</p>"
    headings = ("process", "connection", "conns", "nodelay", "writes", "writes/burst", "turn", "reads", "errors")
    numeric = {"conns", "writes", "writes/burst", "turn", "reads"}
    shown = report.shown_sockets()
    cells = [{**_identity_cells(item), **_figure_cells(item)} for item in shown]
    total = report.total()
    if report.socket_count > 1 and total is not None:
        cells.append({**_total_identity_cells(report.socket_count, total["connections"]), **_figure_cells(total)})
    rows = ["<tr>" + "".join(
        f'<td{" class=num" if heading in numeric else ""}>{"<br>".join(_e(line) for line in row[heading])}</td>'
        for heading in headings) + "</tr>" for row in cells]
    head = "".join(f"<th>{heading}</th>" for heading in headings)
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    if len(shown) < report.socket_count:
        table += (f'<p class="note">Showing the {len(shown):,} busiest socket items of {report.socket_count:,} '
                  "(the total counts them all); --format json lists every one, --program, --pid, --port and "
                  "--peer narrow the report.</p>")
    return table


def _findings_section(findings: list[dict]) -> str:
    counts = Counter(finding["severity"] for finding in findings)
    summary = ", ".join(f"{counts[severity]} {severity}" for severity in SEVERITIES if counts[severity])
    parts = [f"<h2 id=\"findings\">Findings: {_e(summary or 'none')}</h2>"]
    order = {severity: rank for rank, severity in enumerate(SEVERITIES)}
    for finding in sorted(findings, key=lambda finding: order.get(finding["severity"], len(order))):
        parts.append(_finding_card(finding))
    return "\n".join(parts)


def _finding_card(finding: dict) -> str:
    recommendation = finding["recommendation"]
    evidence = "".join(
        f"<tr><td class=mono>{_e(item['metric'])}</td><td class=num>{_e(format_value(item['value'], item['unit']))}</td>"
        f"<td>{_e(_threshold_text(item))}</td></tr>"
        for item in finding["evidence"]
    )
    sites = finding.get("call_sites", [])
    rows = {
        "scope": _e(_scope_text(finding["scope"])),
        "why": _e(finding["why"]),
        "evidence": f"<table><tr><th>metric</th><th>value</th><th>threshold</th></tr>{evidence}</table>"
        if evidence else "",
        "policy": _e(_policy_text(recommendation["policy"])),
        "code": _e(recommendation["code"]),
        "call sites": _call_site_table(sites) if sites else
        '<span class="note">none recorded (record with --call-sites to name the code that writes)</span>',
        "note": _e(recommendation["note"] or ""),
        "effect": _e(finding["expected_effect"]),
        "source": _e(", ".join(finding["source"]["seeds"] or [finding["source"]["note"]])),
    }
    items = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows.items() if value)
    severity = finding["severity"]
    return (
        f'<div class="card"><h3><span class="badge sev-{_e(severity)}">{_e(severity)}</span>'
        f'<span class="mono">{_e(finding["rule"])}</span> {_e(finding["title"])} '
        f'<span class="note">(confidence {_e(finding["confidence"])})</span></h3><dl>{items}</dl></div>'
    )


def _threshold_text(item: dict) -> str:
    """What an evidence item's value passed: "≥ 2", "30.0 ms to 250.0 ms", or "context" (shown, not tested)."""
    op, threshold, unit = item["op"], item["threshold"], item["unit"]
    if op is None:
        return "context"
    if op == "between":
        return " to ".join(format_value(bound, unit) for bound in threshold)
    if op == "in":
        return "in " + ", ".join(format_value(choice, unit) for choice in threshold)
    return f"{_OP_SYMBOLS.get(op, op)} {format_value(threshold, unit)}"


def _call_site_table(sites: list[dict]) -> str:
    rows = []
    for site in sites[:_CALL_SITES_SHOWN]:
        mean = site["bytes"] / site["writes"] if site["writes"] else 0
        first = site["first_of_burst"] / site["sampled_writes"] if site["sampled_writes"] else 0
        rows.append(
            f"<tr><td class=mono>{_e(site_text(site))}</td><td class=num>{site['writes']}</td>"
            f"<td class=num>{_e(format_bytes(mean))}</td><td class=num>{first:.0%}</td></tr>"
        )
    if len(sites) > _CALL_SITES_SHOWN:
        rows.append(f'<tr><td colspan=4 class="note">{len(sites) - _CALL_SITES_SHOWN} more sites '
                    "(--format json lists them all)</td></tr>")
    return ("<table><tr><th>call site</th><th>writes</th><th>mean size</th><th>first of burst</th></tr>"
            + "".join(rows) + "</table>")


def _scope_section(scope: Scope, sample: list[SampledSocket], sites: list[dict], number: int) -> str:
    """A group's figures, histograms, timeline of its sampled items and call sites."""
    where = _where(scope)
    merged = scope.merged
    items = len(scope.sockets)
    parts = [
        f'<section class="card" id="group-{number}"><h3>{_e(scope.program)} {_e(where)}</h3>',
        (f'<p class="note">{_e(_pids_text(scope.pids))}; {merged["connections"]} connection(s) in '
        f"{items} socket item(s); {merged['writes']['calls']} writes, "
        f"{_e(format_bytes(merged['writes']['bytes']))}</p>"),
        _chart(_scope_figure(merged), f"group{number}"),
        (f'<p class="note">Timeline: showing {len(sample)} of {items} socket items'
         f'{", the busiest (most calls)" if len(sample) < items else ""}.</p>'),
        _chart(_timeline_figure(sample, items), f"timeline{number}"),
    ]
    if sites:
        parts += ["<p><strong>Call sites</strong> (sampled writes)</p>", _call_site_table(sites)]
    else:
        parts.append('<p class="note">Call sites: none recorded (record with --call-sites to name the code '
                     "that writes).</p>")
    parts.append("</section>")
    return "\n".join(parts)


def _pids_text(pids: list[int]) -> str:
    """A group's processes: their pids, or past a dozen the first ones and a count."""
    shown = ", ".join(map(str, pids[:12]))
    return f"pid {shown}" if len(pids) <= 12 else f"{len(pids)} processes: pid {shown}, ..."


def _chart(figure: Figure, salt: str) -> str:
    """The figure as an inline <svg>: text as paths (no font needed), ids unique to this chart."""
    buffer = io.StringIO()
    # svg.hashsalt seeds the ids matplotlib gives clip paths and glyphs: distinct per chart, or the
    # charts of one page would share (and break) each other's ids.
    # A figure laid out by its layout engine (_new_figure's constrained layout) already fits its
    # canvas; bbox_inches="tight" would draw it twice (a third of a page's time) to crop what bench's
    # figures, laid out by hand, leave around them.
    tight = None if figure.get_layout_engine() is not None else "tight"
    with rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", bbox_inches=tight, metadata={"Date": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]
    return f'<div class="chart">{svg}</div>'


def _new_figure(width: float, height: float, columns: int = 1):
    figure = Figure(figsize=(width, height), layout="constrained")
    axes = figure.subplots(1, columns, squeeze=False)[0]
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
    return figure, axes


def _scope_figure(merged: dict) -> Figure:
    figure, (sizes, bursts, turns) = _new_figure(12, 3.1, 3)
    _histogram(sizes, merged["writes"]["size"], 1, "write size (bytes)", "tab:blue", "no writes")
    _histogram(bursts, merged["bursts"]["writes"], 1, "writes per burst", "tab:green", "no bursts")
    _histogram(turns, merged["turns"]["ns"], 1e-3, "turn time (µs)", "tab:purple", "no turns recorded")
    sizes.set_ylabel("calls")
    bursts.set_ylabel("bursts")
    turns.set_ylabel("turns")
    return figure


def _histogram(ax, histogram: dict | None, factor: float, label: str, colour: str, empty: str) -> None:
    """The histogram on log-spaced bins, with its p50 and p99 marked."""
    ax.set_xlabel(label)
    edges, counts = _log_bins(histogram, factor)
    if not counts:
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes, color="0.4")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    ax.stairs(counts, edges, fill=True, color=colour, alpha=0.75)
    ax.set_xscale("log")
    _log_axis(ax.xaxis, edges[0], edges[-1])
    ax.set_ylim(bottom=0)
    for fraction, style in ((0.5, "-"), (0.99, "--")):
        value = hist.percentile(histogram, fraction)
        if value is not None and value > 0:
            ax.axvline(value * factor, color="0.15", linestyle=style, linewidth=1,
                       label=f"p{round(fraction * 100)} {_short(value * factor)}")
    ax.legend(fontsize=8, frameon=False)


def _log_axis(axis, low: float, high: float) -> None:
    """A log axis over at least a decade around [low, high], labelled 20, 1,000 (ticks at 1, 2, 5 of
    each decade over a narrow range, at each decade over a wide one)."""
    if high / low < 10:
        widen = math.sqrt(10 / (high / low))
        low, high = low / widen, high * widen
    axis.set_view_interval(low, high, ignore=True)
    axis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5) if high / low < 300 else (1,)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: _short(value)))
    axis.set_minor_formatter(NullFormatter())


def _short(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _log_bins(histogram: dict | None, factor: float) -> tuple[list[float], list[int]]:
    """Bucket counts re-binned on edges 2^(k/_BINS_PER_DOUBLING), in the chart's unit."""
    if not histogram or not histogram.get("buckets"):
        return [], []
    ranges = [(low * factor, high * factor, count) for low, high, count in hist.ranges(histogram)
              if count > 0 and math.isfinite(low) and math.isfinite(high)]
    if not ranges:
        return [], []
    # Zeros (a write of 0 bytes) have no place on a log axis: they join the lowest bin.
    lowest = min((low for low, _, _ in ranges if low > 0), default=1.0)
    highest = max(max(high for _, high, _ in ranges), lowest * 2)
    first = math.floor(math.log2(lowest) * _BINS_PER_DOUBLING)
    last = min(max(math.ceil(math.log2(highest) * _BINS_PER_DOUBLING), first + 1), first + _MAX_BINS)
    edges = [2 ** (k / _BINS_PER_DOUBLING) for k in range(first, last + 1)]
    counts = [0] * (len(edges) - 1)
    for low, _, count in ranges:
        index = math.floor(math.log2(max(low, lowest)) * _BINS_PER_DOUBLING) - first
        counts[min(max(index, 0), len(counts) - 1)] += count
    return edges, counts


def _timeline_figure(sample: list[SampledSocket], items: int) -> Figure:
    """The processes of the group's sampled items (start to last trace), each followed by its
    sampled items: a connection placed in time, a group of closed ones as a line.

    A trace keeps no open or close time for closed connections (only their lifetimes, summed in
    a group): they are said in a label, not drawn where they were not seen.
    """
    processes: dict[tuple, list[SampledSocket]] = {}
    for sampled in sample:
        processes.setdefault((sampled.pid, sampled.process_start_ns, sampled.process_written_ns), []).append(sampled)
    start_ns = min((start for _, start, _ in processes), default=0)
    rows = []
    for (pid, start, written), members in sorted(processes.items(), key=lambda pair: pair[0][1]):
        began, ended = (start - start_ns) / 1e9, (written - start_ns) / 1e9
        state = "exited" if members[0].process_final else "running (snapshot)"
        rows.append((f"process {pid}", began, ended, "tab:gray", state))
        for sampled in members:
            if sampled.kind == "socket":
                opened = ended - sampled.duration_ns / 1e9
                rows.append((f"connection {sampled.local_port}", opened, ended, "tab:blue",
                             "open" if sampled.open else "closed"))
            else:
                lifetime = sampled.duration_ns / 1e9 / max(sampled.connections, 1)
                rows.append((f"{sampled.connections} closed", None, None, None,
                             (f"{sampled.connections} closed connection(s), mean lifetime {_seconds(lifetime)} "
                             "(open and close times are not in the trace)")))
    figure, (ax,) = _new_figure(12, 0.5 + 0.32 * len(rows))
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")
    for position, (label, began, ended, colour, note) in enumerate(rows):
        if began is None:
            ax.text(0, position, "  " + note, va="center", fontsize=8, color="0.3")
            continue
        ax.barh(position, max(ended - began, 1e-6), left=began, height=0.6, color=colour, alpha=0.8)
        ax.text(ended, position, f"  {note}", va="center", fontsize=8, color="0.3")
    ax.set_yticks(range(len(rows)), [label for label, *_ in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.set_xlabel("seconds since the first process shown started")
    ax.set_xlim(left=0)
    if len(sample) < items:
        ax.set_title(f"timeline: the {len(sample)} busiest of {items} socket items", fontsize=9, loc="left")
    else:
        ax.set_title("timeline", fontsize=9, loc="left")
    return figure


def _seconds(value: float) -> str:
    return format_duration_us(value * 1e6)


def _arm_table(ab_report: dict) -> str:
    headings = ("arm", "conns", "live", "turns", "turn p50", "p90", "p99", "bytes/s", "segments/turn", "errors",
                "guardrail")
    rows = []
    for arm in ab_report["arms"]:
        cells = [
            str(arm["connections"]), str(arm["live_connections"]), str(arm["turns"]),
            *(format_duration_us(arm[key]) for key in ("turn_p50_us", "turn_p90_us", "turn_p99_us")),
            format_value(arm["throughput_bytes_per_s"], "bytes_per_s"),
            "-" if arm["segments_per_turn"] is None else f"{arm['segments_per_turn']:g}",
            str(arm["errors"]),
        ]
        guardrail = "stopped: " + "; ".join(arm["stop_reasons"]) if arm["stopped"] else "-"
        rows.append(f"<tr><td>{_e(arm['name'])}</td>" + "".join(f"<td class=num>{_e(c)}</td>" for c in cells)
                    + f"<td>{_e(guardrail)}</td></tr>")
    head = "".join(f"<th>{heading}</th>" for heading in headings)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _arm_distributions(arms: list) -> Figure:
    figure, (turns, means) = _new_figure(12, 3.6, 2)
    drawn = False
    for arm, colour in zip(arms, _ARM_COLOURS * 4):
        if not arm.buckets:
            continue
        histogram = {"buckets": [list(bucket) for bucket in arm.buckets]}
        edges, counts = _log_bins(histogram, 1e-3)
        total = sum(counts)
        turns.stairs([count / total for count in counts], edges, color=colour, linewidth=1.8,
                     label=_m(f"{arm.name} ({total} turns)"))
        drawn = True
    if drawn:
        turns.set_xscale("log")
        _log_axis(turns.xaxis, *turns.get_xlim())
        turns.legend(fontsize=8, frameon=False)
    else:
        turns.text(0.5, 0.5, "no turns recorded", ha="center", va="center", transform=turns.transAxes)
    turns.set_xlabel("turn time (µs)")
    turns.set_ylabel("fraction of the arm's turns")
    values = [[row["turn_mean_ns"] / 1e3 for row in arm.rows if row["turns"] > 0 and row["turn_mean_ns"] > 0]
              for arm in arms]
    positions = [index for index, arm_values in enumerate(values) if arm_values]
    if positions:
        means.boxplot([values[index] for index in positions], positions=positions, widths=0.5, showfliers=False,
                      **_HORIZONTAL)
        for index in positions:
            jitter = [index + 0.18 * math.sin(number * 2.399) for number in range(len(values[index]))]
            means.scatter(values[index], jitter, s=8, alpha=0.5, color=_ARM_COLOURS[index % len(_ARM_COLOURS)])
        means.set_xscale("log")
        everything = [value for arm_values in values for value in arm_values]
        _log_axis(means.xaxis, min(everything) / 1.2, max(everything) * 1.2)
    else:
        means.text(0.5, 0.5, "no connection with turns", ha="center", va="center", transform=means.transAxes)
    means.set_yticks(range(len(arms)), [_m(f"{arm.name} ({len(v)})") for arm, v in zip(arms, values)])
    means.set_ylim(-0.6, len(arms) - 0.4)
    means.invert_yaxis()
    means.set_xlabel("mean turn time per connection (µs)")
    return figure


def _comparison_section(ab_report: dict) -> str:
    comparisons = ab_report["comparisons"]
    if not comparisons:
        return ("<p>No arm has enough connections with turns beside control's to be compared yet"
                f"{'' if not ab_report['verdict']['connections_needed'] else ' (about ' + str(ab_report['verdict']['connections_needed']) + ' per arm would tell)'}.</p>")
    rows = []
    for c in comparisons:
        low, high = c["ratio_cs"]
        fixed = c["fixed_horizon"]
        rows.append(
            f"<tr><td>{_e(c['arm'])}</td><td class=num>{_e(format_duration_us(c['arm_mean_us']))} vs "
            f"{_e(format_duration_us(c['control_mean_us']))}</td>"
            f"<td class=num>{_e(_signed(c['difference_us']))}</td>"
            f"<td class=num>{c['ratio']:.3g} ({low:.3g} to {high:.3g})</td>"
            f"<td class=num>{_e(format_value(c['always_valid_p'], 'ratio'))}</td>"
            f"<td class=num>{_e(_signed(fixed['ci95_us'][0]))} to {_e(_signed(fixed['ci95_us'][1]))}</td>"
            f"<td>{'significant' if c['significant'] else 'within min-effect' if c['equivalent'] else 'not yet'}</td></tr>"
        )
    table = ("<table><thead><tr><th>arm</th><th>mean turn (arm vs control)</th><th>difference</th>"
             "<th>ratio of geometric means (95% confidence sequence)</th><th>always-valid p</th>"
             "<th>fixed-horizon 95% CI of the difference</th><th>result</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>")
    note = ('<p class="note">The confidence sequence holds at every look; the fixed-horizon bootstrap interval '
            "only at a size fixed in advance. The shaded band is ±min-effect around no change.</p>")
    return table + note + _chart(_comparison_figure(ab_report), "ab-compare")


def _comparison_figure(ab_report: dict) -> Figure:
    comparisons = ab_report["comparisons"]
    figure, (ratios, differences) = _new_figure(12, 0.9 + 0.55 * len(comparisons), 2)
    effect = ab_report["min_effect"]
    labels = [_m(f"{c['arm']} / {ab_report['control']}") for c in comparisons]
    extent = [1 - effect, 1 + effect]
    for position, c in enumerate(comparisons):
        # Rounded to 4 digits, a bound can be 0, which a log axis has no place for.
        low, high = (max(bound, 1e-6) for bound in c["ratio_cs"])
        extent += [low, high]
        colour = "tab:green" if c["significant"] and c["ratio"] < 1 else "tab:red" if c["significant"] else "tab:gray"
        ratios.errorbar([c["ratio"]], [position], xerr=[[c["ratio"] - low], [high - c["ratio"]]], fmt="o",
                        color=colour, capsize=5, linewidth=2)
        fixed_low, fixed_high = c["fixed_horizon"]["ci95_us"]
        middle = c["difference_us"]
        differences.errorbar([middle], [position], xerr=[[max(middle - fixed_low, 0)], [max(fixed_high - middle, 0)]],
                             fmt="s", color=colour, capsize=5, linewidth=2)
    ratios.axvspan(1 - effect, 1 + effect, color="0.85", zorder=0)
    ratios.axvline(1, color="0.2", linewidth=1)
    # Ratios multiply: on a log axis 0.5 and 2 are as far from 1.
    ratios.set_xscale("log")
    _log_axis(ratios.xaxis, min(extent) / 1.2, max(extent) * 1.2)
    ratios.set_xlabel("ratio of geometric mean turn times, arm / control (95% confidence sequence)")
    differences.axvline(0, color="0.2", linewidth=1)
    differences.xaxis.set_major_locator(MaxNLocator(6))
    differences.xaxis.set_major_formatter(FuncFormatter(lambda value, _: _signed(value) if value else "0"))
    differences.set_xlabel("difference of mean turn times, arm - control (fixed-horizon 95% CI)")
    for ax in (ratios, differences):
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.invert_yaxis()
    return figure


def _signed(us: float | None) -> str:
    if us is None:
        return "-"
    return ("-" if us < 0 else "+") + format_duration_us(abs(us))
