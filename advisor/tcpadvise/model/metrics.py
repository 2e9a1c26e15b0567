"""What a rule can test: the subjects rules judge, and the one catalogue of metrics.

Subjects are of two kinds:

- scope: the sockets one policy rule would match (docs/policy-config.md): one
  program's sockets of one role and one service (a server's local port; a
  client's peer address and port). Every process of that program and every
  connection, open or grouped, folds into it: counts and tcp_info counters are
  added, histograms merged, rtt and rttvar averaged over the connections;
  an option is known only when every socket of the scope agrees on it.
- run: one `tcpadvise record` run (its record.json) with the traces written
  beside it during the run.

`METRICS` names every metric with its unit, its subject kind and a
description: `tcpadvise rules metrics` prints it, and a rule naming anything
else is refused when loaded. A metric that cannot be computed (no turns, no
tcp_info, sockets that disagree) has the value None, and a condition on it
never holds.
"""

import functools
import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..symbols.elfinfo import BinaryInfo, blind_spot
from ..trace.reader import Manifest
from ..trace.represents import TCP_INFO_COUNTERS
from ..units import ratio
from . import hist
from .report import Report
from .sockets import SocketsSum, is_stream

SCOPE, RUN = "scope", "run"

# tcp_info fields a scope adds up over its connections (those a sampled child's trace scales), and
# those it averages per connection.
_TCP_INFO_MEANS = ("rtt_us", "rttvar_us")
# The buffer options an application can fix, and the effective option each one sets.
_BUFFER_OPTIONS = (("SO_SNDBUF", "sndbuf"), ("SO_RCVBUF", "rcvbuf"))
# The kernel doubles a buffer size set with setsockopt (for its own bookkeeping).
_KERNEL_DOUBLES = 2
_KIB = 1024
# Bursts at most this many times the smallest are taken as one message size.
_SAME_SIZE = 1.25


@dataclass
class Scope:
    """Sockets of one program, role and service; `merged` is them as one trace socket."""

    program: str
    role: str
    local_port: int | None
    peer: str | None
    peer_port: int | None
    pids: list[int]
    sockets: list[int]
    merged: dict
    kind: str = field(default=SCOPE, init=False)


@dataclass
class Run:
    """A `tcpadvise record` run and how many sockets its traces hold."""

    manifest: Manifest
    traced_sockets: int
    kind: str = field(default=RUN, init=False)

    @property
    def binary(self) -> BinaryInfo:
        return BinaryInfo.of_manifest(self.manifest.data)

    @property
    def program(self) -> str:
        return Path(self.binary.path or self.manifest.data["command"][0]).name


Subject = Scope | Run


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    subject: str
    description: str
    compute: Callable[[Subject], object]


def subjects_of(report: Report) -> list[Subject]:
    """Every scope of the report's sockets (in order of first appearance), then every run; made once
    per report."""
    if report.subjects is None:
        indexes_by_key: dict[tuple, list[int]] = {}
        for index, item in enumerate(report.sockets):
            indexes_by_key.setdefault(scope_key(item), []).append(index)
        scopes = [_scope(report, indexes) for indexes in indexes_by_key.values()]
        report.subjects = [*scopes, *(run_subject(report.traces, manifest) for manifest in report.manifests)]
    return report.subjects


def run_subject(traces: list, manifest: Manifest) -> Run:
    """The subject of a record run: its manifest and the sockets of its traces."""
    # The run's traces are those beside its record.json (traces.load_inputs already left out older ones).
    directory = manifest.path.resolve().parent
    beside = [trace for trace in traces if trace.path.resolve().parent == directory]
    return Run(manifest, traced_sockets=sum(len(trace.data["sockets"]) for trace in beside))


def scope_key(item: dict) -> tuple:
    """The scope a socket item belongs to: its program, role and service, and whether it only sends."""
    # Streams (writes, no reply) and conversations on the same service are told apart: iperf3's
    # data connections are not its control connection, and a mean over both would be neither.
    pattern = "stream" if is_stream(item) else "exchange"
    if item["role"] == "server":
        return (item["program"], "server", item["local"]["port"], pattern)
    if item["role"] == "client":
        return (item["program"], "client", item["peer"]["addr"], item["peer"]["port"], pattern)
    return (item["program"], item["role"], item["local"]["port"], item["peer"]["addr"], item["peer"]["port"], pattern)


