"""A/B experiments on live traffic: the config, and the report.

The shim gives each new connection an experiment matches an arm drawn from
a keyed hash of the experiment's seed and the connection's 4-tuple, and
writes, per process, the arms' totals and one outcome row per connection,
closed or still open (docs/policy-config.md, "Experiments"); every snapshot
carries them, so a running experiment can be looked at at any time. This
module merges those from any number of traces (processes, hosts), checks
the split, and decides which arm wins, comparing arms over connections, the
unit that was randomised:

  metric      each connection's mean turn time, as the application sees it
              (first write of a request to the first byte of its reply, the
              same under every policy); lower is better
  comparison  the ratio of the arm's geometric mean to control's, from the
              difference of mean log turn times
  sequential  a 95% always-valid confidence sequence for that ratio: the
              normal-mixture boundary (Robbins; the mSPRT of Johari et al.
              2017, the asymptotic confidence sequences of Waudby-Smith et
              al. 2023) mixed over several effect scales; it holds at every
              look at once, so looking at a running experiment again and
              again does not raise the false winner rate
  verdict     a winner when the sequence excludes a ratio of 1 and the
              estimate differs by at least --min-effect; no difference when
              it lies within 1 +/- --min-effect; otherwise not enough data,
              with the connections per arm that would tell
  split       a chi-square sample-ratio-mismatch test of the drawn arms
              against the weights, and a check that every connection's arm
              is the one its 4-tuple draws

The fixed-horizon statistics (bootstrap interval, Mann-Whitney test) are
kept, labelled: they hold only when looked at once, at a size fixed in
advance.

numpy and scipy are imported when a report is built, so that the CLI starts fast.
"""

import ipaddress
import math
import random
import re
from dataclasses import dataclass, field

import yaml

from .. import schemas
from ..errors import BadInputError
from ..model import hist
from ..policy.config import BUILTIN_POLICIES, CONFIG_SCHEMA
from ..trace.reader import Inputs
from ..units import format_value, ns_to_us

AB_REPORT_SCHEMA = schemas.uri("tcpadvise.ab-report/1")
ASSIGNMENT = "splitmix64-4tuple/1"
MIN_CONNECTIONS = 10
MIN_PER_ARM = 3
BOOTSTRAP_SAMPLES = 2000
ALPHA = 0.05
SRM_ALPHA = 0.001
# The normal mixture's precisions over the log ratio: prior spreads from a
# factor of e^2 down to 3%, so that a large effect shows after a few
# connections and a small one after many; fixed before any look.
MIXTURE_PRECISIONS = (0.25, 4.0, 64.0, 1024.0)
# Per-connection variance floor of the log turn time: a mean from histogram
# buckets resolves about 1%, so identical arms never look infinitely precise.
LOG_VARIANCE_FLOOR = 1e-4
_ARM_NAME = re.compile(r"[A-Za-z0-9_-]+")
_MASK = (1 << 64) - 1


def parse_arms(value: str) -> list[tuple[str, str]]:
    """Parse `control=observe,treat=coalesce` into (name, policy) pairs; the first is the control.

    Policies are the built-in names; arms with policies of their own go in a
    config file (docs/policy-config.md)."""
    arms = []
    for part in value.split(","):
        name, sep, policy = part.strip().partition("=")
        if not sep or not name or not policy:
            raise BadInputError(f"--ab {value}: each arm is NAME=POLICY, e.g. control=observe,treat=coalesce")
        if policy not in BUILTIN_POLICIES:
            raise BadInputError(f"--ab {value}: {policy!r} is not a built-in policy ({', '.join(BUILTIN_POLICIES)}); "
                                "for others write the experiment in a config file")
        if not _ARM_NAME.fullmatch(name):
            raise BadInputError(f"--ab {value}: arm names are letters, digits, '-' and '_'")
        arms.append((name, policy))
    if len(arms) < 2 or len({name for name, _ in arms}) != len(arms):
        raise BadInputError(f"--ab {value}: give at least two arms with different names")
    return arms


