"""Turn loaded traces into the report: one summary item per socket, findings, warnings.

The JSON form (`Report.to_json`, schema tcpadvise/schemas/report-1.schema.json):

    {"schema": "tcpadvise.report/1",
     "traces": [paths of the traces read],
     "sockets": [socket item, ...],
     "findings": [],
     "warnings": [plain sentences]}

A socket item is one entry of a trace's "sockets" (an open connection, or a
group of closed ones with the same role, service port and peer address),
summarised: counts as in the trace, percentiles instead of histograms (null
when nothing was recorded), times in ns except turns in microseconds. See
`socket_item` for the keys.

Findings come from the rulebook (advice.py): it reads `Report.sockets`, the
trace dicts behind them in the parallel `Report.raw_sockets` and the record
manifests in `Report.manifests`, and fills `Report.findings`.
"""

import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import hist
from .elfinfo import BinaryInfo, blind_spot
from .symbolize import Symbolizer, socket_call_sites
from .traces import Inputs, Manifest, Trace
from .units import ns_to_us

REPORT_SCHEMA = "tcpadvise.report/1"
_FIGURE_SECTIONS = ("writes", "bursts", "turns", "reads", "errors")


@dataclass
class Report:
    """Everything `tcpadvise report` prints; raw_sockets[i] is the trace's dict behind sockets[i]."""

    traces: list[Trace]
    sockets: list[dict]
    raw_sockets: list[dict]
    manifests: list[Manifest] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "schema": REPORT_SCHEMA,
            "traces": [str(trace.path) for trace in self.traces],
            "sockets": self.sockets,
            "findings": self.findings,
            "warnings": self.warnings,
        }

    def total(self) -> dict | None:
        """Figures of every socket taken together (as socket_figures gives), or None if none."""
        if not self.raw_sockets:
            return None
        merged = merge_sockets(self.raw_sockets)
        return {"connections": merged["connections"], **socket_figures(merged)}


def build_report(inputs: Inputs) -> Report:
    """The report on every socket of every trace in `inputs`, in trace order.

    A connection seen by several processes (a prefork server's listener and the child serving
    it) is one item: entries with the same cookie are merged and counted once.
    """
    symbolizer = Symbolizer()
    entries = _once_per_connection(
        _without_handed_off_copies([(trace, socket) for trace in inputs.traces for socket in trace.data["sockets"]])
    )
    return Report(
        traces=inputs.traces,
        sockets=[socket_item(trace, socket, pids, symbolizer) for trace, socket, pids in entries],
        raw_sockets=[socket for _, socket, _ in entries],
        manifests=inputs.manifests,
        warnings=[*inputs.warnings, *report_warnings(inputs)],
    )


def _without_handed_off_copies(entries: list[tuple[Trace, dict]]) -> list[tuple[Trace, dict]]:
    """The entries less a fork parent's unused copies of connections its children served.

    A prefork server accepts a connection, forks, and closes its copy unused (used: false); the
    child's copy (inherited: true) is the connection. A copy that kept its cookie is matched by it
    (_once_per_connection); those folded into a group of several have none, and are taken out here,
    as many as the children's inherited connections no cookie matched.
    """
    # Processes are (host, pid): traces of several hosts may share pids.
    cookies_of: dict[tuple, set[int]] = {}
    for trace, socket in entries:
        cookies_of.setdefault(_process(trace), set()).add(socket.get("cookie") or 0)
    unmatched: Counter[tuple] = Counter()
    for trace, socket in entries:
        parent = (trace.data.get("host"), trace.data["ppid"])
        if socket.get("inherited") and not (socket.get("cookie") and socket["cookie"] in cookies_of.get(parent, ())):
            unmatched[parent] += socket["connections"]
    result = []
    for trace, socket in entries:
        pid = _process(trace)
        if socket.get("used") is False and not socket.get("inherited") and not socket.get("cookie") and unmatched[pid]:
            handed = min(unmatched[pid], socket["connections"])
            unmatched[pid] -= handed
            if handed == socket["connections"]:
                continue
            socket = {**socket, "connections": socket["connections"] - handed}
        result.append((trace, socket))
    return result