def _scope(report: Report, indexes: list[int]) -> Scope:
    total = ScopeSum()
    for index in indexes:
        total.add(report.sockets[index], report.raw_sockets[index], index)
    return total.scope()


class ScopeSum:
    """A scope made one socket item at a time (add: the item, the trace socket behind it, its index
    in the report); scope() is the Scope of every item added, as if made of them at once."""

    def __init__(self):
        self.first: dict | None = None
        self.indexes: list[int] = []
        self._pids: set[int] = set()
        self._figures = SocketsSum()
        self._options = _Agreed()
        self._options_set = _Agreed()
        self._tcp_info = _TcpInfoSum()
        self._durations: float | None = 0  # None once a socket has no duration_ns
        self._observed = 0.0
        self._stream = self._loopback = True

    def add(self, item: dict, raw: dict, index: int) -> None:
        if self.first is None:
            self.first = item
        self.indexes.append(index)
        self._pids.update(item["pids"])
        self._figures.add(raw)
        self._options.add(raw["options"])
        self._options_set.add(raw["options_set"])
        self._tcp_info.add(raw.get("tcp_info", {}))
        duration = raw.get("duration_ns")
        self._durations = None if duration is None or self._durations is None else self._durations + duration
        self._observed = max(self._observed, item["observed_s"] or 0)
        self._stream = self._stream and is_stream(raw)
        self._loopback = self._loopback and _loopback(item["peer"]["addr"])

    def scope(self) -> Scope:
        merged = self._figures.result()
        merged["options"] = self._options.result()
        merged["options_set"] = self._options_set.result()
        merged["tcp_info"] = self._tcp_info.result()
        # The connections' open time added up (the shim's duration_ns), or without it the longest
        # time a process of the scope was observed.
        merged["seconds"] = (self._durations / 1e9 or None) if self._durations is not None else (self._observed or None)
        merged["stream"] = self._stream
        merged["loopback"] = self._loopback
        first, role = self.first, self.first["role"]
        return Scope(
            program=first["program"],
            role=role,
            local_port=first["local"]["port"] if role != "client" else None,
            peer=first["peer"]["addr"] if role != "server" else None,
            peer_port=first["peer"]["port"] if role != "server" else None,
            pids=sorted(self._pids),
            sockets=self.indexes,
            merged=merged,
        )


def member_scopes(report: Report, scope: Scope) -> list[Scope]:
    """Each socket item of a scope as a scope of its own (none for a scope of one item).

    A rule is judged on these too, so that a connection's trouble is not averaged away by the others.
    """
    if len(scope.sockets) < 2:
        return []
    return [_scope(report, [index]) for index in scope.sockets]


@functools.lru_cache(maxsize=4096)
def _loopback(address: str) -> bool:
    """Whether a peer address is a loopback one; remembered (a report asks it of every socket, twice,
    and a fleet's sockets share a few peers: parsing each took 3 us)."""
    try:
        return ipaddress.ip_address(address.removeprefix("::ffff:")).is_loopback
    except ValueError:
        return False


class _Agreed:
    """The entries every table added has with the same value (in the first table's order)."""

    def __init__(self):
        self._agreed: dict | None = None

    def add(self, table: dict) -> None:
        if self._agreed is None:
            self._agreed = {key: value for key, value in table.items() if value is not None}
        elif self._agreed:
            self._agreed = {key: value for key, value in self._agreed.items() if table.get(key) == value}

    def result(self) -> dict:
        return dict(self._agreed or {})