def experiment_config(arms: list[tuple[str, str]], seed: int | None = None) -> str:
    """The config for `record --ab`: every socket takes part, arms weighted equally.

    Without a seed the key is random, written into the config so that every
    process of the run shares it."""
    origin = "given with --seed" if seed is not None else "random: no --seed given"
    seed = random.SystemRandom().randrange(1 << 62) if seed is None else seed
    arms_data = [{"name": arm, "weight": 1, "policy": policy} for arm, policy in arms]
    config = {"schema": CONFIG_SCHEMA, "experiment": {"name": "ab", "seed": seed, "arms": arms_data}}
    return f"# tcpadvise record --ab\n# seed {origin}\n" + yaml.safe_dump(config, sort_keys=False, width=1000)


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _endpoint_words(addr: str, port: int) -> tuple[int, list[int]]:
    """(family, words): the address as big-endian 64-bit words, then the port."""
    if not addr:
        return 0, [port]
    ip = ipaddress.ip_address(addr)
    value = int(ip)
    if ip.version == 4:
        return 4, [value, port]
    return 6, [value >> 64, value & _MASK, port]


def drawn_arm(seed: int, weights: list[float], local: tuple[str, int], peer: tuple[str, int]) -> int:
    """The arm a connection between local and peer (address, port) draws: the shim's
    ArmDrawnFor (libtcpadvise/experiment.cc), assignment splitmix64-4tuple/1."""
    family, a = _endpoint_words(*local)
    _, b = _endpoint_words(*peer)
    first, second = (b, a) if next((y < x for x, y in zip(a, b) if x != y), False) else (a, b)
    h = _splitmix64(seed ^ family)
    for word in first + second:
        h = _splitmix64(h ^ word)
    u = (h >> 11) * 2.0**-53 * sum(weights)
    cumulative = 0.0
    for index, weight in enumerate(weights):
        cumulative += weight
        if u < cumulative:
            return index
    return len(weights) - 1


@dataclass
class Arm:
    name: str
    weight: float
    connections: int = 0
    live: int = 0
    drawn: int = 0
    calls: int = 0
    errors: int = 0
    buckets: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    stopped: bool = False
    stop_reasons: list = field(default_factory=list)


@dataclass
class Experiment:
    name: str
    seed: int
    traces: list = field(default_factory=list)
    arms: dict = field(default_factory=dict)
    dropped: int = 0
    misdrawn: int = 0
    running: int = 0  # traces that are snapshots of a process still running
    written_unix_ns: int = 0


def collect(inputs: Inputs, only: str | None = None) -> Experiment:
    """Merge one experiment's arms and connection rows over all traces."""
    found: dict[str, Experiment] = {}
    for trace in inputs.traces:
        block = trace.data.get("experiment")
        if not block:
            continue
        e = found.setdefault(block["name"], Experiment(block["name"], block["seed"]))
        e.traces.append(str(trace.path))
        e.dropped += block["connections_dropped"]
        e.running += not trace.data["final"]
        e.written_unix_ns = max(e.written_unix_ns, trace.data["written_unix_ns"])
        weights = [arm_data["weight"] for arm_data in block["arms"]]
        index = {f: i for i, f in enumerate(block["connection_fields"])}
        rows = [{f: row[i] for f, i in index.items()} for row in block["connections"]]
        for row in rows:
            expected = drawn_arm(block["seed"], weights, (row["local_addr"], row["local_port"]),
                                 (row["peer_addr"], row["peer_port"]))
            e.misdrawn += expected != row["drawn"]
        for position, arm_data in enumerate(block["arms"]):
            arm = e.arms.setdefault(arm_data["name"], Arm(arm_data["name"], arm_data["weight"]))
            arm.connections += arm_data["connections"]
            arm.live += arm_data["live_connections"]
            arm.drawn += arm_data["drawn"]
            arm.calls += arm_data["calls"]
            arm.errors += arm_data["errors"]
            arm.buckets += arm_data["turn_ns"]
            if arm_data["stopped"]:
                arm.stopped = True
                arm.stop_reasons.append(arm_data["stop_reason"])
            arm.rows += [row for row in rows if row["arm"] == position]
    if not found:
        raise BadInputError("no experiment in these traces (record with --ab, or a config with an experiment)")
    if only is None and len(found) > 1:
        raise BadInputError(f"several experiments ({', '.join(sorted(found))}): choose one with --experiment")
    if only is not None and only not in found:
        raise BadInputError(f"no experiment named {only} (found: {', '.join(sorted(found))})")
    return found[only or next(iter(found))]


