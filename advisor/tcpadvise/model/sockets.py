"""One trace socket (an open connection, or a group of closed ones) as figures.

A trace socket is a dict of a trace's "sockets" (schemas/trace-1.schema.json); these
functions summarise it (percentiles instead of histograms) and add several
together (counts summed, histograms merged).
"""

import math
from collections.abc import Iterable

from ..units import ns_to_us
from . import hist

# FIGURE_SECTIONS: the sections of a trace socket that socket_figures summarises (in its order).
FIGURE_SECTIONS = ("writes", "bursts", "turns", "reads", "errors")
_MEDIAN_AND_P99 = (0.5, 0.99)


def is_stream(socket: dict) -> bool:
    """Whether a trace socket only sends: bytes written, none read (a write-only stream)."""
    return socket["writes"]["bytes"] > 0 and socket["reads"]["bytes"] == 0


def nodelay_set_by(socket: dict) -> str | None:
    """Who turned TCP_NODELAY on: "app" (the program's setsockopt), "policy" (the shim's), or None."""
    if socket["options_set"].get("TCP_NODELAY"):
        return "app"
    if socket.get("policy", {}).get("settings", {}).get("nodelay") and socket["options"].get("nodelay"):
        return "policy"
    return None


def socket_figures(socket: dict) -> dict:
    """Counts and percentiles of a trace socket's writes, bursts, turns, reads and errors.

    turns.recorded, when the socket sampled its turns (a trace's turns.sampled), is how many of
    turns.count the percentiles come from: the rest are estimated from them (bursts.count too)."""
    writes, bursts, turns, reads = socket["writes"], socket["bursts"], socket["turns"], socket["reads"]
    size_p50, size_p99 = hist.percentiles(writes["size"], _MEDIAN_AND_P99)
    syscall_p50, syscall_p99 = hist.percentiles(writes["syscall_ns"], _MEDIAN_AND_P99)
    burst_writes_p50, burst_writes_p99 = hist.percentiles(bursts["writes"], _MEDIAN_AND_P99)
    burst_bytes_p50, burst_bytes_p99 = hist.percentiles(bursts["bytes"], _MEDIAN_AND_P99)
    turn_p50, turn_p99 = hist.percentiles(turns["ns"], _MEDIAN_AND_P99)
    return {
        "writes": {
            "calls": writes["calls"],
            "bytes": writes["bytes"],
            "by_api": writes["by_api"],
            "size_p50": size_p50,
            "size_p99": size_p99,
            "mean_size": hist.mean(writes["size"]),
            "iovcnt_p50": _percentile(writes["iovcnt"], 0.5),
            "syscall_ns_p50": syscall_p50,
            "syscall_ns_p99": syscall_p99,
            "gap_ns_p50": _percentile(writes["gap_ns"], 0.5),
        },
        "bursts": {
            "count": bursts["count"],
            "writes_p50": burst_writes_p50,
            "writes_p99": burst_writes_p99,
            "bytes_p50": burst_bytes_p50,
            "bytes_p99": burst_bytes_p99,
        },
        "turns": {
            "count": turns["count"],
            "p50_us": ns_to_us(turn_p50),
            "p99_us": ns_to_us(turn_p99),
            **({"recorded": turns["sampled"]["recorded"]} if "sampled" in turns else {}),
        },
        "reads": {
            "calls": reads["calls"],
            "bytes": reads["bytes"],
            "by_api": reads["by_api"],
            "size_p50": _percentile(reads["size"], 0.5),
            "eof": reads["eof"],
        },
        "errors": socket["errors"],
    }


def merge_sockets(sockets: Iterable[dict]) -> dict:
    """The connection count and figure sections of trace sockets added together.

    Counts are summed, histograms merged, per-API and per-errno tables added key by key.
    """
    total = SocketsSum()
    for socket in sockets:
        total.add(socket)
    return total.result()


class SocketsSum:
    """merge_sockets one socket at a time: add() each, result() is merge_sockets of all of them.
    The first is only kept: a sum of one socket (a socket item judged alone) is made at once."""

    def __init__(self):
        self._sums: dict = {section: {} for section in FIGURE_SECTIONS}
        self._first: dict | None = None
        self._added = 0
        self._connections = 0
        # Turns of the sockets that recorded every turn (no turns.sampled): recorded in full, should
        # a sum hold sampled sockets too.
        self._full_turns = 0

    def add(self, socket: dict) -> None:
        self._added += 1
        if self._added == 1:
            self._first = socket
        else:
            if self._added == 2:
                self._count_in(self._first)
            self._count_in(socket)
        self._connections += socket["connections"]

    def _count_in(self, socket: dict) -> None:
        for section, sums in self._sums.items():
            _add_into(sums, socket[section])
        if "sampled" not in socket["turns"]:
            self._full_turns += socket["turns"]["count"]

    def result(self) -> dict:
        if self._added == 1:
            merged = {section: _alone(self._first[section]) for section in FIGURE_SECTIONS}
        else:
            merged = {section: _result(sums) for section, sums in self._sums.items()}
            if "sampled" in merged["turns"]:
                merged["turns"]["sampled"]["recorded"] += self._full_turns
        merged["connections"] = self._connections
        return merged


def _add_into(sums: dict, table: dict) -> None:
    """Add a table of the sockets (a section, per-API counts...) into its sums, key by key in order of
    first appearance: a number to a number, a histogram to a hist.Sum, a table to a table of sums;
    what a key is, its first value says."""
    for key, value in table.items():
        total = sums.get(key)
        if total is None:
            if type(value) is dict:
                if "buckets" in value:
                    total = sums[key] = hist.Sum()
                    total.add(value)
                else:
                    _add_into(sums.setdefault(key, {}), value)
            else:
                sums[key] = 0 + value
        elif type(total) is hist.Sum:
            total.add(value)
        elif type(total) is dict:
            _add_into(total, value)
        else:
            sums[key] = total + value


def _result(sums: dict) -> dict:
    return {key: total.result() if type(total) is hist.Sum else _result(total) if type(total) is dict else total
            for key, total in sums.items()}


def _alone(value):
    """What the sums make of one value; an indexed histogram is itself (hist.merge of one gives the
    same figures, copied), and so is a table already as the sums make it (numbers, such histograms:
    a socket's sections as the shim writes them; the report reads them, never changes them), which
    is not copied (a scope of one socket item is made for every socket of a report)."""
    if type(value) is dict and "buckets" not in value and _as_summed(value):
        return value
    if isinstance(value, dict) and "buckets" in value:
        return value if "scale" in value and (value["count"] or not value["min"]) else hist.merge([value])
    if isinstance(value, dict):
        return {key: _alone(item) for key, item in value.items()}
    return 0 + value


def _as_summed(table: dict) -> bool:
    """Whether _alone would make of a table an equal one: ints and floats (not bools, not -0.0),
    tables of them and indexed histograms that are not empty with a placeholder min."""
    for value in table.values():
        kind = type(value)
        if kind is dict:
            if "buckets" in value:
                if not ("scale" in value and (value["count"] or not value["min"])):
                    return False
            elif not _as_summed(value):
                return False
        elif kind is float:
            if value == 0 and math.copysign(1.0, value) < 0:
                return False  # 0 + -0.0 is 0.0
        elif kind is not int:
            return False
    return True


def _percentile(histogram: dict, fraction: float) -> float | None:
    return hist.percentile(histogram, fraction)
