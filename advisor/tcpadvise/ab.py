"""A/B experiments on live traffic: the config, and the report.

The shim draws an arm for each new connection an experiment matches and
writes, per process, the arms' totals and one outcome row per connection
(docs/policy-config.md, "Experiments"). This module merges those from any
number of traces (processes, hosts) and decides which arm wins, comparing
arms over connections, the unit that was randomised:

  metric      each connection's mean turn time (last write of a burst to the
              first byte of the reply); lower is better
  difference  arm mean minus control mean, with a bootstrap 95% confidence
              interval (connections resampled within each arm)
  rank test   Mann-Whitney U, two-sided
  verdict     a winner when the interval excludes zero, p < 0.05 and the
              effect is at least --min-effect of control's mean; no
              difference when there are enough connections to have seen such
              an effect and none shows; otherwise not enough data, with the
              connections per arm that would be needed.
"""

import random
import re
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from . import hist
from .errors import BadInputError
from .policy import BUILTIN_POLICIES
from .policyconfig import CONFIG_VERSION
from .traces import Inputs
from .units import ns_to_us

AB_REPORT_SCHEMA = "tcpadvise.ab-report/1"
MIN_CONNECTIONS = 10
BOOTSTRAP_SAMPLES = 2000
ALPHA = 0.05
POWER_Z = 0.8416  # 80% power
MAX_SEED = 2**63 - 1
_ARM_NAME = re.compile(r"[A-Za-z0-9_-]+")


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
    """The config for `record --ab`: every socket takes part, arms weighted equally."""
    seed = random.SystemRandom().randrange(1 << 62) if seed is None else seed
    lines = ["# tcpadvise record --ab", f"version: {CONFIG_VERSION}", "experiment:", "  name: ab", f"  seed: {seed}",
             "  arms:"]
    lines += [f"    - {{name: {arm}, weight: 1, policy: {policy}}}" for arm, policy in arms]
    return "\n".join(lines) + "\n"


@dataclass
class Arm:
    name: str
    weight: float
    connections: int = 0
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
        index = {f: i for i, f in enumerate(block["connection_fields"])}
        for position, arm_data in enumerate(block["arms"]):
            arm = e.arms.setdefault(arm_data["name"], Arm(arm_data["name"], arm_data["weight"]))
            arm.connections += arm_data["connections"]
            arm.calls += arm_data["calls"]
            arm.errors += arm_data["errors"]
            arm.buckets += arm_data["turn_ns"]
            if arm_data["stopped"]:
                arm.stopped = True
                arm.stop_reasons.append(arm_data["stop_reason"])
            arm.rows += [{f: row[i] for f, i in index.items()} for row in block["connections"]
                         if row[index["arm"]] == position]
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
    return {
        "name": arm.name,
        "weight": arm.weight,
        "connections": arm.connections,
        "turns": int(sum(r["turns"] for r in arm.rows)),
        "turn_p50_us": percentile(0.5),
        "turn_p90_us": percentile(0.9),
        "turn_p99_us": percentile(0.99),
        "throughput_bytes_per_s": round(sum(r["bytes"] for r in arm.rows) / seconds, 1) if seconds else None,
        "segments_per_turn": _ratio(sum(r["data_segs_out"] for r in arm.rows), sum(r["turns"] for r in arm.rows)),
        "calls_per_turn": _ratio(sum(r["calls"] for r in arm.rows), sum(r["turns"] for r in arm.rows)),
        "errors": arm.errors,
        "error_rate": _ratio(arm.errors, arm.calls, digits=6),
        "stopped": arm.stopped,
        "stop_reasons": arm.stop_reasons,
    }


def _ratio(a: float, b: float, digits: int = 3) -> float | None:
    return round(a / b, digits) if b else None


def _turn_means(arm: Arm) -> np.ndarray:
    return np.array([r["turn_mean_ns"] for r in arm.rows if r["turns"] > 0], dtype=float)