def _turn_histogram(buckets: list) -> dict:
    count = sum(b[2] for b in buckets)
    return {"unit": "ns", "count": count, "sum": sum(b[2] * (b[0] + b[1]) / 2 for b in buckets),
            "min": min((b[0] for b in buckets), default=0), "max": max((b[1] for b in buckets), default=0),
            "buckets": sorted(buckets)}


def summarize_arm(arm: Arm) -> dict:
    histogram = hist.merge([_turn_histogram(arm.buckets)]) if arm.buckets else None
    percentile = (lambda q: ns_to_us(hist.percentile(histogram, q))) if histogram else (lambda q: None)
    seconds = sum(r["duration_ns"] for r in arm.rows) / 1e9
    turns = sum(r["turns"] for r in arm.rows)
    sent = sum(r["sent_to_reply_mean_ns"] * r["turns"] for r in arm.rows)
    return {
        "name": arm.name,
        "weight": arm.weight,
        "connections": arm.connections,
        "live_connections": arm.live,
        "drawn": arm.drawn,
        "turns": int(turns),
        "turn_p50_us": percentile(0.5),
        "turn_p90_us": percentile(0.9),
        "turn_p99_us": percentile(0.99),
        "sent_to_reply_mean_us": ns_to_us(sent / turns) if turns else None,
        "throughput_bytes_per_s": round(sum(r["bytes"] for r in arm.rows) / seconds, 1) if seconds else None,
        "segments_per_turn": _ratio(sum(r["data_segs_out"] for r in arm.rows), turns),
        "calls_per_turn": _ratio(sum(r["calls"] for r in arm.rows), turns),
        "errors": arm.errors,
        "error_rate": _ratio(arm.errors, arm.calls, digits=6),
        "stopped": arm.stopped,
        "stop_reasons": arm.stop_reasons,
    }


def _ratio(a: float, b: float, digits: int = 3) -> float | None:
    return round(a / b, digits) if b else None


def _turn_means(arm: Arm):
    import numpy as np

    return np.array([r["turn_mean_ns"] for r in arm.rows if r["turns"] > 0 and r["turn_mean_ns"] > 0], dtype=float)


def log_mixture_ratio(information: float, difference: float) -> float:
    """Log of the mixture likelihood ratio of a difference of means against none.

    The difference's estimate, scaled by its information (1/variance), moves as
    a Brownian motion in information time; mixing its drift over normal priors
    of precisions MIXTURE_PRECISIONS gives a nonnegative martingale under no
    difference, which crosses 1/alpha with probability at most alpha ever
    (Ville's inequality): the boundary of the confidence sequence."""
    terms = [0.5 * math.log(r / (information + r)) + information**2 * difference**2 / (2 * (information + r))
             for r in MIXTURE_PRECISIONS]
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms) / len(terms))


def half_width(information: float, alpha: float = ALPHA) -> float:
    """Half-width of the confidence sequence for a difference with this information."""
    target = math.log(1 / alpha)
    low, high = 0.0, 1.0
    while log_mixture_ratio(information, high) < target:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if log_mixture_ratio(information, middle) < target else (low, middle)
    return high