class _TcpInfoSum:
    """The scope's tcp_info: counters added up, rtt and rttvar averaged weighted by samples, gauges
    (segment size, window, rate; they do not add up) from the best-sampled entry."""

    def __init__(self):
        self._any = False
        self._counters: dict[str, int] = {}
        self._means: dict[str, list] = {}
        self._representative: dict | None = None

    def add(self, info: dict) -> None:
        if not info:
            return
        self._any = True
        for key in TCP_INFO_COUNTERS:
            if key in info:
                self._counters[key] = self._counters.get(key, 0) + info[key]
        for key in _TCP_INFO_MEANS:
            if key in info:
                weight = info.get("samples", 1)
                total = self._means.setdefault(key, [0, 0])
                total[0] += info[key] * weight
                total[1] += weight
        if self._representative is None or info.get("samples", 1) > self._representative.get("samples", 1):
            self._representative = info

    def result(self) -> dict:
        if not self._any:
            return {}
        # Counters absent from every entry stay absent; one present in some counts 0 for the others.
        merged = {key: self._counters[key] for key in TCP_INFO_COUNTERS if key in self._counters}
        for key in _TCP_INFO_MEANS:
            if key in self._means:
                merged[key] = self._means[key][0] / self._means[key][1]
        for key in ("snd_mss", "snd_cwnd", "delivery_rate", "notsent_bytes", "outq_bytes"):
            if key in self._representative:
                merged[key] = self._representative[key]
        return merged


def _percentile(section: str, histogram: str, fraction: float) -> Callable[[Scope], float | None]:
    return lambda scope: hist.percentile(scope.merged[section][histogram], fraction)


def _tcp(name: str) -> Callable[[Scope], float | None]:
    return lambda scope: scope.merged["tcp_info"].get(name)


def _options(table: str, name: str) -> Callable[[Scope], object]:
    return lambda scope: scope.merged[table].get(name)


def _app_flag(option: str) -> Callable[[Scope], bool | None]:
    def compute(scope: Scope) -> bool | None:
        value = scope.merged["options_set"].get(option)
        return None if value is None else bool(value)

    return compute


def _bursts(scope: Scope) -> int:
    """Bursts, counting a stream's unfinished one: a connection that only sends and is still open when
    its trace is written has one burst that no read has ended yet."""
    count = scope.merged["bursts"]["count"]
    return count or (scope.merged["connections"] if scope.merged["stream"] else 0)


def _burst_mean_bytes(scope: Scope) -> float | None:
    # writes.bytes is exact, and bursts.count too until a socket samples its turns (then an estimate
    # from the recorded bursts, as the histograms' figures are).
    return ratio(scope.merged["writes"]["bytes"], _bursts(scope))


def _burst_segments(scope: Scope) -> int | None:
    mean, mss = _burst_mean_bytes(scope), scope.merged["tcp_info"].get("snd_mss")
    return None if mean is None or not mss else max(1, math.ceil(mean / mss))


def _last_segment_bytes(scope: Scope) -> float | None:
    segments = _burst_segments(scope)
    if segments is None:
        return None
    return _burst_mean_bytes(scope) - (segments - 1) * scope.merged["tcp_info"]["snd_mss"]


def _bursts_same_size(scope: Scope) -> bool | None:
    # From the histogram's min and max (exact in the shim's fine histograms, bucket bounds in older
    # traces), whatever its bucket encoding.
    sizes = scope.merged["bursts"]["bytes"]
    return sizes["max"] <= sizes["min"] * _SAME_SIZE if sizes["count"] else None


def _bytes_per_sndbuf(scope: Scope) -> float | None:
    median = hist.percentile(scope.merged["bursts"]["bytes"], 0.5)
    if median is None and scope.merged["stream"]:
        median = _burst_mean_bytes(scope)  # the unfinished bursts of streams, which no histogram holds yet
    return ratio(median, scope.merged["options"].get("sndbuf"))


def _fixed_buffer_bytes(scope: Scope) -> int | None:
    """Effective size of the buffers the application fixed (autotuning stops for those), per connection."""
    fixed = [
        scope.merged["options"].get(effective)
        for option, effective in _BUFFER_OPTIONS
        if option in scope.merged["options_set"]
    ]
    return None if None in fixed else sum(fixed)


