"""Traces as Prometheus metrics: a prometheus_client Collector over loaded traces.

Every family carries the labels LABELS. A socket group is one host's sockets
of one program, role and service (a server's local port; a client's peer
address and port, its ephemeral local port left out) under one policy and
arm; its counters add up its sockets', its histograms merge theirs. An
experiment's arms also get their own families from the trace's experiment
block (what `ab report` reads): connections, calls, errors and turn time.

Histograms: the shim's log-linear buckets become cumulative `le` buckets on
one fixed grid (LE_PER_OCTAVE per power of two). A source bucket is counted
at the first `le` at or above the largest value it can hold (its upper edge;
one less for whole units; never above the histogram's exact max), so a
cumulative count never claims a value is at or below an `le` it may exceed;
a source bucket straddling an `le` is counted one step up, an error of at
most one grid step. Values the shim counted without a bucket are only in
+Inf, _count and _sum.
"""

import math

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.utils import floatToGoString

from ..model import hist
from ..model.filters import Filters
from ..model.sockets import SocketsSum
from ..model.streaming import stream_report
from ..rules.rulebook import Rulebook
from ..trace.hosts import split_by_host
from ..trace.reader import Inputs

LABELS = ("host", "program", "role", "port", "peer", "policy", "experiment", "arm")
LE_PER_OCTAVE = 4
# The grid's range: 2^-30 s (about 1 ns) to 2^40 (bytes, writes).
_GRID = sorted({2.0**octave * (1 + step / LE_PER_OCTAVE) for octave in range(-30, 41) for step in range(LE_PER_OCTAVE)})
def cumulative_buckets(histogram: dict, to_unit: float = 1.0, whole: bool = False) -> list[tuple[str, float]]:
    """The histogram's buckets as cumulative (le, count) pairs ending with +Inf, values times `to_unit`.

    whole: the recorded values are whole numbers, so a bucket [lo, hi) holds at most hi - 1.
    """
    tops = []
    for low, high, count in hist.ranges(histogram):
        if not count:
            continue
        top = high - 1 if whole and isinstance(high, int) and high - 1 >= low else high
        tops.append((min(top, histogram["max"]) * to_unit, count))
    result = []
    if tops:
        tops.sort()
        first = max(0, _grid_index(tops[0][0]) - 1)
        last = _grid_index(tops[-1][0])
        cumulative, position = 0, 0
        for le in _GRID[first : last + 1]:
            while position < len(tops) and tops[position][0] <= le:
                cumulative += tops[position][1]
                position += 1
            result.append((floatToGoString(le), cumulative))
    result.append(("+Inf", histogram["count"]))
    return result


def _grid_index(value: float) -> int:
    """Index of the first grid `le` at or above value (the last one if none is)."""
    low, high = 0, len(_GRID) - 1
    while low < high:
        middle = (low + high) // 2
        if _GRID[middle] >= value:
            high = middle
        else:
            low = middle + 1
    return low


def _policy_name(socket: dict) -> str:
    """What the policy did to the socket: its settings' names joined by '+', "observe" for none."""
    settings = socket.get("policy", {}).get("settings", {})
    active = [name for name, value in settings.items() if value not in (False, None, 0)]
    return "+".join(sorted(active)) or "observe"


def _arm_of(trace, socket: dict) -> tuple[str, str]:
    """(experiment, arm) of a socket that drew an arm, else empty strings.

    The shim names an arm's policy rule "experiment/arm"."""
    block = trace.data.get("experiment") if trace is not None else None
    rule = socket.get("policy", {}).get("rule", "")
    if block:
        for arm in block["arms"]:
            if rule == f"{block['name']}/{arm['name']}":
                return block["name"], arm["name"]
    return "", ""


def _service(item: dict) -> tuple[str, str]:
    """(port, peer) labels: a server's local port; a client's peer address:port; both when unknown."""
    local = str(item["local"]["port"]) if item["role"] != "client" else ""
    peer = f"{item['peer']['addr']}:{item['peer']['port']}" if item["role"] != "server" else ""
    return local, peer