def sequential(control_logs, arm_logs) -> dict:
    """The always-valid comparison of mean log turn times (arm minus control)."""
    variance = (max(arm_logs.var(ddof=1), LOG_VARIANCE_FLOOR) / arm_logs.size
                + max(control_logs.var(ddof=1), LOG_VARIANCE_FLOOR) / control_logs.size)
    information = 1 / variance
    diff = float(arm_logs.mean() - control_logs.mean())
    width = half_width(information)
    return {"log_difference": diff, "half_width": width,
            "ratio": round(math.exp(diff), 4),
            "ratio_cs": [round(math.exp(diff - width), 4), round(math.exp(diff + width), 4)],
            "always_valid_p": round(min(1.0, math.exp(-log_mixture_ratio(information, diff))), 6)}


def fixed_horizon(control, treatment, rng) -> dict:
    """Bootstrap 95% interval of the difference of means and a Mann-Whitney test, in us."""
    import numpy as np
    from scipy import stats

    interval = stats.bootstrap(
        (treatment, control),
        lambda t, c, axis: np.mean(t, axis=axis) - np.mean(c, axis=axis),
        n_resamples=BOOTSTRAP_SAMPLES,
        confidence_level=0.95,
        method="percentile",
        random_state=rng,
    ).confidence_interval
    low, high = interval.low, interval.high
    return {"note": "valid only when looked at once, at a number of connections fixed in advance",
            "ci95_us": [ns_to_us(low), ns_to_us(high)],
            "p_value": round(float(stats.mannwhitneyu(treatment, control, alternative="two-sided").pvalue), 6)}


def connections_needed(control_logs, arm_logs, min_effect: float) -> int:
    """Connections per arm for the sequence's half-width to fall to half of min_effect."""
    spread = max(control_logs.var(ddof=1), LOG_VARIANCE_FLOOR) + max(arm_logs.var(ddof=1), LOG_VARIANCE_FLOOR)
    target = math.log1p(min_effect) / 2
    n = MIN_CONNECTIONS
    while half_width(n / spread) > target and n < 10**9:
        n *= 2
    low, high = n // 2, n
    while low + 1 < high:
        middle = (low + high) // 2
        low, high = (low, middle) if half_width(middle / spread) <= target else (middle, high)
    return max(MIN_CONNECTIONS, high)


def check_split(e: Experiment) -> dict:
    """Sample-ratio-mismatch test: the arms connections drew against the weights."""
    from scipy import stats

    arms = list(e.arms.values())
    drawn = [a.drawn for a in arms]
    total = sum(drawn)
    weights = sum(a.weight for a in arms)
    expected = [total * a.weight / weights for a in arms]
    p_value = float(stats.chisquare(drawn, expected).pvalue) if total and min(expected) > 0 else None
    empty = [a.name for a in arms if a.drawn == 0]
    return {"drawn": {a.name: a.drawn for a in arms},
            "expected": {a.name: round(x, 1) for a, x in zip(arms, expected)},
            "p_value": None if p_value is None else round(p_value, 6),
            "ok": bool(total and not empty and (p_value is None or p_value >= SRM_ALPHA)),
            "empty_arms": empty}


def _split_warnings(e: Experiment, split: dict) -> list[str]:
    warnings = []
    total = sum(split["drawn"].values())
    if split["empty_arms"] and total:
        warnings.append(f"arm{'s' if len(split['empty_arms']) > 1 else ''} {', '.join(split['empty_arms'])} drew no "
                        f"connection out of {total}: check the weights and that connections reach the experiment")
    if split["p_value"] is not None and split["p_value"] < SRM_ALPHA:
        shares = ", ".join(f"{name} {n} (expected {split['expected'][name]})" for name, n in split["drawn"].items())
        warnings.append(f"sample ratio mismatch: {shares}, chi-square p={format_value(split['p_value'], 'ratio')}: the split is off, "
                        "so the comparison may be biased (connections lost, or some processes outside the "
                        "experiment)")
    if e.misdrawn:
        warnings.append(f"{e.misdrawn} connections' arms are not the ones their 4-tuples draw with seed {e.seed}")
    return warnings