def _fixed_buffer_count(scope: Scope) -> int:
    return sum(option in scope.merged["options_set"] for option, _ in _BUFFER_OPTIONS)


def _per_second(count: Callable[[Scope], float | None]) -> Callable[[Scope], float | None]:
    return lambda scope: ratio(count(scope), scope.merged["seconds"])


def _eagain(scope: Scope) -> int | None:
    """Writes refused with EAGAIN: the shim's own count (writes.eagain), else, for a stream, which reads
    nothing, the socket's EAGAIN failures; None when the failures cannot be told to be writes'."""
    writes = scope.merged["writes"]
    if "eagain" in writes:
        return writes["eagain"]
    if not scope.merged["stream"]:
        return None
    return scope.merged["errors"].get("EAGAIN", 0) + scope.merged["errors"].get("EWOULDBLOCK", 0)


def _partial(scope: Scope) -> int | None:
    return scope.merged["writes"].get("partial")


def _blocked_us(scope: Scope) -> float | None:
    """Time inside write calls: the shim's estimate if it gives one, else the sampled mean times the writes."""
    writes = scope.merged["writes"]
    if "syscall_ns_total_est" in writes:
        return writes["syscall_ns_total_est"] / 1000
    mean_ns = hist.mean(writes["syscall_ns"]) if "syscall_ns" in writes else None
    return None if mean_ns is None else mean_ns * writes["size"]["count"] / 1000


def _scaled(per_connection: Callable[[Scope], float | None]) -> Callable[[Scope], float | None]:
    def compute(scope: Scope) -> float | None:
        value = per_connection(scope)
        return None if value is None else value * scope.merged["connections"]

    return compute


def _catalogue(*metrics: Metric) -> dict[str, Metric]:
    return {metric.name: metric for metric in metrics}