def compare(control: np.ndarray, treatment: np.ndarray, rng: np.random.Generator) -> dict:
    """Difference of mean per-connection turn time (treatment - control), in us."""
    diff = treatment.mean() - control.mean()
    boot = (rng.choice(treatment, (BOOTSTRAP_SAMPLES, treatment.size)).mean(axis=1)
            - rng.choice(control, (BOOTSTRAP_SAMPLES, control.size)).mean(axis=1))
    low, high = np.percentile(boot, [2.5, 97.5])
    p_value = float(stats.mannwhitneyu(treatment, control, alternative="two-sided").pvalue)
    return {"control_mean_us": ns_to_us(control.mean()), "arm_mean_us": ns_to_us(treatment.mean()),
            "difference_us": ns_to_us(diff), "ci95_us": [ns_to_us(low), ns_to_us(high)],
            "relative": round(float(diff / control.mean()), 4) if control.mean() else None,
            "p_value": round(p_value, 6)}


def connections_needed(control: np.ndarray, treatment: np.ndarray, min_effect: float) -> int:
    """Connections per arm to detect a min_effect change of control's mean at 5% and 80% power."""
    delta = min_effect * control.mean()
    spread = np.sqrt((control.var(ddof=1) + treatment.var(ddof=1)) / 2) if min(control.size, treatment.size) > 1 else 0
    if delta <= 0 or spread == 0:
        return MIN_CONNECTIONS
    return max(MIN_CONNECTIONS, int(np.ceil(2 * ((1.96 + POWER_Z) * spread / delta) ** 2)))


def build_ab_report(inputs: Inputs, experiment: str | None = None, min_effect: float = 0.05) -> dict:
    e = collect(inputs, experiment)
    arms = list(e.arms.values())
    control = arms[0]
    rng = np.random.default_rng(e.seed)
    comparisons, needed, winners, warnings = [], 0, [], []
    control_means = _turn_means(control)
    for arm in arms[1:]:
        means = _turn_means(arm)
        if min(means.size, control_means.size) < 2:
            needed = max(needed, MIN_CONNECTIONS)
            continue
        c = compare(control_means, means, rng)
        c["arm"] = arm.name
        significant = bool(c["p_value"] < ALPHA and not (c["ci95_us"][0] <= 0 <= c["ci95_us"][1])
                           and abs(c["relative"] or 0) >= min_effect)
        c["significant"] = significant
        comparisons.append(c)
        if significant:
            winners.append((c["arm_mean_us"], arm.name) if c["difference_us"] < 0 else (c["control_mean_us"], control.name))
        n = connections_needed(control_means, means, min_effect)
        if min(means.size, control_means.size) < n:
            needed = max(needed, n)
    if e.dropped:
        warnings.append(f"{e.dropped} connections beyond the shim's per-process log were left out of the comparison")
    if winners:
        best = min(winners)[1]
        verdict = {"outcome": "winner", "winner": best,
                   "reason": f"{best} has the lowest mean turn time, beyond chance and by at least "
                             f"{min_effect:.0%}", "connections_needed": None}
    elif needed:
        verdict = {"outcome": "not enough data", "winner": None,
                   "reason": f"no arm differs from control by {min_effect:.0%} or more so far; "
                             f"{needed} connections per arm would tell", "connections_needed": needed}
    else:
        verdict = {"outcome": "no difference", "winner": None,
                   "reason": f"no arm differs from control by {min_effect:.0%} or more, with enough "
                             f"connections to have seen it", "connections_needed": None}
    return {"schema": AB_REPORT_SCHEMA, "experiment": e.name, "seed": e.seed, "traces": e.traces,
            "control": control.name, "metric": "mean turn time per connection (us), lower is better",
            "min_effect": min_effect, "arms": [summarize_arm(a) for a in arms], "comparisons": comparisons,
            "verdict": verdict, "warnings": warnings}