def build_ab_report(inputs: Inputs, experiment: str | None = None, min_effect: float = 0.05) -> dict:
    import numpy as np

    e = collect(inputs, experiment)
    arms = list(e.arms.values())
    control = arms[0]
    rng = np.random.default_rng(e.seed)
    comparisons, needed, winners, equivalent, warnings = [], 0, [], [], []
    control_means = _turn_means(control)
    for arm in arms[1:]:
        means = _turn_means(arm)
        if min(means.size, control_means.size) < MIN_PER_ARM:
            needed = max(needed, MIN_CONNECTIONS)
            continue
        s = sequential(np.log(control_means), np.log(means))
        significant = bool(not (s["ratio_cs"][0] <= 1 <= s["ratio_cs"][1]) and abs(s["ratio"] - 1) >= min_effect)
        within = bool(abs(s["log_difference"]) + s["half_width"] < math.log1p(min_effect))
        c = {"arm": arm.name, "connections": [int(control_means.size), int(means.size)],
             "control_mean_us": ns_to_us(control_means.mean()), "arm_mean_us": ns_to_us(means.mean()),
             "difference_us": ns_to_us(means.mean() - control_means.mean()),
             "relative": round(float(means.mean() / control_means.mean() - 1), 4),
             "ratio": s["ratio"], "ratio_cs": s["ratio_cs"], "always_valid_p": s["always_valid_p"],
             "significant": significant, "equivalent": within,
             "fixed_horizon": fixed_horizon(control_means, means, rng)}
        comparisons.append(c)
        if significant:
            geometric = float(np.exp(np.log(means).mean()))
            control_geometric = float(np.exp(np.log(control_means).mean()))
            winners.append((geometric, arm.name) if s["ratio"] < 1 else (control_geometric, control.name))
        elif within:
            equivalent.append(arm.name)
        else:
            needed = max(needed, connections_needed(np.log(control_means), np.log(means), min_effect))
    split = check_split(e)
    warnings += _split_warnings(e, split)
    if e.dropped:
        warnings.append(f"{e.dropped} connections beyond the shim's per-process log were left out of the comparison")
    if winners:
        best = min(winners)[1]
        verdict = {"outcome": "winner", "winner": best,
                   "reason": f"{best} has the lowest turn times, beyond chance at any look (95% confidence "
                             f"sequence) and by at least {min_effect:.0%}", "connections_needed": None}
    elif needed:
        verdict = {"outcome": "not enough data", "winner": None,
                   "reason": f"no arm is shown to differ from control by {min_effect:.0%} or more, nor to be "
                             f"within {min_effect:.0%} of it, so far; about {needed} connections per arm would tell",
                   "connections_needed": needed}
    else:
        verdict = {"outcome": "no difference", "winner": None,
                   "reason": f"every arm is within {min_effect:.0%} of control's turn times (95% confidence "
                             "sequence)", "connections_needed": None}
    live = sum(a.live for a in arms)
    return {"schema": AB_REPORT_SCHEMA, "experiment": e.name, "seed": e.seed, "traces": e.traces,
            "state": "running" if e.running else "finished", "live_connections": live,
            "as_of_unix_ns": e.written_unix_ns,
            "control": control.name,
            "metric": "mean turn time per connection (first write to first byte of the reply), lower is better; "
                      "arms compared by the ratio of geometric means",
            "method": "always-valid 95% confidence sequence (normal mixture, mSPRT), valid at every look",
            "min_effect": min_effect, "arms": [summarize_arm(a) for a in arms], "split": split,
            "comparisons": comparisons, "verdict": verdict, "warnings": warnings}
