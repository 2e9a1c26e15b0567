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
from collections.abc import Iterator
from dataclasses import dataclass, field

from .. import schemas
from ..symbols.elfinfo import BinaryInfo, blind_spot
from ..symbols.symbolize import Symbolizer, merge_call_sites, socket_call_sites
from ..trace.reader import Inputs, Manifest, Trace
from ..trace.stream import Identity, TraceSockets, deferred_errors, opened
from .sockets import FIGURE_SECTIONS, is_stream, merge_sockets, nodelay_set_by, socket_figures

REPORT_SCHEMA = schemas.uri("tcpadvise.report/1")
# TABLE_ROWS: the socket items the text table shows at most (the busiest; JSON has them all).
TABLE_ROWS = 200


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

    @property
    def socket_count(self) -> int:
        return len(self.sockets)

    def shown_sockets(self) -> list[dict]:
        """The socket items the text table shows: all of them, or past TABLE_ROWS the busiest (most
        calls), in report order. A table of thousands of rows is for a program, which JSON serves."""
        items = self.sockets
        if len(items) <= TABLE_ROWS:
            return items
        busiest = sorted(range(len(items)), key=lambda index: -(items[index]["writes"]["calls"] + items[index]["reads"]["calls"]))
        return [items[index] for index in sorted(busiest[:TABLE_ROWS])]

    def group_segments_per_write(self) -> list[tuple]:
        """Per socket group (metrics.subjects_of's scopes): the scope and its SegmentsPerWrite."""
        from .metrics import Scope, subjects_of  # metrics reads Report

        result = []
        for scope in subjects_of(self):
            if isinstance(scope, Scope):
                segments = SegmentsPerWrite()
                for index in scope.sockets:
                    segments.add(self.sockets[index])
                result.append((scope, segments.result()))
        return result

    def call_site_groups(self) -> list[dict]:
        """Per socket group (metrics.subjects_of's scopes): who it is, its call sites and bursts."""
        from .metrics import Scope, subjects_of  # metrics reads Report

        return [
            {"program": scope.program, "role": scope.role, "local_port": scope.local_port, "peer": scope.peer,
             "peer_port": scope.peer_port,
             "call_sites": merge_call_sites([self.sockets[index].get("call_sites", []) for index in scope.sockets]),
             "bursts": sum((self.sockets[index].get("bursts") or {}).get("count") or 0 for index in scope.sockets)}
            for scope in subjects_of(self) if isinstance(scope, Scope)
        ]


class SegmentsPerWrite:
    """Data segments sent per write call over socket items added one at a time, counting those whose
    tcp_info was read (diff's segments_per_write)."""

    def __init__(self):
        self._segments = 0
        self._writes = 0

    def add(self, item: dict) -> None:
        segments = item["tcp_info"].get("data_segs_out")
        if segments is not None:
            self._segments += segments
            self._writes += item["writes"]["calls"]

    def result(self) -> float | None:
        return self._segments / self._writes if self._writes else None


def build_report(inputs: Inputs) -> Report:
    """The report on every socket of every trace in `inputs`, in trace order (report_entries)."""
    symbolizer = Symbolizer()
    entries = list(report_entries(inputs.traces))
    return Report(
        traces=inputs.traces,
        sockets=[socket_item(trace, socket, pids, symbolizer) for trace, socket, pids in entries],
        raw_sockets=[socket for _, socket, _ in entries],
        manifests=inputs.manifests,
        warnings=[*inputs.warnings, *report_warnings(inputs)],
    )


def report_entries(traces: list[Trace]) -> Iterator[tuple[Trace, dict, list[int]]]:
    """Every socket of every trace as (trace, socket, pids of the processes that held it), in trace
    order, one at a time: a trace's sockets are iterated (twice for a trace holding a connection
    that another process held too), never all held at once.

    A connection seen by several processes (a prefork server's listener and the child serving
    it) is one entry: entries with the same cookie are merged and counted once, in the place of the
    first. A fork parent's unused copies of connections its children served are left out
    (_handed_off).
    """
    identities = [(trace, identity) for trace in traces for identity in _identities(trace.data["sockets"])]
    connections = _handed_off(identities)
    groups = _shared_connections(identities, connections)
    members: dict[int, list[tuple[Trace, dict]]] = {}
    if groups:
        wanted = {position for positions in groups.values() for position in positions}
        for position, (trace, socket) in _positions(traces, connections):
            if position in wanted:
                members[position] = (trace, socket)
    group_of = {position: positions for positions in groups.values() for position in positions}
    for position, (trace, socket) in _positions(traces, connections):
        shared = group_of.get(position)
        if shared is None:
            yield trace, socket, [trace.data["pid"]]
        elif position == shared[0]:
            same = [members[other] for other in shared]
            main_trace, main = max(same, key=lambda pair: _activity(pair[1]))
            combined = {**main, **merge_sockets(other for _, other in same), "connections": main["connections"]}
            yield main_trace, combined, sorted({other_trace.data["pid"] for other_trace, _ in same})