METRICS = _catalogue(
    # The scope itself.
    Metric("role", "text", SCOPE, "client, server or unknown.", lambda scope: scope.role),
    Metric(
        "connections",
        "count",
        SCOPE,
        "Connections in the scope, open and closed.",
        lambda scope: scope.merged["connections"],
    ),
    # Options as the kernel had them, and as the application set them.
    Metric(
        "options.nodelay",
        "bool",
        SCOPE,
        "TCP_NODELAY as the kernel had it (Nagle off when true).",
        _options("options", "nodelay"),
    ),
    Metric("options.cork", "bool", SCOPE, "TCP_CORK as the kernel had it.", _options("options", "cork")),
    Metric(
        "options.sndbuf",
        "bytes",
        SCOPE,
        "Send buffer as the kernel had it: twice what the application set, else autotuned.",
        _options("options", "sndbuf"),
    ),
    Metric(
        "options.rcvbuf",
        "bytes",
        SCOPE,
        "Receive buffer as the kernel had it.",
        _options("options", "rcvbuf"),
    ),
    Metric(
        "app.nodelay",
        "bool",
        SCOPE,
        "TCP_NODELAY as the application set it; None if it never did.",
        _app_flag("TCP_NODELAY"),
    ),
    Metric(
        "app.cork",
        "bool",
        SCOPE,
        "TCP_CORK as the application last set it; None if it never did.",
        _app_flag("TCP_CORK"),
    ),
    Metric(
        "app.sndbuf",
        "bytes",
        SCOPE,
        "SO_SNDBUF as the application set it (before the kernel doubles it).",
        _options("options_set", "SO_SNDBUF"),
    ),
    Metric(
        "app.rcvbuf",
        "bytes",
        SCOPE,
        "SO_RCVBUF as the application set it.",
        _options("options_set", "SO_RCVBUF"),
    ),
    # Writes.
    Metric(
        "writes.calls",
        "count",
        SCOPE,
        "Write calls of every API, failed ones included.",
        lambda scope: scope.merged["writes"]["calls"],
    ),
    Metric("writes.bytes", "bytes", SCOPE, "Bytes written.", lambda scope: scope.merged["writes"]["bytes"]),
    Metric(
        "writes.size_p25",
        "bytes",
        SCOPE,
        "Write size a quarter of the writes stay under.",
        _percentile("writes", "size", 0.25),
    ),
    Metric("writes.size_p50", "bytes", SCOPE, "Median write size.", _percentile("writes", "size", 0.5)),
    Metric(
        "writes.size_p75",
        "bytes",
        SCOPE,
        "Write size three writes in four stay under.",
        _percentile("writes", "size", 0.75),
    ),
    Metric(
        "writes.size_p99",
        "bytes",
        SCOPE,
        "99th percentile of the write size.",
        _percentile("writes", "size", 0.99),
    ),
    # Streams: connections that only send, judged by their writes rather than by bursts and turns.
    Metric(
        "stream",
        "bool",
        SCOPE,
        "Whether the connections only send: bytes written and none read (a bulk sender such as iperf3's "
        "data connection); its writes make one burst, unfinished while the connection is open.",
        lambda scope: scope.merged["stream"],
    ),
    Metric(
        "observed_s",
        "seconds",
        SCOPE,
        "Seconds the connections were open, added up (the shim's duration_ns); from traces without it, the "
        "longest time a process of the scope was observed (its shim's start to its trace).",
        lambda scope: scope.merged["seconds"],
    ),
    Metric(
        "writes.per_second",
        "count",
        SCOPE,
        "Write calls per second of connection time (writes.calls / observed_s).",
        _per_second(lambda scope: scope.merged["writes"]["calls"]),
    ),
    Metric(
        "writes.bytes_per_second",
        "bytes_per_s",
        SCOPE,
        "Bytes written per second of connection time.",
        _per_second(lambda scope: scope.merged["writes"]["bytes"]),
    ),
    Metric(
        "tcp.segs_per_second",
        "count",
        SCOPE,
        "Data segments sent per second of connection time.",
        _per_second(lambda scope: scope.merged["tcp_info"].get("data_segs_out")),
    ),
    Metric(
        "writes.eagain",
        "count",
        SCOPE,
        "Writes refused with EAGAIN (a non-blocking socket's full send buffer); None when the shim's "
        "failures cannot be told to be writes'.",
        _eagain,
    ),
    Metric(
        "writes.eagain_share",
        "fraction",
        SCOPE,
        "writes.eagain over writes.calls.",
        lambda scope: ratio(_eagain(scope), scope.merged["writes"]["calls"]),
    ),
    Metric(
        "writes.partial",
        "count",
        SCOPE,
        "Writes that took fewer bytes than offered (the send buffer filled up); None if the shim does not "
        "count them.",
        _partial,
    ),
    Metric(
        "writes.partial_share",
        "fraction",
        SCOPE,
        "writes.partial over writes.calls.",
        lambda scope: ratio(_partial(scope), scope.merged["writes"]["calls"]),
    ),
    Metric(
        "writes.blocked_us",
        "us",
        SCOPE,
        "Time spent inside write calls, waiting for room in the send buffer when a blocking write blocks.",
        _blocked_us,
    ),
    Metric(
        "writes.blocked_share",
        "fraction",
        SCOPE,
        "writes.blocked_us over observed_s: the share of the time the program sat in write.",
        lambda scope: ratio(_blocked_us(scope), None if not scope.merged["seconds"] else scope.merged["seconds"] * 1e6),
    ),
    Metric(
        "tcp.outq_bytes",
        "bytes",
        SCOPE,
        "Bytes in the send queue (SIOCOUTQ: unacknowledged or not yet sent) at close or at the snapshot, "
        "of the best-sampled connection; None if the shim did not read it.",
        _tcp("outq_bytes"),
    ),
    Metric(
        "tcp.outq_share",
        "fraction",
        SCOPE,
        "tcp.outq_bytes over options.sndbuf: near 1, the send buffer was full.",
        lambda scope: ratio(_tcp("outq_bytes")(scope), scope.merged["options"].get("sndbuf")),
    ),
    Metric(
        "peer.loopback",
        "bool",
        SCOPE,
        "Whether every peer is a loopback address (round trips of microseconds, no path to judge).",
        lambda scope: scope.merged["loopback"],
    ),
    # Bursts: the writes between two reads, one message of a conversation.
    Metric(
        "bursts.count",
        "count",
        SCOPE,
        "Bursts (runs of writes between two reads).",
        lambda scope: scope.merged["bursts"]["count"],
    ),
    Metric(
        "bursts.writes_p50", "count", SCOPE, "Median writes per burst.", _percentile("bursts", "writes", 0.5)
    ),
    Metric(
        "bursts.writes_p99",
        "count",
        SCOPE,
        "99th percentile of writes per burst.",
        _percentile("bursts", "writes", 0.99),
    ),
    Metric(
        "bursts.bytes_p50", "bytes", SCOPE, "Median bytes per burst.", _percentile("bursts", "bytes", 0.5)
    ),
    Metric(
        "bursts.mean_bytes",
        "bytes",
        SCOPE,
        "Bytes written per burst (writes.bytes / bursts.count, a stream's unfinished burst counted; exact "
        "until a socket samples its turns, then bursts.count is estimated): the message size when they are alike.",
        _burst_mean_bytes,
    ),
    Metric(
        "bursts.same_size",
        "bool",
        SCOPE,
        "Whether every burst is within a quarter of the smallest (the largest at most 1.25 times it).",
        _bursts_same_size,
    ),
    Metric(
        "bursts.segments",
        "count",
        SCOPE,
        "Segments of tcp.snd_mss a burst of bursts.mean_bytes needs.",
        _burst_segments,
    ),
    Metric(
        "bursts.last_segment_bytes",
        "bytes",
        SCOPE,
        "Bytes in the last segment of such a burst (tcp.snd_mss when it ends on a segment boundary).",
        _last_segment_bytes,
    ),
    Metric(
        "bursts.last_segment_share",
        "fraction",
        SCOPE,
        "bursts.last_segment_bytes as a share of tcp.snd_mss.",
        lambda scope: ratio(_last_segment_bytes(scope), scope.merged["tcp_info"].get("snd_mss")),
    ),
    Metric(
        "bursts.bytes_per_sndbuf",
        "ratio",
        SCOPE,
        "Median burst size over the send buffer (options.sndbuf): above 1, a burst cannot fit. A stream's "
        "unfinished burst counts with the bytes written so far.",
        _bytes_per_sndbuf,
    ),
    # Turns: from the first write after a reply to the first read that brings data back.
    Metric("turns.count", "count", SCOPE, "Turns closed, exactly (sampled sockets' too).",
           lambda scope: scope.merged["turns"]["count"]),
    Metric(
        "turns.p50_us",
        "us",
        SCOPE,
        "Median turn time.",
        lambda scope: ratio(hist.percentile(scope.merged["turns"]["ns"], 0.5), 1000),
    ),
    Metric(
        "turns.p99_us",
        "us",
        SCOPE,
        "99th percentile of the turn time.",
        lambda scope: ratio(hist.percentile(scope.merged["turns"]["ns"], 0.99), 1000),
    ),
    # Reads.
    Metric("reads.calls", "count", SCOPE, "Read calls.", lambda scope: scope.merged["reads"]["calls"]),
    Metric("reads.bytes", "bytes", SCOPE, "Bytes read.", lambda scope: scope.merged["reads"]["bytes"]),
    # The kernel's tcp_info at close or at the last snapshot.
    Metric("tcp.rtt_us", "us", SCOPE, "Smoothed round-trip time (mean over connections).", _tcp("rtt_us")),
    Metric(
        "tcp.rttvar_us", "us", SCOPE, "Round-trip time variation (mean over connections).", _tcp("rttvar_us")
    ),
    Metric(
        "tcp.rttvar_ratio",
        "ratio",
        SCOPE,
        "tcp.rttvar_us over tcp.rtt_us.",
        lambda scope: ratio(_tcp("rttvar_us")(scope), _tcp("rtt_us")(scope)),
    ),
    Metric(
        "tcp.snd_mss",
        "bytes",
        SCOPE,
        "Payload bytes of a full segment (of the best-sampled connection).",
        _tcp("snd_mss"),
    ),
    Metric("tcp.data_segs_out", "count", SCOPE, "Segments sent with data.", _tcp("data_segs_out")),
    Metric(
        "tcp.segs_per_write",
        "ratio",
        SCOPE,
        "Data segments sent per write call: near 1 when every write leaves as its own segment.",
        lambda scope: ratio(_tcp("data_segs_out")(scope), scope.merged["writes"]["calls"]),
    ),
    Metric("tcp.total_retrans", "count", SCOPE, "Segments retransmitted.", _tcp("total_retrans")),
    Metric(
        "tcp.retrans_share",
        "fraction",
        SCOPE,
        "tcp.total_retrans over tcp.data_segs_out.",
        lambda scope: ratio(_tcp("total_retrans")(scope), _tcp("data_segs_out")(scope)),
    ),
    Metric(
        "tcp.busy_time_us",
        "us",
        SCOPE,
        "Time the connection had data in flight or queued.",
        _tcp("busy_time_us"),
    ),
    Metric(
        "tcp.sndbuf_limited_share",
        "fraction",
        SCOPE,
        "Share of busy time stalled by a full send buffer.",
        lambda scope: ratio(_tcp("sndbuf_limited_us")(scope), _tcp("busy_time_us")(scope)),
    ),
    Metric(
        "tcp.rwnd_limited_share",
        "fraction",
        SCOPE,
        "Share of busy time stalled by the peer's receive window.",
        lambda scope: ratio(_tcp("rwnd_limited_us")(scope), _tcp("busy_time_us")(scope)),
    ),
    # Memory of socket buffers.
    Metric(
        "buffers.fixed_bytes",
        "bytes",
        SCOPE,
        "Per connection, the kernel's size of the buffers the application fixed with SO_SNDBUF/SO_RCVBUF "
        "(autotuning no longer shrinks or grows those); 0 when it fixed none.",
        _fixed_buffer_bytes,
    ),
    Metric(
        "buffers.fixed_total",
        "bytes",
        SCOPE,
        "buffers.fixed_bytes times connections.",
        _scaled(_fixed_buffer_bytes),
    ),
    Metric(
        "buffers.total_at_64kib",
        "bytes",
        SCOPE,
        "What the same fixed buffers would take at 64 KiB each (128 KiB in the kernel), for all connections.",
        _scaled(lambda scope: _fixed_buffer_count(scope) * 64 * _KIB * _KERNEL_DOUBLES),
    ),
    Metric(
        "buffers.sndbuf_total_at_256kib",
        "bytes",
        SCOPE,
        "What a 256 KiB SO_SNDBUF (512 KiB in the kernel) would take for all connections.",
        _scaled(lambda scope: 256 * _KIB * _KERNEL_DOUBLES),
    ),
    # A record run.
    Metric("run.program", "text", RUN, "Name of the binary the run executed.", lambda run: run.program),
    Metric(
        "run.exit_status",
        "count",
        RUN,
        "Exit status of the command (128+N: killed by signal N).",
        lambda run: run.manifest.data["exit_status"],
    ),
    Metric(
        "run.static", "bool", RUN, "Whether the binary is statically linked.", lambda run: run.binary.static
    ),
    Metric("run.go", "bool", RUN, "Whether the binary is a Go program.", lambda run: run.binary.go),
    Metric(
        "run.blind_spot",
        "text",
        RUN,
        "Why LD_PRELOAD cannot see the binary; None when it can.",
        lambda run: blind_spot(run.binary),
    ),
    Metric(
        "run.traced_sockets",
        "count",
        RUN,
        "TCP sockets in the traces written during the run.",
        lambda run: run.traced_sockets,
    ),
)


class MetricValues:
    """The metrics of one subject, each computed once, when first asked for."""

    def __init__(self, subject: Subject):
        self.subject = subject
        self._values: dict[str, object] = {}

    def __getitem__(self, name: str):
        if name not in self._values:
            self._values[name] = METRICS[name].compute(self.subject)
        return self._values[name]
