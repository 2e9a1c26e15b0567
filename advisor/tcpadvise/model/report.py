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

Findings come from the rulebook (rules/advice.py): it reads `Report.sockets`, the
trace dicts behind them in the parallel `Report.raw_sockets` and the record
manifests in `Report.manifests`, and fills `Report.findings`.
"""

import shlex
from collections import Counter
from dataclasses import dataclass, field

from .. import schemas
from ..symbols.elfinfo import BinaryInfo, blind_spot
from ..symbols.symbolize import Symbolizer, socket_call_sites
from ..trace.reader import Inputs, Manifest, Trace
from .sockets import is_stream, merge_sockets, nodelay_set_by, socket_figures

REPORT_SCHEMA = schemas.uri("tcpadvise.report/1")


@dataclass
class Report:
    """Everything `tcpadvise report` prints; raw_sockets[i] is the trace's dict behind sockets[i]."""

    traces: list[Trace]
    sockets: list[dict]
    raw_sockets: list[dict]
    manifests: list[Manifest] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # policy_effects: policy.effect's expected effect of the adaptive policies, per socket group.
    policy_effects: list[dict] = field(default_factory=list)
    # subjects: metrics.subjects_of's groups, kept once made (the rules, the policy effects and the
    # text all read them); not copied by dataclasses.replace, whose copy may hold other strings.
    subjects: list | None = field(default=None, init=False, repr=False, compare=False)

    def to_json(self) -> dict:
        return {
            "schema": REPORT_SCHEMA,
            "traces": [str(trace.path) for trace in self.traces],
            "sockets": self.sockets,
            "findings": self.findings,
            "warnings": self.warnings,
            "policy_effects": self.policy_effects,
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


def _observed_seconds(trace: Trace) -> float | None:
    """Seconds from the shim's start in the process to the writing of its trace."""
    span = trace.data["written_unix_ns"] - trace.data["start_unix_ns"]
    return span / 1e9 if span > 0 else None


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