class TraceCollector:
    """A prometheus_client collector of the metrics of loaded traces (register it, or call collect)."""

    def __init__(self, inputs: Inputs, rulebook: Rulebook | None = None):
        self.inputs = inputs
        self.rulebook = rulebook

    def collect(self):
        families = _Families()
        families.traces.add_metric([], len(self.inputs.traces))
        rulebook = self.rulebook if self.rulebook is not None else Rulebook(rules=[])
        for host, part in split_by_host(self.inputs).items():
            trace_of_pid = {trace.data["pid"]: trace for trace in part.traces}
            groups: dict[tuple, _GroupSum] = {}

            def add(item: dict, raw: dict, host=host, trace_of_pid=trace_of_pid, groups=groups) -> None:
                experiment, arm = _arm_of(trace_of_pid.get(item["pid"]), raw)
                key = (host, item["program"], item["role"], *_service(item), _policy_name(raw), experiment, arm)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = _GroupSum()
                group.add(raw)

            # Read one socket at a time (model/streaming.py), each added into its group as it comes.
            report = stream_report(part, Filters(), rulebook, sink=add, with_total=False)
            for labels, group in groups.items():
                families.add_group(list(labels), group.sockets.result(), group.causes)
            for trace in part.traces:
                if trace.data.get("experiment"):
                    families.add_arms(host, trace)
            for finding in report.findings:
                families.add_finding(host, finding)
        yield from families.all()


class _GroupSum:
    """A metrics group's sockets added up as they come: their figures and their policy's flushes by cause."""

    def __init__(self):
        self.sockets = SocketsSum()
        self.causes: dict[str, int] = {}

    def add(self, socket: dict) -> None:
        self.sockets.add(socket)
        for cause, count in socket.get("policy", {}).get("counters", {}).get("flushes", {}).items():
            self.causes[cause] = self.causes.get(cause, 0) + count