def _process(trace: Trace) -> tuple:
    return (trace.data.get("host"), trace.data["pid"])


def _once_per_connection(entries: list[tuple[Trace, dict]]) -> list[tuple[Trace, dict, list[int]]]:
    """The entries with those of one cookie (SO_COOKIE: one kernel socket) merged, each with its pids.

    The merged entry keeps the identity, options and tcp_info of the process that did the most
    with the connection (the child serving it, not the listener that accepted it); its counts are
    the sum of every process's.
    """
    # A cookie is unique within one host's boot: keyed by (host, cookie).
    by_cookie: dict[tuple, list[tuple[Trace, dict]]] = {}
    for trace, socket in entries:
        cookie = socket.get("cookie")
        if isinstance(cookie, int) and cookie:
            by_cookie.setdefault((trace.data.get("host"), cookie), []).append((trace, socket))
    merged_at: dict[tuple, int] = {}
    result: list[tuple[Trace, dict, list[int]]] = []
    for trace, socket in entries:
        cookie = socket.get("cookie")
        if isinstance(cookie, int) and cookie:
            cookie = (trace.data.get("host"), cookie)
        same = by_cookie.get(cookie) if isinstance(cookie, tuple) else None
        if not same or len(same) == 1:
            result.append((trace, socket, [trace.data["pid"]]))
            continue
        if cookie in merged_at:
            continue
        merged_at[cookie] = len(result)
        main_trace, main = max(same, key=lambda pair: _activity(pair[1]))
        combined = {**main, **merge_sockets(other for _, other in same), "connections": main["connections"]}
        pids = sorted({other_trace.data["pid"] for other_trace, _ in same})
        result.append((main_trace, combined, pids))
    return result


def _activity(socket: dict) -> int:
    return socket["writes"]["calls"] + socket["reads"]["calls"]


def socket_item(
    trace: Trace, socket: dict, pids: list[int] | None = None, symbolizer: Symbolizer | None = None
) -> dict:
    """The report's summary of one socket (or group) of a trace; `pids`: every process that held it;
    its call sites resolved with `symbolizer` (none without one)."""
    return {
        "program": trace.data["program"],
        "host": trace.data.get("host"),
        "pid": trace.data["pid"],
        "pids": pids or [trace.data["pid"]],
        "cookie": socket.get("cookie"),
        "live": socket.get("live", socket["open"]),
        "observed_s": _observed_seconds(trace),
        "nodelay_set_by": nodelay_set_by(socket),
        "stream": is_stream(socket),
        "kind": socket["kind"],
        "connections": socket["connections"],
        "open": socket["open"],
        "role": socket["role"],
        "family": socket["family"],
        "local": socket["local"],
        "peer": socket["peer"],
        "service_port": socket.get("service_port"),
        "options_set": socket["options_set"],
        "options": socket["options"],
        **socket_figures(socket),
        "tcp_info": socket.get("tcp_info", {}),
        "call_sites": socket_call_sites(trace.data, socket, symbolizer) if symbolizer else [],
    }


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


def _observed_seconds(trace: Trace) -> float | None:
    """Seconds from the shim's start in the process to the writing of its trace."""
    span = trace.data["written_unix_ns"] - trace.data["start_unix_ns"]
    return span / 1e9 if span > 0 else None


