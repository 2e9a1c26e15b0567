"""The report read one socket at a time: what `tcpadvise report` prints as text, JSON and HTML, and
what `export` and `diff` read.

build_report (model/report.py) holds every socket item and the trace socket
behind it; for a fleet's traces (tens of thousands of sockets, hundreds of MB)
that is gigabytes. stream_report reads the same entries (report_entries, from
traces loaded compact: trace/stream.py) one at a time and folds each into what
the report needs, then lets it go:

- its socket group (metrics.ScopeSum: counts, histograms, options, tcp_info of
  the group as one socket; the group's call sites; its bursts; whether Nagle was on);
- the rules judged on the item alone (advice.held_on_member: for each rule that held
  there, the first such item and the connections of all of them);
- the TABLE_ROWS busiest items, which text and the page show (and the total of all: the groups' sums added);
- for the page, per group its `sample` busiest items as a timeline draws them (SampledSocket: a
  few numbers each, a bounded heap per group);
- the caller's sink, given each item and its trace socket as they come (JSON writes the item,
  render.json.JsonReportWriter; export adds the socket into its metrics group).

Memory is then the groups' sums, the busiest items (and samples) and the traces' compact copies,
whatever the number of sockets. The findings, policy effects and figures are the
same as build_report's, advise's and policy_effects' on the same inputs.
"""

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ..policy.effect import nagle_on, policy_effect
from ..rules import SEVERITIES
from ..rules.advice import Held, held_on_member, judge
from ..symbols.symbolize import CallSitesSum, Symbolizer, merge_call_sites
from ..trace.reader import Inputs, Manifest, Trace
from .filters import Filters, at_least
from .metrics import SCOPE, MetricValues, Scope, ScopeSum, Subject, run_subject, scope_key
from .report import TABLE_ROWS, SegmentsPerWrite, report_entries, report_warnings, socket_item
from .sockets import SocketsSum, socket_figures


@dataclass
class StreamedReport:
    """What the text and JSON reports and the HTML page show, made by stream_report.

    socket_count: the socket items read (JSON had each from the sink); busiest: the TABLE_ROWS with
    the most calls, in report order; groups: per socket group, who it is, its call sites and bursts;
    samples: per socket group (as groups), its busiest items as SampledSocket, in report order
    (empty unless stream_report was asked for a sample).
    """

    traces: list[Trace]
    manifests: list[Manifest]
    socket_count: int
    busiest: list[dict]
    total_figures: dict | None
    groups: list[dict]
    subjects: list[Subject]
    segments_per_write: list[float | None]
    findings: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    policy_effects: list[dict] = field(default_factory=list)
    samples: list[list["SampledSocket"]] = field(default_factory=list)

    def total(self) -> dict | None:
        return self.total_figures

    def shown_sockets(self) -> list[dict]:
        return self.busiest

    def call_site_groups(self) -> list[dict]:
        return self.groups

    def group_segments_per_write(self) -> list[tuple]:
        return list(zip((subject for subject in self.subjects if isinstance(subject, Scope)), self.segments_per_write))


@dataclass(frozen=True)
class SampledSocket:
    """What a timeline draws of one socket item: its process (pid, the shim's start in it, the
    writing of its trace, whether that was at its exit) and the item (its local port, kind, whether
    it is open, its connections and their open time added up, duration_ns)."""

    pid: int
    process_start_ns: int
    process_written_ns: int
    process_final: bool
    local_port: int
    kind: str
    open: bool
    connections: int
    duration_ns: int

    @classmethod
    def of(cls, trace: Trace, item: dict, raw: dict) -> "SampledSocket":
        data = trace.data
        return cls(item["pid"], data["start_unix_ns"], data["written_unix_ns"], data["final"], item["local"]["port"],
                   raw["kind"], raw["open"], raw["connections"], raw.get("duration_ns", 0))


class _Group:
    """One socket group as its items come: their sum, call sites, bursts, Nagle, the rules held on
    each, and its busiest items sampled (a min-heap of (calls, -index, SampledSocket))."""

    def __init__(self):
        self.sum = ScopeSum()
        self.sites = CallSitesSum()
        self.bursts = 0
        self.nagle = False
        self.held: dict[str, Held] = {}
        self.segments = SegmentsPerWrite()
        self.sample: list[tuple[int, int, SampledSocket]] = []

    def add(self, item: dict, raw: dict, index: int) -> None:
        self.sum.add(item, raw, index)
        self.sites.add(item.get("call_sites", []))
        self.bursts += (item.get("bursts") or {}).get("count") or 0
        self.nagle = self.nagle or nagle_on(item)
        self.segments.add(item)