class _Families:
    def __init__(self):
        labels = list(LABELS)
        self.traces = GaugeMetricFamily("tcpadvise_traces", "Traces read (one per process).")
        self.connections = CounterMetricFamily("tcpadvise_connections", "Connections, open and closed.", labels=labels)
        self.writes = CounterMetricFamily("tcpadvise_writes", "Write calls.", labels=labels)
        self.write_bytes = CounterMetricFamily("tcpadvise_written_bytes", "Bytes written.", labels=labels)
        self.reads = CounterMetricFamily("tcpadvise_reads", "Read calls.", labels=labels)
        self.read_bytes = CounterMetricFamily("tcpadvise_read_bytes", "Bytes read.", labels=labels)
        self.turns = CounterMetricFamily(
            "tcpadvise_turns", "Turns: a request's first write to the first byte of its reply.", labels=labels
        )
        self.errors = CounterMetricFamily("tcpadvise_errors", "Failed calls by errno.", labels=[*labels, "errno"])
        self.releases = CounterMetricFamily(
            "tcpadvise_policy_releases",
            "Times a policy released what it held (coalesce flushes, cork uncorks) by cause.",
            labels=[*labels, "cause"],
        )
        self.write_size = HistogramMetricFamily("tcpadvise_write_size_bytes", "Bytes per write call.", labels=labels)
        self.burst_writes = HistogramMetricFamily(
            "tcpadvise_burst_writes", "Write calls per burst (the writes between two reads).", labels=labels
        )
        self.turn_seconds = HistogramMetricFamily(
            "tcpadvise_turn_seconds", "Turn time as the application sees it.", labels=labels
        )
        self.arm_connections = CounterMetricFamily(
            "tcpadvise_arm_connections", "An experiment arm's connections, closed and live.", labels=labels
        )
        self.arm_calls = CounterMetricFamily("tcpadvise_arm_calls", "An experiment arm's calls.", labels=labels)
        self.arm_errors = CounterMetricFamily(
            "tcpadvise_arm_errors", "An experiment arm's failed calls (EAGAIN, EINTR excepted).", labels=labels
        )
        self.arm_turn_seconds = HistogramMetricFamily(
            "tcpadvise_arm_turn_seconds",
            "Turn times of an experiment arm's connections (what 'ab report' compares).",
            labels=labels,
        )
        self.findings = InfoMetricFamily(
            "tcpadvise_finding", "A finding of the rulebook on a socket group (or a run).", labels=labels
        )

    def add_group(self, labels: list[str], merged: dict, causes: dict[str, int]) -> None:
        """A group's metrics: merged, its sockets as merge_sockets adds them; causes, its policy's flushes."""
        self.connections.add_metric(labels, merged["connections"])
        self.writes.add_metric(labels, merged["writes"]["calls"])
        self.write_bytes.add_metric(labels, merged["writes"]["bytes"])
        self.reads.add_metric(labels, merged["reads"]["calls"])
        self.read_bytes.add_metric(labels, merged["reads"]["bytes"])
        self.turns.add_metric(labels, merged["turns"]["count"])
        for errno, count in sorted(merged["errors"].items()):
            self.errors.add_metric([*labels, errno], count)
        for cause, count in sorted(causes.items()):
            self.releases.add_metric([*labels, cause], count)
        _add_histogram(self.write_size, labels, merged["writes"]["size"], whole=True)
        _add_histogram(self.burst_writes, labels, merged["bursts"]["writes"], whole=True)
        _add_histogram(self.turn_seconds, labels, merged["turns"]["ns"], to_unit=1e-9)

    def add_arms(self, host: str, trace) -> None:
        block = trace.data["experiment"]
        for arm in block["arms"]:
            labels = [host, trace.data["program"], "", "", "", "", block["name"], arm["name"]]
            self.arm_connections.add_metric(labels, arm["connections"])
            self.arm_calls.add_metric(labels, arm["calls"])
            self.arm_errors.add_metric(labels, arm["errors"])
            buckets = arm["turn_ns"]
            count = sum(bucket[2] for bucket in buckets)
            histogram = {
                "unit": "ns",
                "count": count,
                # The trace keeps no exact sum per arm: bucket midpoints, within a bucket's width.
                "sum": sum(count * (low + high) / 2 for low, high, count in buckets),
                "max": max((high for _, high, _ in buckets), default=0),
                "buckets": buckets,
            }
            _add_histogram(self.arm_turn_seconds, labels, histogram, to_unit=1e-9)

    def add_finding(self, host: str, finding: dict) -> None:
        scope = finding["scope"]
        role = scope.get("role") or ""
        port = "" if scope.get("local_port") is None else str(scope["local_port"])
        peer = f"{scope['peer']}:{scope['peer_port']}" if scope.get("peer") else ""
        labels = [host, scope.get("program") or "", role, port, peer, "", "", ""]
        self.findings.add_metric(labels, {"rule": finding["rule"], "severity": finding["severity"]})

    def all(self):
        return [family for family in vars(self).values() if family.samples or family is self.traces]


def _add_histogram(family, labels, histogram: dict, to_unit: float = 1.0, whole: bool = False) -> None:
    if histogram["count"] == 0:
        return
    total = histogram["sum"] * to_unit
    family.add_metric(labels, cumulative_buckets(histogram, to_unit, whole), total if math.isfinite(total) else 0)


OPENMETRICS, PROMETHEUS = "openmetrics", "prometheus"


def render(inputs: Inputs, rulebook: Rulebook | None = None, text_format: str = OPENMETRICS) -> bytes:
    """The metrics of `inputs` as OpenMetrics text, or as Prometheus's text format 0.0.4 (what
    node_exporter's textfile collector and promtool read)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    registry = CollectorRegistry(auto_describe=False)
    registry.register(TraceCollector(inputs, rulebook))
    return (generate_openmetrics if text_format == OPENMETRICS else generate_latest)(registry)
