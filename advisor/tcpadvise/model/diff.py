"""diff: two reports side by side (before and after a change), per socket group present in both.

A group is the report's unit of advice (model.metrics.Scope): the connections
of one program in one role to one service (a server's local port, a client's
peer address and port), streams apart from exchanges. For
each group in both reports: turn p50 and p99 and writes per burst (p50), each
with a bootstrap confidence interval of the change (scipy.stats.bootstrap over
the histograms' samples, a fixed seed, so the same inputs give the same
output), and segments per write before and after. Findings are matched by rule
and group: those only after appeared, those only before went away.

The interval treats the turns (bursts) of a group as independent samples; the
turns of one connection are not quite, so read a barely significant change on
a single connection with care.
"""

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .. import schemas
from ..units import ns_to_us
from . import hist
from .report import Report

if TYPE_CHECKING:
    from .streaming import StreamedReport

DIFF_SCHEMA = schemas.uri("tcpadvise.diff/1")
CONFIDENCE = 0.95
# BOOTSTRAP_SAMPLES: a histogram larger than this is resampled down to it
# (proportionally) before bootstrapping, so a group of millions of turns costs
# what a few thousand do.
BOOTSTRAP_SAMPLES = 4000
BOOTSTRAP_RESAMPLES = 999
SEED = 20261124

GroupKey = tuple[str, str, int | None, str | None, int | None, bool]


def _finding_key(finding: dict) -> tuple:
    scope = finding["scope"]
    return finding["rule"], scope.get("program"), scope.get("role"), scope.get("local_port"), scope.get("peer_port")


def diff_reports(before: "Report | StreamedReport", after: "Report | StreamedReport") -> dict:
    """The diff document (schemas/diff-1.schema.json) of two reports with their findings."""
    before_groups, after_groups = _groups(before), _groups(after)
    both = [key for key in before_groups if key in after_groups]
    return {
        "schema": DIFF_SCHEMA,
        "confidence": CONFIDENCE,
        "before": {"traces": [str(trace.path) for trace in before.traces]},
        "after": {"traces": [str(trace.path) for trace in after.traces]},
        "groups": [_group_diff(key, before_groups[key], after_groups[key]) for key in both],
        "only_before": [_key_json(key) for key in before_groups if key not in after_groups],
        "only_after": [_key_json(key) for key in after_groups if key not in before_groups],
        "findings_appeared": _findings_only(after.findings, before.findings),
        "findings_gone": _findings_only(before.findings, after.findings),
    }


def regressed(document: dict) -> bool:
    """Whether a group's turn p50 or p99 grew significantly, or a finding appeared."""
    turn_metrics = ("turn_p50_us", "turn_p99_us")
    grew = any(
        group[name]["significant"] and group[name]["change"] > 0
        for group in document["groups"]
        for name in turn_metrics
        if group[name]["change"] is not None
    )
    return grew or bool(document["findings_appeared"])


def _groups(report: "Report | StreamedReport") -> dict[GroupKey, dict]:
    """Each socket group's merged figures (Scope.merged), with its segments per write."""
    return {
        (scope.program, scope.role, scope.local_port, scope.peer, scope.peer_port, scope.merged["stream"]):
            {**scope.merged, "segments_per_write": segments_per_write}
        for scope, segments_per_write in report.group_segments_per_write()
    }


def _key_json(key: GroupKey) -> dict:
    program, role, local_port, peer, peer_port, stream = key
    return {"program": program, "role": role, "local_port": local_port, "peer": peer, "peer_port": peer_port,
            "stream": stream}


def _group_diff(key: GroupKey, before: dict, after: dict) -> dict:
    return {
        **_key_json(key),
        "connections": {"before": before["connections"], "after": after["connections"]},
        "turn_p50_us": _compared(before["turns"]["ns"], after["turns"]["ns"], 0.5, ns_to_us),
        "turn_p99_us": _compared(before["turns"]["ns"], after["turns"]["ns"], 0.99, ns_to_us),
        "writes_per_burst_p50": _compared(before["bursts"]["writes"], after["bursts"]["writes"], 0.5, float),
        "segments_per_write": {"before": before["segments_per_write"], "after": after["segments_per_write"]},
    }


def _compared(before: dict, after: dict, fraction: float, convert: Callable[[float], float]) -> dict:
    """Percentile `fraction` of each histogram, and the change with its bootstrap interval."""
    first, second = hist.percentile(before, fraction), hist.percentile(after, fraction)
    value_before = None if first is None else convert(first)
    value_after = None if second is None else convert(second)
    result = {"before": value_before, "after": value_after, "change": None, "low": None, "high": None,
              "significant": False}
    if value_before is None or value_after is None:
        return result
    result["change"] = value_after - value_before
    spread = _spread(_samples(before), _samples(after), fraction)
    if spread is not None:
        # The bootstrap's spread around its own estimate (from bucket midpoints), centred on
        # the change between the report's interpolated percentiles, so the interval holds it.
        low, high = (result["change"] + convert(bound) for bound in spread)
        result.update(low=low, high=high, significant=low > 0 or high < 0)
    return result


def _samples(histogram: dict):
    """The histogram's values as an array (each bucket's midpoint, its count times), at most BOOTSTRAP_SAMPLES."""
    import numpy as np

    buckets = hist.ranges(histogram)
    counts = np.array([count for _, _, count in buckets], dtype=float)
    total = counts.sum()
    if total > BOOTSTRAP_SAMPLES:
        counts = np.maximum(np.round(counts * BOOTSTRAP_SAMPLES / total), (counts > 0).astype(float))
    values = np.array([(low + high) / 2 for low, high, _ in buckets])
    return np.repeat(values, counts.astype(int))


def _spread(before, after, fraction: float) -> tuple[float, float] | None:
    """The CONFIDENCE interval of quantile(after) - quantile(before), minus that difference itself
    (so 0 lies between the two bounds); None with too few samples."""
    import numpy as np
    from scipy import stats

    if len(before) < 2 or len(after) < 2:
        return None

    def change(first, second, axis=-1):
        return np.quantile(second, fraction, axis=axis) - np.quantile(first, fraction, axis=axis)

    estimate = float(change(before, after))
    if np.all(before == before[0]) and np.all(after == after[0]):
        return 0.0, 0.0
    result = stats.bootstrap(
        (before, after), change, n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=CONFIDENCE,
        method="percentile", vectorized=True, random_state=np.random.default_rng(SEED),
    )
    interval = result.confidence_interval
    return min(0.0, float(interval.low) - estimate), max(0.0, float(interval.high) - estimate)


def _findings_only(these: Iterable[dict], others: Iterable[dict]) -> list[dict]:
    other_keys = {_finding_key(finding) for finding in others}
    return [
        {"rule": finding["rule"], "severity": finding["severity"], "title": finding["title"],
         "program": finding["scope"].get("program"), "role": finding["scope"].get("role"),
         "local_port": finding["scope"].get("local_port"), "peer_port": finding["scope"].get("peer_port")}
        for finding in these
        if _finding_key(finding) not in other_keys
    ]