def stream_report(
    inputs: Inputs,
    filters: Filters,
    rulebook,
    calibration=None,
    min_severity: str | None = None,
    sink: Callable[[dict, dict], None] | None = None,
    with_total: bool = True,
    sample: int = 0,
) -> StreamedReport:
    """The report on the sockets of `inputs` that `filters` keeps, read one at a time; each socket
    item is given to sink (if any) in report order, with the trace socket behind it; findings of
    min_severity or more; with_total: the figures of all sockets together (text's last row; JSON
    has none) are summed too; sample: the busiest items kept per socket group (the page's timelines)."""
    judge_items = any(rule.subject == SCOPE for rule in rulebook.rules)
    symbolizer = Symbolizer()
    groups: dict[tuple, _Group] = {}
    busiest: list[tuple[int, int, dict]] = []  # a min-heap of (calls, -index, item)
    error_names: dict[str, None] = {}  # errno names in order of first appearance (text's total row)
    count = 0
    # Without a sink (text) an item's figures (its percentiles) are made only for the busiest it
    # keeps: the groups, the rules and the ranking read counts, which the trace socket has.
    whole_items = sink is not None
    for trace, socket, pids in report_entries(inputs.traces):
        item = socket_item(trace, socket, pids, symbolizer, figures=whole_items)
        if not filters.keeps(item):
            continue
        index, count = count, count + 1
        group = groups.get(key := scope_key(item))
        if group is None:
            group = groups[key] = _Group()
        group.add(item, socket, index)
        if judge_items:
            member = ScopeSum()
            member.add(item, socket, index)
            held_on_member(rulebook, MetricValues(member.scope()), group.held,
                           lambda: merge_call_sites([item.get("call_sites", [])]))
        if with_total:
            error_names.update(dict.fromkeys(socket["errors"]))
        calls = item["writes"]["calls"] + item["reads"]["calls"]
        _keep(busiest, TABLE_ROWS, calls, index, lambda: _whole(item, socket, whole_items))
        if sample:
            _keep(group.sample, sample, calls, index, lambda: SampledSocket.of(trace, item, socket))
        if sink is not None:
            sink(item, socket)
    scopes = [(group, group.sum.scope()) for group in groups.values()]
    runs = [run_subject(inputs.traces, manifest) for manifest in inputs.manifests]
    findings = []
    for group, scope in scopes:
        # A scope of one item: the item is the scope, judged once.
        held = group.held if len(scope.sockets) > 1 else {}
        findings.extend(judge(scope, held, rulebook, calibration, group.sites.result()))
    for run in runs:
        findings.extend(judge(run, {}, rulebook, calibration, []))
    findings.sort(key=lambda item: SEVERITIES.index(item["severity"]))
    merged = _total(scope for _, scope in scopes) if count and with_total else None
    if merged is not None:
        merged["errors"] = {name: merged["errors"][name] for name in error_names}
    return StreamedReport(
        traces=inputs.traces,
        manifests=inputs.manifests,
        socket_count=count,
        busiest=_in_order(busiest),
        total_figures={"connections": merged["connections"], **socket_figures(merged)} if merged else None,
        groups=[_group_sites(scope, group) for group, scope in scopes],
        subjects=[scope for _, scope in scopes] + runs,
        segments_per_write=[group.segments.result() for group, _ in scopes],
        findings=at_least(findings, min_severity, SEVERITIES) if min_severity else findings,
        warnings=[*inputs.warnings, *report_warnings(inputs)],
        policy_effects=[effect for group, scope in scopes if (effect := policy_effect(scope, group.nagle)) is not None],
        samples=[_in_order(group.sample) for group, _ in scopes] if sample else [],
    )


def _keep(heap: list[tuple], size: int, calls: int, index: int, make: Callable[[], object]) -> None:
    """The item `make` gives kept in the min-heap of the `size` busiest (most calls, the first of
    equals), made only if it is kept."""
    if len(heap) < size:
        heapq.heappush(heap, (calls, -index, make()))
    elif (calls, -index) > heap[0][:2]:
        heapq.heapreplace(heap, (calls, -index, make()))


def _in_order(heap: list[tuple]) -> list:
    """A heap's items in report order."""
    return [kept for _, _, kept in sorted(heap, key=lambda ranked: -ranked[1])]


def _whole(item: dict, socket: dict, whole: bool) -> dict:
    """The socket item with its figures (made by socket_item(figures=False) unless whole)."""
    return item if whole else item | socket_figures(socket)


def _total(scopes) -> dict:
    """Every socket together, as merge_sockets would make them: the groups' sums added (histograms
    and counts add up the same whichever way they are grouped; the errno table's order is the
    caller's)."""
    total = SocketsSum()
    for scope in scopes:
        total.add(scope.merged)
    return total.result()


def _group_sites(scope: Scope, group: _Group) -> dict:
    return {"program": scope.program, "role": scope.role, "local_port": scope.local_port, "peer": scope.peer,
            "peer_port": scope.peer_port, "call_sites": group.sites.result(), "bursts": group.bursts}
