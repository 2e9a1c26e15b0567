"""The suites of `tcpadvise bench`, one per seed experiment: the arms each runs
with tcpadvise-loadgen, what it makes of their JSON documents, and the
calibration measurements it yields (schemas/calibration-1.schema.json).

Round trips are in microseconds, throughput in Mbit/s; every figure is a
bench_stats.Summary (as a dict) pooling the arm's runs.
"""

import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Protocol

from ..model import hist
from .cgroup import Hierarchy, cpu_accounting, remove_stale
from .servers import SERVERS, Server, ServerArm, placement
from .stats import after_warmup, interval_rates_mbit_s, segment_penalties, summarize, verdict

# The round trip a stalled arm is allowed per planned round: 200 rounds stop
# after 0.4 s, so a 40 ms delayed-ACK stall yields about ten.
_BUDGET_MS_PER_ROUND = 2
# The first rounds on a new connection are slower (cold caches, the far end's
# buffers growing): discarded before the first point's own warm-up.
_CONNECTION_WARMUP = 4


@dataclass(frozen=True)
class Settings:
    """How much to measure: the suites, runs per arm, round trips per point, seconds per stream."""

    # The seeds' suites; a factory because SEED_SUITES comes from the suites, defined below.
    suites: tuple[str, ...] = field(default_factory=lambda: SEED_SUITES)
    runs: int = 3
    rounds: int = 200
    seconds: float | None = None
    # The servers suite's cases to run (--case NAME[=RUNS]), each with its own runs or None (`runs`); empty:
    # every case.
    cases: tuple[tuple[str, int | None], ...] = ()
    # Where each server and its load client run (servers.PINS).
    pin: str = "none"

    def chosen(self, case: str) -> bool:
        return not self.cases or any(name == case for name, _ in self.cases)

    def runs_of(self, case: str) -> int:
        return next((runs for name, runs in self.cases if name == case and runs), self.runs)

    @property
    def warmup(self) -> int:
        return max(2, self.rounds // 50)

    @property
    def budget_ms(self) -> int:
        return self.rounds * _BUDGET_MS_PER_ROUND

    def stream_seconds(self, rate_bit_s: float | None) -> float:
        """--seconds, else long enough for a few hundred segments on the path's rate."""
        if self.seconds:
            return self.seconds
        if rate_bit_s is None or rate_bit_s >= 1e8:
            return 0.3
        return 1.0 if rate_bit_s >= 1e7 else 2.0

    def as_dict(self) -> dict:
        return {
            **asdict(self),
            "suites": list(self.suites),
            "cases": {name: self.runs_of(name) for name, _ in self.cases},
            "warmup": self.warmup,
            "budget_ms": self.budget_ms,
        }


@dataclass(frozen=True)
class Arm:
    """One way of running the load generator: `tcpadvise-loadgen MODE --target T ARGS...`,
    under the shim when `policy` is set (a built-in policy's name or a policy's settings),
    on the far end's CPU when `pinned` (round trips; a stream wants a CPU of its own)."""

    key: str
    mode: str
    args: tuple[str, ...]
    policy: str | dict | None = None
    timeout_seconds: float = 600
    pinned: bool = True
    # How many times it runs; None: Settings.runs.
    runs: int | None = None


class Suite(Protocol):
    name: str
    seed: str | None
    title: str

    def left_out(self, path, settings: Settings) -> list[str]: ...

    def tidy(self, path) -> list[str]:
        """Clean up what an earlier bench, killed, left behind before this one runs; a line each for the user."""
        ...

    def arms(self, settings: Settings, path) -> list[Arm | ServerArm]: ...

    def analyze(self, documents: dict[str, list[dict]], settings: Settings, path) -> dict: ...

    def calibration(self, result: dict) -> dict[str, dict[str, float]]: ...


class LoadgenSuite:
    """A suite of tcpadvise-loadgen arms only: the load generator runs on every path."""

    def left_out(self, path, settings) -> list[str]:
        return []

    def tidy(self, path) -> list[str]:
        return []


def round_trip_arm(
    key: str, mode: str, settings: Settings, points: int, *args: str, policy: str | dict | None = None
) -> Arm:
    """An arm of round trips over `points` request shapes, with the settings' rounds, warm-up and budget."""
    timing = (
        "--rounds",
        str(settings.rounds),
        "--warmup",
        str(settings.warmup),
        "--connection-warmup",
        str(_CONNECTION_WARMUP),
        "--budget-ms",
        str(settings.budget_ms),
    )
    # Generous: a stalled point costs its budget plus its warm-up rounds at up to a second each.
    timeout = 60 + points * (settings.budget_ms / 1000 + settings.warmup + _CONNECTION_WARMUP)
    return Arm(key, mode, (*args, *timing), policy, timeout)


def point_summary(runs: Sequence[dict]) -> dict:
    """The same point of every run: round trip (us) after warm-up, segments and retransmissions per round."""
    measured = [after_warmup(point["round_ns"], point["warmup"]) for point in runs]
    rounds = sum(len(samples) for samples in measured)
    summary = summarize(measured)
    return {
        "request_bytes": runs[0]["request_bytes"],
        "writes": runs[0]["writes"],
        "mss": runs[0]["mss"],
        "round_trip_us": summary.scaled(1e-3).as_dict() if summary else None,
        "segments_per_round": sum(point["data_segs_out"] for point in runs) / rounds if rounds else None,
        "retransmissions": sum(point["total_retrans"] for point in runs),
    }


def median_us(point: dict) -> float:
    return point["round_trip_us"]["median"]


class Pingpong(LoadgenSuite):
    """Seed 000: N bytes ending a message, a 1-byte answer, N from 1 to 9901 in steps of 100,
    then exactly one segment, one byte more, and one byte over three segments."""

    name, seed, title = "pingpong", "000", "ping-pong by message size"
    sweep = tuple(range(1, 9902, 100))
    boundaries = ("mss", "mss+1", "3*mss+1")

    def labels(self) -> list[str]:
        return [*map(str, self.sweep), *self.boundaries]

    def arms(self, settings, path):
        labels = self.labels()
        return [round_trip_arm("pingpong", "pingpong", settings, len(labels), "--sizes", ",".join(labels))]

    def analyze(self, documents, settings, path):
        runs = documents["pingpong"]
        points = [
            {"label": label, **point_summary([run["near"]["points"][index] for run in runs])}
            for index, label in enumerate(self.labels())
        ]
        by_label = {point["label"]: point for point in points}
        # The segment size in force when the boundary points ran (Linux lets it grow with the peer's window).
        mss = by_label["mss"]["mss"]
        penalties = {
            statistic: segment_penalties(
                {point["request_bytes"]: point["round_trip_us"][statistic] for point in points}, mss
            )
            for statistic in ("minimum", "median")
        }
        return {"seed": self.seed, "mss": mss, "points": points, "penalties": penalties}

    def calibration(self, result):
        by_label = {point["label"]: point for point in result["points"]}
        # Medians, as every figure of the calibration: a minimum is one lucky round (on a tbf
        # link, a message that found the bucket full).
        penalties = result["penalties"]["median"]
        return {
            "extra_segment": {
                "one_segment_us": median_us(by_label["mss"]),
                "two_segments_us": median_us(by_label["mss+1"]),
            },
            "segment_penalties": {
                "mss_bytes": result["mss"],
                "one_byte_us": median_us(by_label["1"]),
                **{
                    f"{name}_packet_percent": 100 * value
                    for name, value in penalties.items()
                    if value is not None
                },
            },
        }


class Nagle(LoadgenSuite):
    """Seed 004: 15 two-byte writes then a 2-byte reply, as the client does it and under the shim."""

    name, seed, title = "nagle", "004", "15 two-byte writes, then a reply"
    own_arms = (
        ("plain", ()),
        ("nodelay", ("--nodelay",)),
        ("cork", ("--send", "cork")),
        ("writev", ("--send", "writev")),
    )
    policies = ("nodelay", "cork", "coalesce")

    def arms(self, settings, path):
        arms = [round_trip_arm(key, "burst", settings, 1, *args) for key, args in self.own_arms]
        arms += [
            round_trip_arm(f"shim-{policy}", "burst", settings, 1, policy=policy) for policy in self.policies
        ]
        return arms

    def analyze(self, documents, settings, path):
        arms = {}
        for key, runs in documents.items():
            far_reads = sum(run["far"]["reads"]["count"] for run in runs)
            far_requests = sum(run["far"]["requests"] for run in runs)
            arms[key] = {
                **point_summary([run["near"]["points"][0] for run in runs]),
                "far_reads_per_request": far_reads / far_requests if far_requests else None,
            }
        return {"seed": self.seed, "arms": arms}

    def calibration(self, result):
        arms = result["arms"]
        measurements = {"nagle": {f"{key}_us": median_us(arms[key]) for key, _ in self.own_arms}}
        shim = {
            f"{policy}_us": median_us(arms[f"shim-{policy}"])
            for policy in self.policies
            if f"shim-{policy}" in arms
        }
        if shim:
            measurements["nagle_shim"] = shim
        return measurements


class Stream(LoadgenSuite):
    """Seed 003: throughput by write size with Nagle on and off, and by SO_SNDBUF
    (64 KiB writes, Nagle on); measured by the receiver."""

    name, seed, title = "stream", "003", "throughput by write size and SO_SNDBUF"
    write_sizes = (1, 16, 128, 512, 1024, 4096, 65536)
    sndbufs = (4096, 8192, 16384, 32768, 65536, 262144, 1048576)
    bulk_write = 65536
    small_write, batched_write, limited_sndbuf = 128, 4096, 4096

    def arms(self, settings, path):
        seconds = settings.stream_seconds(path.rate_bit_s)
        # Six intervals a run: the first two are warm-up (slow start, buffers growing).
        timing = ("--seconds", f"{seconds:g}", "--interval-ms", str(max(1, round(seconds * 1000 / 6))))
        timeout = 60 + 3 * seconds
        arms = []
        for size in self.write_sizes:
            arms.append(
                Arm(f"nagle-{size}", "stream", ("--write-bytes", str(size), *timing), None, timeout, False)
            )
            arms.append(
                Arm(
                    f"nodelay-{size}",
                    "stream",
                    ("--write-bytes", str(size), "--nodelay", *timing),
                    None,
                    timeout,
                    False,
                )
            )
        # The autotuned reference of the SO_SNDBUF sweep is the Nagle-on arm at bulk_write.
        for sndbuf in self.sndbufs:
            args = ("--write-bytes", str(self.bulk_write), "--sndbuf", str(sndbuf), *timing)
            arms.append(Arm(f"sndbuf-{sndbuf}", "stream", args, None, timeout, False))
        return arms

    def analyze(self, documents, settings, path):
        warmup_ns = settings.stream_seconds(path.rate_bit_s) / 3 * 1e9
        arms = {key: self.arm_summary(runs, warmup_ns) for key, runs in documents.items()}
        return {
            "seed": self.seed,
            "by_size": [
                {"write_bytes": size, "nagle": arms[f"nagle-{size}"], "nodelay": arms[f"nodelay-{size}"]}
                for size in self.write_sizes
            ],
            "by_sndbuf": [{"sndbuf_set": sndbuf, **arms[f"sndbuf-{sndbuf}"]} for sndbuf in self.sndbufs]
            + [{"sndbuf_set": None, **arms[f"nagle-{self.bulk_write}"]}],
        }

    @staticmethod
    def arm_summary(runs: list[dict], warmup_ns: float) -> dict:
        summary = summarize([interval_rates_mbit_s(run["far"]["ticks"], warmup_ns) for run in runs])
        # Segments that carried new data: a retransmission carries bytes already counted.
        segments = sum(
            run["near"]["tcp_info"]["data_segs_out"] - run["near"]["tcp_info"]["total_retrans"]
            for run in runs
        )
        reads = hist.merge(run["far"]["reads"] for run in runs)
        writes = hist.merge(run["near"]["write_ns"] for run in runs)
        return {
            "throughput_mbit_s": summary.as_dict() if summary else None,
            "sndbuf": runs[0]["near"]["sndbuf"],
            "bytes_per_segment": sum(run["far"]["bytes"] for run in runs) / segments if segments else None,
            "read_bytes_p50": hist.percentile(reads, 0.5),
            "write_us_p50": (hist.percentile(writes, 0.5) or 0) / 1e3,
            "write_us_p99": (hist.percentile(writes, 0.99) or 0) / 1e3,
            "retransmissions": sum(run["near"]["tcp_info"]["total_retrans"] for run in runs),
        }

    def calibration(self, result):
        by_size = {row["write_bytes"]: row for row in result["by_size"]}
        by_sndbuf = {row["sndbuf_set"]: row for row in result["by_sndbuf"]}

        def mbit_s(arm: dict) -> float:
            return arm["throughput_mbit_s"]["median"]

        return {
            "small_writes": {
                "write_bytes": self.small_write,
                "nodelay_mbit_s": mbit_s(by_size[self.small_write]["nodelay"]),
                "nagle_mbit_s": mbit_s(by_size[self.small_write]["nagle"]),
                "batched_mbit_s": mbit_s(by_size[self.batched_write]["nodelay"]),
            },
            "sndbuf": {
                "sndbuf_bytes": self.limited_sndbuf,
                "limited_mbit_s": mbit_s(by_sndbuf[self.limited_sndbuf]),
                "autotuned_mbit_s": mbit_s(by_sndbuf[None]),
            },
        }


# A split request that takes this much longer than one write waited for a
# delayed ACK: half of Linux's 40 ms minimum, far above any path's jitter here.
STALL_US = 20_000


def tail_waits_for_delayed_ack(first_write: int, mss: int) -> bool:
    """Whether Linux holds a small tail written after `first_write` bytes for a delayed ACK.

    Nagle (Minshall's variant) holds the tail while the first write's last
    segment, shorter than the MSS, is unacknowledged. The receiver ACKs at
    once when more than one full segment has arrived since its last ACK,
    which it does for every second full segment; so the short last segment
    arrives alone, and its ACK is delayed, when it follows an even number of
    full segments (none included).
    """
    full, partial = divmod(first_write, mss)
    return partial > 0 and full % 2 == 0


class Rpc(LoadgenSuite):
    """Seed 002: requests around 4096 and 8192 bytes as one write, and as a large write
    plus a 4-byte tail (Nagle on), each answered with a 28-byte reply (a Sun RPC null reply)."""

    name, seed, title = "rpc", "002", "request sizes around 4 and 8 KiB, one write or two"
    sizes = (512, 2048, 4000, 4096, 4952, 8000, 8192, 8960)
    tail = 4
    calibration_size = 4096

    def arms(self, settings, path):
        sizes = ("--sizes", ",".join(map(str, self.sizes)))
        return [
            round_trip_arm("one-write", "rpc", settings, len(self.sizes), *sizes),
            round_trip_arm("split", "rpc", settings, len(self.sizes), *sizes, "--tail", str(self.tail)),
        ]

    def analyze(self, documents, settings, path):
        rows = []
        for index, size in enumerate(self.sizes):
            one = point_summary([run["near"]["points"][index] for run in documents["one-write"]])
            split = point_summary([run["near"]["points"][index] for run in documents["split"]])
            rows.append(
                {
                    "request_bytes": size,
                    "one_write": one,
                    "split": split,
                    "split_over_one_write": median_us(split) / median_us(one),
                    "stalled": median_us(split) - median_us(one) >= STALL_US,
                    "lone_partial_segment": tail_waits_for_delayed_ack(size - self.tail, split["mss"]),
                }
            )
        return {"seed": self.seed, "tail_bytes": self.tail, "sizes": rows}

    def calibration(self, result):
        row = next(row for row in result["sizes"] if row["request_bytes"] == self.calibration_size)
        return {
            "large_write_tail": {
                "request_bytes": self.calibration_size,
                "split_us": median_us(row["split"]),
                "one_write_us": median_us(row["one_write"]),
            }
        }


# POLICIES: the servers suite's arms, each policy's settings (schemas/config-1.schema.json); None runs
# without the shim. cork and coalesce are adaptive unless told otherwise.
POLICIES: dict[str, dict | None] = {
    "baseline": None,
    "observe": {},
    "cork": {"cork": {}},
    "coalesce": {"coalesce": {}},
    "cork-fixed": {"cork": {"adaptive": False}},
    "coalesce-fixed": {"coalesce": {"adaptive": False}},
}
ADAPTIVE = ("cork", "coalesce")
# What the servers suite's tables are read against (issue 16): an adaptive policy within 1% of the
# baseline on a one-write server (its throughput, and the server's CPU time per request), and within 5% of
# one writev's round trip on a multi-write client.
SERVER_GOAL = 0.01
CLIENT_GOAL = 0.05
SERVER_SECONDS = 2.0
WRITEV = "writev"


@dataclass(frozen=True)
class Client:
    """A multi-write client of tcpadvise-loadgen: its mode and the arguments that shape its requests."""

    name: str
    title: str
    mode: str
    args: tuple[str, ...]


class Servers:
    """What each policy costs real one-write-per-request servers (bench.servers: redis, memcached, nginx,
    PostgreSQL; the server under the policy, its usual load client without the shim, requests per second
    as that client counts them, and the CPU time the server's processes spent per request, from a cgroup
    of their own where the machine lets us make one), and how close it brings two multi-write clients to
    the same client sending each request as one writev (round trips)."""

    name, seed, title = "servers", None, "real servers and multi-write clients under each policy"
    clients = (
        Client("nagle", "15 two-byte writes, then a 2-byte reply (seed 004)", "burst", ()),
        Client("header-body", "a 16-byte header, then a 1000-byte body; a 28-byte reply", "rpc",
               ("--sizes", "1016", "--tail", "1000")),
    )

    def left_out(self, path, settings):
        if path.name != "loopback":
            if not any(settings.chosen(server.name) for server in SERVERS):
                return []
            return [f"servers: the servers run on loopback only; {path.description} measures the clients only"]
        lines = [f"servers: {server.name} left out, {reason}" for server in SERVERS
                 if settings.chosen(server.name) and (reason := server.missing())]
        if self.servers(path, settings) and isinstance(reason := cpu_accounting(), str):
            lines.append(f"servers: CPU time per request left out, {reason}")
        return lines

    def tidy(self, path):
        if not self.servers(path) or not isinstance(accounting := cpu_accounting(), Hierarchy):
            return []
        removed = remove_stale(accounting)
        if not removed:
            return []
        shown = ", ".join(removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
        groups = f"{len(removed)} empty cgroup{'s' if len(removed) > 1 else ''}"
        return [f"servers: removed {groups} a killed bench left in {accounting.directory}: {shown}"]

    def servers(self, path, settings: Settings | None = None) -> list[Server]:
        """The servers that run here: installed, on loopback, and chosen (every one when settings is None)."""
        return [server for server in SERVERS if path.name == "loopback" and server.missing() is None
                and (settings is None or settings.chosen(server.name))]

    def chosen_clients(self, settings: Settings) -> list["Client"]:
        return [client for client in self.clients if settings.chosen(client.name)]

    def arms(self, settings, path):
        seconds = settings.seconds or SERVER_SECONDS
        cpu = accounting if isinstance(accounting := cpu_accounting(), Hierarchy) else None
        arms: list[Arm | ServerArm] = [
            ServerArm(f"{server.name}:{policy}", server, policy_settings, seconds, cpu, *placement(settings.pin),
                      runs=settings.runs_of(server.name))
            for server in self.servers(path, settings)
            for policy, policy_settings in POLICIES.items()
        ]
        for client in self.chosen_clients(settings):
            runs = settings.runs_of(client.name)
            arms += [
                replace(round_trip_arm(f"{client.name}:{policy}", client.mode, settings, 1, *client.args,
                                       policy=policy_settings), runs=runs)
                for policy, policy_settings in POLICIES.items()
            ]
            arms.append(replace(round_trip_arm(f"{client.name}:{WRITEV}", client.mode, settings, 1, *client.args,
                                               "--send", "writev"), runs=runs))
        return arms

    def analyze(self, documents, settings, path):
        servers = {}
        for server in self.servers(path, settings):
            runs = {policy: documents[f"{server.name}:{policy}"] for policy in POLICIES}
            arms = {policy: _throughput(runs[policy]) for policy in POLICIES}
            _relative_to(arms, "baseline", "requests_per_s", "vs_baseline")
            _relative_to(arms, "baseline", "cpu_us_per_request", "cpu_vs_baseline")
            for policy, arm in arms.items():
                arm["vs_baseline_paired"] = paired_ratio(runs[policy], runs["baseline"], _requests_per_s)
                arm["cpu_vs_baseline_paired"] = paired_ratio(runs[policy], runs["baseline"], _cpu_us_per_request)
            servers[server.name] = {"title": server.title, "arms": arms}
        clients = {}
        for client in self.chosen_clients(settings):
            runs = {policy: documents[f"{client.name}:{policy}"] for policy in (*POLICIES, WRITEV)}
            arms = {policy: point_summary([run["near"]["points"][0] for run in runs[policy]]) for policy in runs}
            _relative_to(arms, WRITEV, "round_trip_us", "vs_writev")
            for policy, arm in arms.items():
                arm["vs_writev_paired"] = paired_ratio(runs[policy], runs[WRITEV], _round_trip_us)
            clients[client.name] = {"title": client.title, "arms": arms}
        accounting = cpu_accounting() if servers else None
        result = {
            "seconds": settings.seconds or SERVER_SECONDS,
            "pin": _pin_description(settings.pin) if servers else None,
            "cpu_source": accounting.source if isinstance(accounting, Hierarchy) else None,
            "goals": {"adaptive": list(ADAPTIVE), "server_within": SERVER_GOAL, "client_within": CLIENT_GOAL},
            # What ran, and how many times each of its arms did.
            "cases": {name: settings.runs_of(name) for name in (*servers, *clients)},
            "servers": servers,
            "clients": clients,
            "left_out": self.left_out(path, settings),
        }
        result["goals"]["verdicts"] = goal_verdicts(result)
        return result

    def calibration(self, result):
        # Nothing the rules read: this suite proves the policies, it does not calibrate the advice.
        return {}


def _pin_description(pin: str) -> str | None:
    """Where the servers and their clients ran, for a person; None: where the scheduler put them."""
    server, client = placement(pin)
    if server is None:
        return None
    if server == client:
        return f"each server and its client on CPU {min(server)} (--pin {pin})"
    return f"each server on CPU {min(server)}, its client on CPU {min(client)} (--pin {pin})"


def _throughput(runs: list[dict]) -> dict:
    """The runs' requests per second and the server's CPU time per request (us), one sample a run of each,
    the requests each run made and the traces each run's server wrote."""
    rate = summarize([[run["requests_per_s"]] for run in runs])
    cpu = summarize([[value] for run in runs if (value := _cpu_us_per_request(run)) is not None])
    return {
        "requests_per_s": rate.as_dict() if rate else None,
        "cpu_us_per_request": cpu.as_dict() if cpu else None,
        "requests": [run["requests"] for run in runs],
        "traces": [run["traces"] for run in runs],
    }


def _requests_per_s(run: dict) -> float:
    return run["requests_per_s"]


def _cpu_us_per_request(run: dict) -> float | None:
    return run["cpu_ns"] / 1e3 / run["requests"] if run["cpu_ns"] is not None else None


def _round_trip_us(run: dict) -> float | None:
    """A client run's median round trip after its warm-up (us)."""
    point = run["near"]["points"][0]
    measured = after_warmup(point["round_ns"], point["warmup"])
    return statistics.median(measured) / 1e3 if measured else None


def paired_ratio(runs: list[dict], reference: list[dict], figure: Callable[[dict], float | None]) -> dict | None:
    """Each run's `figure` over the reference arm's run of the same round (the arms run one after the other,
    round by round: a machine's load that drifts over minutes weighs on both alike), summarised: one sample a
    run; None when no round has both. The goal lines read its interval (stats.verdict)."""
    ratios = [[ours / theirs] for run, base in zip(runs, reference, strict=True)
              if (ours := figure(run)) is not None and (theirs := figure(base))]
    summary = summarize(ratios)
    return summary.as_dict() if summary else None


# Each goal: the figure it is on, the paired ratio it reads and whether a higher ratio is worse.
SERVER_GOALS = (
    ("requests_per_s", "vs_baseline_paired", False),
    ("cpu_us_per_request", "cpu_vs_baseline_paired", True),
)
CLIENT_GOALS = (("round_trip_us", "vs_writev_paired", True),)


def goal_verdicts(result: dict) -> dict[str, dict[str, dict[str, dict[str, str]]]]:
    """Every goal's verdict on the servers suite's `result`: {"servers"/"clients": {name: {figure: {adaptive
    policy: stats.verdict of its paired ratio}}}}; the servers' CPU time only where it was counted. The
    goal lines say these (bench.render.goals computes them again from the figures it is given)."""
    goals, verdicts = result["goals"], {}
    for kind, goal, figures in (("servers", goals["server_within"], SERVER_GOALS),
                                ("clients", goals["client_within"], CLIENT_GOALS)):
        verdicts[kind] = {
            name: {
                figure: {
                    policy: verdict(subject["arms"][policy].get(field),
                                    1 + goal if higher_is_worse else 1 - goal, higher_is_worse)
                    for policy in goals["adaptive"]
                }
                for figure, field, higher_is_worse in figures
                if figure != "cpu_us_per_request" or result.get("cpu_source") is not None
            }
            for name, subject in result[kind].items()
        }
    return verdicts


def _relative_to(arms: dict[str, dict], reference: str, figure: str, field: str) -> None:
    """Each arm's median `figure` over the reference arm's median, as `field` (None when either is missing)."""
    base = arms[reference][figure]
    for arm in arms.values():
        ours = arm[figure]
        arm[field] = ours["median"] / base["median"] if ours and base and base["median"] else None


# The servers suite's cases, as --case names them and its tables and goal lines say them.
CASE_NAMES = (*(server.name for server in SERVERS), *(client.name for client in Servers.clients))

_SEED_SUITES = (Pingpong(), Nagle(), Stream(), Rpc())
SUITES: dict[str, Suite] = {suite.name: suite for suite in (*_SEED_SUITES, Servers())}
SUITE_NAMES = tuple(SUITES)
# The default: the suites that reproduce a seed and yield the calibration.
SEED_SUITES = tuple(suite.name for suite in _SEED_SUITES)