def socket_figures(socket: dict) -> dict:
    """Counts and percentiles of a trace socket's writes, bursts, turns, reads and errors."""
    writes, bursts, turns, reads = socket["writes"], socket["bursts"], socket["turns"], socket["reads"]
    return {
        "writes": {
            "calls": writes["calls"],
            "bytes": writes["bytes"],
            "by_api": writes["by_api"],
            "size_p50": _percentile(writes["size"], 0.5),
            "size_p99": _percentile(writes["size"], 0.99),
            "mean_size": hist.mean(writes["size"]),
            "iovcnt_p50": _percentile(writes["iovcnt"], 0.5),
            "syscall_ns_p50": _percentile(writes["syscall_ns"], 0.5),
            "syscall_ns_p99": _percentile(writes["syscall_ns"], 0.99),
            "gap_ns_p50": _percentile(writes["gap_ns"], 0.5),
        },
        "bursts": {
            "count": bursts["count"],
            "writes_p50": _percentile(bursts["writes"], 0.5),
            "writes_p99": _percentile(bursts["writes"], 0.99),
            "bytes_p50": _percentile(bursts["bytes"], 0.5),
            "bytes_p99": _percentile(bursts["bytes"], 0.99),
        },
        "turns": {
            "count": turns["count"],
            "p50_us": ns_to_us(hist.percentile(turns["ns"], 0.5)),
            "p99_us": ns_to_us(hist.percentile(turns["ns"], 0.99)),
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
    sockets = list(sockets)
    merged = {section: _merge_values([socket[section] for socket in sockets]) for section in _FIGURE_SECTIONS}
    merged["connections"] = sum(socket["connections"] for socket in sockets)
    return merged


def report_warnings(inputs: Inputs) -> list[str]:
    """Plain sentences about what the figures cannot show or may get wrong."""
    warnings = []
    if inputs.stale:
        warnings.append(
            f"ignored {len(inputs.stale)} trace(s) written before the run in record.json started "
            "(left over from an earlier run into the same directory)"
        )
    for trace in inputs.traces:
        warnings.extend(_trace_warnings(trace))
    if not any(trace.data["sockets"] for trace in inputs.traces):
        if inputs.manifests:
            warnings.extend(_silent_run_warning(manifest) for manifest in inputs.manifests)
        else:
            warnings.append("these traces hold no TCP socket: there is nothing to report on")
    return warnings


def _trace_warnings(trace: Trace) -> list[str]:
    data = trace.data
    process = f"{data['program']} (pid {data['pid']})"
    warnings = [f"{process}: shim: {warning}" for warning in data["shim_warnings"]]
    if data.get("policy_fail_open"):
        warnings.append(
            f"{process}: the policy failed open ({data['policy_fail_open']}): "
            "cork and coalesce passed its writes through unchanged from then on"
        )
    deferred: dict[str, int] = {}
    for socket in data["sockets"]:
        for name, count in socket.get("policy", {}).get("counters", {}).get("deferred_errors", {}).items():
            deferred[name] = deferred.get(name, 0) + count
    if deferred:
        listed = ", ".join(f"{name} x{count}" for name, count in sorted(deferred.items()))
        warnings.append(
            f"{process}: bytes a policy held could not be delivered ({listed}); EBADF: the program closed "
            "the socket where the shim could not see it"
        )
    if data.get("stop_signal"):
        warnings.append(
            f"{process}: stopped by SIG{data['stop_signal']}: the shim wrote this trace, then let the signal end it"
        )
    if not data["final"]:
        warnings.append(
            f"{process}: figures are from a periodic snapshot, not from its exit: "
            f"it was still running or was killed when {trace.path} was last written"
        )
    if data.get("groups_dropped"):
        warnings.append(
            f"{process}: {data['groups_dropped']} closed connections went into an overflow group "
            "because the shim's group table was full"
        )
    return warnings


def _silent_run_warning(manifest: Manifest) -> str:
    data = manifest.data
    reason = blind_spot(BinaryInfo.of_manifest(data)) or "it made no TCP connection through libc"
    return (
        f"'{shlex.join(data['command'])}' ran (exit status {data['exit_status']}) "
        f"but no TCP call was intercepted: {reason}"
    )


def _merge_values(values: list):
    first = values[0]
    if isinstance(first, dict) and "buckets" in first:
        return hist.merge(values)
    if isinstance(first, dict):
        keys = dict.fromkeys(key for value in values for key in value)
        return {key: _merge_values([value[key] for value in values if key in value]) for key in keys}
    return sum(values)


def _percentile(histogram: dict, fraction: float) -> float | None:
    return hist.percentile(histogram, fraction)
