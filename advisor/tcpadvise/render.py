"""Print a Report: a rich table for people, JSON for programs.

The text form is a table when it fits the console's width, otherwise one
compact block per socket (a pipe is 80 columns wide unless $COLUMNS says
otherwise). Both are built from the same cells, so they always agree.
"""

import json

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from .report import Report

_DASH = "-"
# Wider than any table, to measure its natural width.
_WIDE = 10_000


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2) + "\n"


def render_text(report: Report, console: Console) -> None:
    """A heading, the sockets (with a total when there are several), then the warnings."""
    process_count = len({(trace.data["program"], trace.data["pid"]) for trace in report.traces})
    console.print(
        Text(
            f"tcpadvise report: {len(report.traces)} trace(s), {process_count} process(es), "
            f"{len(report.sockets)} socket item(s)",
            style="bold",
        )
    )
    rows = [(_identity_cells(item), _figure_cells(item)) for item in report.sockets]
    total = report.total()
    if len(report.sockets) > 1 and total is not None:
        rows.append((_total_identity_cells(len(report.sockets), total["connections"]), _figure_cells(total)))
    if rows:
        table = _table(rows)
        unbounded = console.options.update_width(_WIDE)
        if Measurement.get(console, unbounded, table).maximum <= console.width:
            console.print(table)
        else:
            for identity, figures in rows:
                console.print(_block(identity, figures), end="\n\n")
    for warning in report.warnings:
        # soft_wrap leaves a warning on one line for grep; a terminal wraps it anyway.
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)


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
        "conns": [str(item["connections"]), "open" if item["open"] else "closed"],
        "nodelay": [
            _DASH if nodelay is None else ("on" if nodelay else "off"),
            *(["set by app"] if "TCP_NODELAY" in item["options_set"] else []),
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
        "writes": [_calls(writes["calls"]), _bytes(writes["bytes"]), f"p50 {_bytes(writes['size_p50'])}"],
        "writes/burst": [f"p50 {_number(bursts['writes_p50'])}", f"p99 {_number(bursts['writes_p99'])}"],
        "turn": [f"p50 {_duration_us(turns['p50_us'])}", f"p99 {_duration_us(turns['p99_us'])}"],
        "reads": [_calls(reads["calls"]), _bytes(reads["bytes"])],
        "errors": [f"{name} {count}" for name, count in figures["errors"].items()] or [_DASH],
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
    lines = [Text(f"  {name:<14}{', '.join(cells)}") for name, cells in details.items() if cells]
    return Text("\n").join([Text(heading, style="bold"), *lines])


def _endpoint(endpoint: dict) -> str:
    """addr:port, with * for the port a group leaves out (the ephemeral one)."""
    address = endpoint["addr"]
    port = endpoint["port"] or "*"
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _bytes(count: float | None) -> str:
    if count is None:
        return _DASH
    value, unit = float(count), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"


def _duration_us(microseconds: float | None) -> str:
    if microseconds is None:
        return _DASH
    if microseconds < 1:
        return f"{microseconds * 1000:.0f} ns"
    if microseconds < 1000:
        return f"{microseconds:.1f} µs"
    if microseconds < 1_000_000:
        return f"{microseconds / 1000:.1f} ms"
    return f"{microseconds / 1_000_000:.2f} s"


def _calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


def _number(value: float | None) -> str:
    return _DASH if value is None else f"{value:g}"
