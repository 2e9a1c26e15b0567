"""Print a Report for people: a rich table, the findings, and the A/B report.

The text form is a table when it fits the console's width, otherwise one
compact block per socket (a pipe is 80 columns wide unless $COLUMNS says
otherwise). Both are built from the same cells, so they always agree. Then
come the warnings, and last the findings, grouped by severity, each with its
evidence beside the thresholds it passed.
"""

from collections import Counter

import yaml
from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..model.report import Report
from ..model.streaming import StreamedReport
from ..rules import SEVERITIES
from ..symbols.symbolize import call_site_line, site_text
from ..trace import represents
from ..units import DASH, format_bytes, format_duration_us, format_number, format_value
from .layout import fits, labelled_block

# _CALL_SITES_SHOWN: the sites a socket group or finding names in text (JSON has them all).
_CALL_SITES_SHOWN = 5


def render_text(report: "Report | StreamedReport", console: Console) -> None:
    """A heading, the sockets (with a total when there are several), then the warnings."""
    process_count = represents.processes(report.traces)
    console.print(
        Text(
            f"tcpadvise report: {len(report.traces)} trace(s), {process_count} process(es), "
            f"{report.socket_count} socket item(s)",
            style="bold",
        )
    )
    shown = report.shown_sockets()
    rows = [(_identity_cells(item), _figure_cells(item)) for item in shown]
    total = report.total()
    if report.socket_count > 1 and total is not None:
        rows.append((_total_identity_cells(report.socket_count, total["connections"]), _figure_cells(total)))
    if rows:
        table = _table(rows)
        if fits(console, table):
            console.print(table)
        else:
            for identity, figures in rows:
                console.print(_block(identity, figures), end="\n\n")
    if len(shown) < report.socket_count:
        console.print(
            f"... and {report.socket_count - len(shown):,} more socket items, less busy (the total counts them all); "
            "--format json lists every one, --program, --pid, --port and --peer narrow the report",
            soft_wrap=True,
            highlight=False,
        )
    for warning in report.warnings:
        # soft_wrap leaves a warning on one line for grep; a terminal wraps it anyway.
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    _render_call_sites(report, console)
    _render_policy_effects(report.policy_effects, console)
    _render_findings(report.findings, console)


def _render_call_sites(report, console: Console) -> None:
    """Per socket group (a program's sockets to one service), the code that writes the most."""
    for group in report.call_site_groups():
        sites = group["call_sites"]
        if not sites:
            continue
        where = (f"server :{group['local_port']}" if group["role"] == "server"
                 else f"{group['role']} → {group['peer']}:{group['peer_port']}")
        console.print(Text(f"call sites: {group['program']} {where}", style="bold"))
        for site in sites[:_CALL_SITES_SHOWN]:
            console.print(f"  {call_site_line(site, group['bursts'])}", soft_wrap=True, highlight=False)
        if len(sites) > _CALL_SITES_SHOWN:
            console.print(f"  ... {len(sites) - _CALL_SITES_SHOWN} more (--format json lists them all)", highlight=False)


def _render_policy_effects(effects: list[dict], console: Console) -> None:
    """Per socket group, what adaptive cork or coalesce would do (policy.effect)."""
    if effects:
        console.print(Text("adaptive cork or coalesce, expected effect:", style="bold"))
    for effect in effects:
        where = (f"server :{effect['local_port']}" if effect["role"] == "server"
                 else f"{effect['role']} → {effect['peer']}:{effect['peer_port']}")
        console.print(Text(f"  {effect['program']} {where}: {effect['text']}"), soft_wrap=True)


# A cell is a list of short lines: stacked in a table, joined by commas in a block.
Cells = dict[str, list[str]]
_IDENTITY_HEADINGS = ("process", "connection", "conns", "nodelay")
_FIGURE_HEADINGS = ("writes", "writes/burst", "turn", "reads", "errors")
_HEADINGS = _IDENTITY_HEADINGS + _FIGURE_HEADINGS
_RIGHT_ALIGNED = {"conns", "writes", "writes/burst", "turn", "reads"}


