"""Figures from the shim's log-linear histograms.

A histogram is the trace's dict: {"unit", "count", "sum", "min", "max",
"buckets": [[lo, hi, count], ...]} with lo <= value < hi and only non-empty
buckets listed.
"""

from collections import Counter
from collections.abc import Iterable


def percentile(histogram: dict, fraction: float) -> float | None:
    """Value below which `fraction` (0..1) of the recorded values fall, or None if empty.

    Walks the cumulative bucket counts to the bucket holding that rank and
    interpolates linearly inside it; the result is clamped to [min, max] so it
    never leaves the range of the values actually recorded.
    """
    if histogram["count"] == 0 or not histogram["buckets"]:
        return None
    rank = fraction * histogram["count"]
    cumulative = 0
    for low, high, count in sorted(histogram["buckets"]):
        if count and cumulative + count >= rank:
            # The shim counts whole units (bytes, calls, clock ticks), so a bucket at most one
            # unit wide (every bucket below 8 units) holds one value: interpolating would invent fractions.
            exact = high - low <= 1
            value = low if exact else low + (high - low) * (rank - cumulative) / count
            return _clamp(value, histogram["min"], histogram["max"])
        cumulative += count
    # Bucket counts summing to less than "count" (a torn snapshot): the top is the best answer.
    return histogram["max"]


def mean(histogram: dict) -> float | None:
    """Mean of the recorded values, or None if empty."""
    if histogram["count"] == 0:
        return None
    return histogram["sum"] / histogram["count"]


def merge(histograms: Iterable[dict]) -> dict:
    """One histogram holding every value of the given ones, which must share a unit."""
    histograms = list(histograms)
    units = {histogram["unit"] for histogram in histograms}
    if len(units) != 1:
        raise ValueError(f"cannot merge histograms of units {sorted(units)}")
    bucket_counts: Counter[tuple[float, float]] = Counter()
    for histogram in histograms:
        for low, high, count in histogram["buckets"]:
            bucket_counts[(low, high)] += count
    # An empty histogram's min and max are placeholders, not values.
    non_empty = [histogram for histogram in histograms if histogram["count"]]
    return {
        "unit": units.pop(),
        "count": sum(histogram["count"] for histogram in histograms),
        "sum": sum(histogram["sum"] for histogram in histograms),
        "min": min((histogram["min"] for histogram in non_empty), default=0),
        "max": max((histogram["max"] for histogram in non_empty), default=0),
        "buckets": [[low, high, count] for (low, high), count in sorted(bucket_counts.items())],
    }


def _clamp(value: float, lowest: float, highest: float) -> float:
    return max(lowest, min(value, highest))