def _identities(sockets) -> list[Identity]:
    return sockets.identities if isinstance(sockets, TraceSockets) else [Identity.of(socket) for socket in sockets]


def _positions(traces: list[Trace], connections: list[int | None]) -> Iterator[tuple[int, tuple[Trace, dict]]]:
    """(position, (trace, socket)) of every socket kept, its connection count as _handed_off made it."""
    position = 0
    for trace in traces:
        data, sockets = opened(trace.data)
        if data is not trace.data:
            trace = Trace(trace.path, data)
        for socket in sockets:
            count = connections[position]
            if count is not None:
                yield position, (trace, socket if count == socket["connections"] else {**socket, "connections": count})
            position += 1


def _handed_off(identities: list[tuple[Trace, Identity]]) -> list[int | None]:
    """Per socket, its connection count less a fork parent's unused copies of connections its
    children served, or None for a socket that was only such copies.

    A prefork server accepts a connection, forks, and closes its copy unused (used: false); the
    child's copy (inherited: true) is the connection. A copy that kept its cookie is matched by it
    (_shared_connections); those folded into a group of several have none, and are taken out here,
    as many as the children's inherited connections no cookie matched.
    """
    # Processes are (host, pid): traces of several hosts may share pids.
    cookies_of: dict[tuple, set[int]] = {}
    for trace, identity in identities:
        cookies_of.setdefault(_process(trace), set()).add(identity.cookie or 0)
    unmatched: Counter[tuple] = Counter()
    for trace, identity in identities:
        parent = (trace.data.get("host"), trace.data["ppid"])
        if identity.inherited and not (identity.cookie and identity.cookie in cookies_of.get(parent, ())):
            unmatched[parent] += identity.connections
    result: list[int | None] = []
    for trace, identity in identities:
        pid = _process(trace)
        count = identity.connections
        if identity.used is False and not identity.inherited and not identity.cookie and unmatched[pid]:
            handed = min(unmatched[pid], count)
            unmatched[pid] -= handed
            if handed == count:
                result.append(None)
                continue
            count -= handed
        result.append(count)
    return result


def _process(trace: Trace) -> tuple:
    return (trace.data.get("host"), trace.data["pid"])


def _shared_connections(identities: list[tuple[Trace, Identity]], connections: list[int | None]) -> dict:
    """(host, cookie) -> positions of the sockets kept that are one connection (SO_COOKIE: one kernel
    socket), for those held by more than one entry.

    Their merged entry keeps the identity, options and tcp_info of the process that did the most
    with the connection (the child serving it, not the listener that accepted it); its counts are
    the sum of every process's.
    """
    # A cookie is unique within one host's boot: keyed by (host, cookie).
    by_cookie: dict[tuple, list[int]] = {}
    for position, (trace, identity) in enumerate(identities):
        cookie = identity.cookie
        if connections[position] is not None and isinstance(cookie, int) and cookie:
            by_cookie.setdefault((trace.data.get("host"), cookie), []).append(position)
    return {key: positions for key, positions in by_cookie.items() if len(positions) > 1}


def _activity(socket: dict) -> int:
    return socket["writes"]["calls"] + socket["reads"]["calls"]


def socket_item(
    trace: Trace, socket: dict, pids: list[int] | None = None, symbolizer: Symbolizer | None = None,
    figures: bool = True,
) -> dict:
    """The report's summary of one socket (or group) of a trace; `pids`: every process that held it;
    its call sites resolved with `symbolizer` (none without one). figures=False: its writes, bursts,
    turns, reads and errors are the trace socket's own (counts as in the trace, histograms where the
    figures have percentiles), for a caller that reads only counts; `item | socket_figures(socket)`
    is then the whole item."""
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
        **({"represents": trace.data["represents"]} if "represents" in trace.data else {}),
        "open": socket["open"],
        "role": socket["role"],
        "family": socket["family"],
        "local": socket["local"],
        "peer": socket["peer"],
        "service_port": socket.get("service_port"),
        "options_set": socket["options_set"],
        "options": socket["options"],
        **(socket_figures(socket) if figures else {section: socket[section] for section in FIGURE_SECTIONS}),
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
    deferred = deferred_errors(data["sockets"])
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