def _identity_cells(item: dict) -> Cells:
    nodelay = item["options"].get("nodelay")
    return {
        "process": [item["program"], f"pid {item['pid']}"],
        "connection": [item["role"], _endpoint(item["local"]), f"→ {_endpoint(item['peer'])}"],
        "conns": [
            str(item["connections"]),
            "open" if item["open"] else "closed",
            *([f"sampled\u00a0×{item['represents']}"] if "represents" in item else []),
            *(["stream"] if item["stream"] else []),
            *([f"pids {', '.join(map(str, item['pids']))}"] if len(item["pids"]) > 1 else []),
        ],
        "nodelay": [
            format_value(nodelay, "bool"),
            *([f"set by {item['nodelay_set_by']}"] if item["nodelay_set_by"] else []),
        ],
    }


def _total_identity_cells(item_count: int, connections: int) -> Cells:
    return {
        "process": ["all"],
        "connection": [f"{item_count} socket items"],
        "conns": [str(connections), "total"],
        "nodelay": [],
    }


def _figure_cells(figures: dict) -> Cells:
    """Cells from socket_figures output: a socket item or Report.total()."""
    writes, bursts, turns, reads = figures["writes"], figures["bursts"], figures["turns"], figures["reads"]
    return {
        "writes": [
            _calls(writes["calls"]),
            format_bytes(writes["bytes"]),
            f"p50 {format_bytes(writes['size_p50'])}",
        ],
        "writes/burst": [
            f"p50 {format_number(bursts['writes_p50'])}",
            f"p99 {format_number(bursts['writes_p99'])}",
        ],
        "turn": [f"p50 {format_duration_us(turns['p50_us'])}", f"p99 {format_duration_us(turns['p99_us'])}"]
        + _sampled_cell(turns),
        "reads": [_calls(reads["calls"]), format_bytes(reads["bytes"])],
        "errors": [f"{name} {count}" for name, count in figures["errors"].items()] or [DASH],
    }


def _table(rows: list[tuple[Cells, Cells]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for heading in _HEADINGS:
        table.add_column(heading, justify="right" if heading in _RIGHT_ALIGNED else "left", no_wrap=True)
    for identity, figures in rows:
        cells = {**identity, **figures}
        table.add_row(*(Text("\n".join(cells[heading])) for heading in _HEADINGS), end_section=True)
    return table


def _block(identity: Cells, figures: Cells) -> Text:
    heading = "  ".join(" ".join(identity[name]) for name in ("process", "connection", "conns"))
    details = {"nodelay": identity["nodelay"], **figures}
    return labelled_block(heading, [(name, ", ".join(cells)) for name, cells in details.items() if cells], 14)


def _endpoint(endpoint: dict) -> str:
    """addr:port, with * for the port a group leaves out (the ephemeral one)."""
    address = endpoint["addr"]
    port = endpoint["port"] or "*"
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _sampled_cell(turns: dict) -> list[str]:
    """A socket that sampled its turns: how many of them the percentiles (all of its histograms) come from."""
    if "recorded" not in turns:
        return []
    return [f"~ from {turns['recorded']:,} of {turns['count']:,} turns"]


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


_SEVERITY_STYLES = {"high": "bold red", "medium": "bold yellow", "low": "bold cyan", "info": "bold"}
_OP_SYMBOLS = {"==": "=", "!=": "≠", "<": "<", "<=": "≤", ">": ">", ">=": "≥"}


def _render_findings(findings: list[dict], console: Console) -> None:
    counts = Counter(finding["severity"] for finding in findings)
    summary = ", ".join(f"{counts[severity]} {severity}" for severity in SEVERITIES if counts[severity])
    console.print()
    console.print(Text(f"findings: {summary or 'none'}", style="bold"))
    for severity in SEVERITIES:
        group = [finding for finding in findings if finding["severity"] == severity]
        if group:
            console.print(Text(severity, style=_SEVERITY_STYLES[severity]))
        for finding in group:
            console.print(Padding(_finding_block(finding), (0, 0, 1, 2), expand=False))


def _finding_block(finding: dict) -> Group:
    heading = Text.assemble(
        (finding["rule"], "bold"), f"  {finding['title']}  (confidence {finding['confidence']})"
    )
    recommendation = finding["recommendation"]
    details = Table.grid(padding=(0, 1))
    details.add_column(no_wrap=True, style="dim")
    details.add_column(overflow="fold")
    rows = {
        "scope": _scope_text(finding["scope"]),
        "why": finding["why"],
        "evidence": ", ".join(_evidence_text(item) for item in finding["evidence"]),
        "policy": _policy_text(recommendation["policy"]),
        "code": recommendation["code"],
        "call sites": ", ".join(site_text(site) for site in finding.get("call_sites", [])[:_CALL_SITES_SHOWN]),
        "note": recommendation["note"],
        "effect": finding["expected_effect"],
        "source": ", ".join(finding["source"]["seeds"] or [finding["source"]["note"]]),
    }
    for label, value in rows.items():
        if value:
            details.add_row(label, value)
    return Group(heading, Padding(details, (0, 0, 0, 2), expand=False))


def _scope_text(scope: dict) -> str:
    pids = ", ".join(str(pid) for pid in scope["pids"])
    if scope["command"] is not None:
        return f"{scope['program']} (pid {pids}), run as '{' '.join(scope['command'])}'"
    if scope["role"] == "server":
        where = f"server :{scope['local_port']}"
    else:
        where = f"{scope['role']} → {_endpoint({'addr': scope['peer'], 'port': scope['peer_port']})}"
    connections = f"{scope['connections']} connection{'' if scope['connections'] == 1 else 's'}"
    affected = scope.get("affected_connections", scope["connections"])
    if affected != scope["connections"]:
        connections += f", {affected} of them with this finding"
    return f"{scope['program']} {where} (pid {pids}, {connections})"


def _evidence_text(item: dict) -> str:
    value = f"{item['metric']} {format_value(item['value'], item['unit'])}"
    if item["op"] is None:
        return value
    if item["op"] == "between":
        low, high = (format_value(bound, item["unit"]) for bound in item["threshold"])
        return f"{value} ({low} to {high})"
    if item["op"] == "in":
        return f"{value} (in {', '.join(format_value(choice, item['unit']) for choice in item['threshold'])})"
    return f"{value} ({_OP_SYMBOLS[item['op']]} {format_value(item['threshold'], item['unit'])})"


def _policy_text(policy: str | dict) -> str:
    if policy == "observe":
        return "observe (no policy to try)"
    if isinstance(policy, str):
        return f"{policy} (try it: tcpadvise record --policy {policy} -- COMMAND)"
    shown = yaml.safe_dump(policy, default_flow_style=True, sort_keys=False).strip()
    return f"{shown} (report --emit-policy FILE writes it for record --policy FILE)"


def render_ab_text(report: dict, console: Console) -> None:
    """An experiment's arms side by side, then the split, each comparison and the verdict."""
    state = "running" if report["state"] == "running" else "finished"
    table = Table(title=f"experiment {report['experiment']} (seed {report['seed']}, control: {report['control']}, "
                        f"{state}, {report['live_connections']} connections live)",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    arm_width = max(len(arm["name"]) for arm in report["arms"])
    table.add_column("arm", min_width=min(arm_width, 24))
    for column in ("conns", "live", "turns", "turn p50", "p90", "p99", "bytes/s", "errors"):
        table.add_column(column, justify="right", no_wrap=True)
    stopped = any(arm["stopped"] for arm in report["arms"])
    if stopped:
        table.add_column("guardrail", min_width=9)
    for arm in report["arms"]:
        throughput = arm["throughput_bytes_per_s"]
        table.add_row(
            arm["name"], str(arm["connections"]), str(arm["live_connections"]), str(arm["turns"]),
            *(format_duration_us(arm[key]) for key in ("turn_p50_us", "turn_p90_us", "turn_p99_us")),
            format_value(throughput, "bytes_per_s"),
            str(arm["errors"]),
            *(["stopped: " + "; ".join(arm["stop_reasons"]) if arm["stopped"] else "-"] if stopped else []),
        )
    console.print(table)
    split = report["split"]
    p = "-" if split["p_value"] is None else format_value(split['p_value'], 'ratio')
    console.print("split: " + ", ".join(f"{name} {n}" for name, n in split["drawn"].items())
                  + f" (sample-ratio test p={p}{'' if split['ok'] else ', OFF'})")
    for c in report["comparisons"]:
        low, high = c["ratio_cs"]
        fixed = c["fixed_horizon"]
        console.print(f"{c['arm']} vs {report['control']}: mean turn {format_duration_us(c['arm_mean_us'])} vs "
                      f"{format_duration_us(c['control_mean_us'])}, geometric-mean ratio {format_value(c['ratio'], 'ratio')} "
                      f"(95% confidence sequence {format_value(low, 'ratio')} to {format_value(high, 'ratio')}, always-valid p={format_value(c['always_valid_p'], 'ratio')})"
                      f"{'' if c['significant'] else ', not significant'}; fixed-horizon, valid only at a planned "
                      f"size: 95% CI {_signed_us(fixed['ci95_us'][0])} to {_signed_us(fixed['ci95_us'][1])}, "
                      f"rank test p={format_value(fixed['p_value'], 'ratio')}")
    verdict = report["verdict"]
    headline = f"winner: {verdict['winner']}" if verdict["outcome"] == "winner" else verdict["outcome"]
    console.print(f"verdict: {headline}: {verdict['reason']}")
    for warning in report["warnings"]:
        console.print(f"warning: {warning}")


def _signed_us(us: float | None) -> str:
    return DASH if us is None else _signed(us, format_duration_us)


def render_diff_text(document: dict, console: Console) -> None:
    """A diff (model.diff): per group in both, each figure before and after with its change; then the rest."""
    console.print(Text(f"tcpadvise diff: {len(document['before']['traces'])} trace(s) before, "
                       f"{len(document['after']['traces'])} after", style="bold"))
    if not document["groups"]:
        console.print("no socket group is in both")
    confidence = f"{document['confidence'] * 100:.0f}% interval"
    for group in document["groups"]:
        connections = group["connections"]
        console.print()
        console.print(Text(f"{_diff_group_name(group)}: {connections['before']} -> {connections['after']} "
                           "connection(s)", style="bold"))
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
        for column in ("", "before", "after", "change", confidence):
            table.add_column(column, justify="left" if not column else "right", no_wrap=True)
        for label, key, format_one in (("turn p50", "turn_p50_us", format_duration_us),
                                       ("turn p99", "turn_p99_us", format_duration_us),
                                       ("writes per burst", "writes_per_burst_p50", format_number)):
            compared = group[key]
            change = DASH if compared["change"] is None else _signed(compared["change"], format_one)
            interval = (DASH if compared["low"] is None else
                        f"{_signed(compared['low'], format_one)} to {_signed(compared['high'], format_one)}"
                        + (" *" if compared["significant"] else ""))
            table.add_row(label, format_one(compared["before"]), format_one(compared["after"]), change, interval)
        segments = group["segments_per_write"]
        table.add_row("segments per write", _ratio(segments["before"]), _ratio(segments["after"]), DASH, DASH)
        console.print(table)
    console.print("* the interval excludes 0: a significant change")
    for side, label in (("only_before", "only before"), ("only_after", "only after")):
        for group in document[side]:
            console.print(Text(f"{label}: {_diff_group_name(group)}"))
    for side, label in (("findings_appeared", "appeared"), ("findings_gone", "gone")):
        for finding in document[side]:
            port = finding["local_port"] if finding["role"] == "server" else finding["peer_port"]
            console.print(Text(f"finding {label}: {finding['severity']} {finding['rule']} "
                               f"({finding['program']} {finding['role']}, port {port if port is not None else DASH})"))


def _diff_group_name(group: dict) -> str:
    where = (f"server :{group['local_port']}" if group["role"] == "server"
             else f"{group['role']} → {group['peer']}:{group['peer_port']}")
    return f"{group['program']} {where}" + (" (stream)" if group["stream"] else "")


def _signed(value: float, format_one) -> str:
    return ("-" if value < 0 else "+") + format_one(abs(value))


def _ratio(value: float | None) -> str:
    return DASH if value is None else format_number(value)
