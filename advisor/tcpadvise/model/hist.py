"""Figures from the shim's log-linear histograms.

A histogram is the trace's dict {"unit", "count", "sum", "min", "max",
"buckets"} with exact count, sum, min and max, in one of two encodings:

- indexed (the shim's since it keeps 128 buckets per power of two): also
  "sub_buckets" (128) and "scale" (units per recorded unit, e.g. ns per clock
  tick), and "buckets": [[index, count], ...] in ascending index order. Index i
  holds the recorded values [low(i), high(i)) below; below 2 * sub_buckets a
  bucket holds one value. A value is reported as its bucket's low edge,
  within 1/sub_buckets (0.8%) of it.
- ranged: "buckets": [[lo, hi, count], ...] in the histogram's unit, lo <=
  value < hi. Traces written before the indexed encoding (four buckets per
  power of two) use it, and so does a merge of indexed histograms whose
  scales differ (ns histograms of different processes); the latter keep
  "sub_buckets" and are reported by low edges too.

Only non-empty buckets are listed. Values that the shim counted but had no
memory to put in a bucket ("unbucketed") are in count, sum, min and max only.
"""

from collections import Counter
from collections.abc import Iterable


def bucket_low(index: int, sub_buckets: int) -> int:
    """Smallest recorded value in bucket `index` of the indexed encoding."""
    if index < 2 * sub_buckets:
        return index
    shift = index // sub_buckets - 1
    return (index - shift * sub_buckets) << shift


def bucket_high(index: int, sub_buckets: int) -> int:
    """One past the largest recorded value in bucket `index`."""
    if index < 2 * sub_buckets:
        return index + 1
    return bucket_low(index, sub_buckets) + (1 << (index // sub_buckets - 1))


def bucket_of(value: int, sub_buckets: int = 128) -> int:
    """Index of the bucket holding a recorded (whole, non-negative) value."""
    if value < 2 * sub_buckets:
        return value
    shift = value.bit_length() - sub_buckets.bit_length()
    return shift * sub_buckets + (value >> shift)


def ranges(histogram: dict) -> list[tuple[float, float, int]]:
    """The histogram's buckets as (lo, hi, count) in its unit, ascending."""
    buckets = histogram["buckets"]
    if not _indexed(histogram):
        return sorted((low, high, count) for low, high, count in buckets)
    sub_buckets, scale = histogram["sub_buckets"], histogram["scale"]
    return sorted(
        (_scaled(bucket_low(index, sub_buckets), scale), _scaled(bucket_high(index, sub_buckets), scale), count)
        for index, count in buckets
    )


def percentile(histogram: dict, fraction: float) -> float | None:
    """Value below which `fraction` (0..1) of the recorded values fall, or None if empty.

    Walks the cumulative bucket counts to the bucket holding that rank. With
    the shim's fine buckets ("sub_buckets") the answer is a value of that
    bucket, so within 1/sub_buckets of the true one: max in max's bucket
    (unless min shares it), else the bucket's low edge, so that a bucket
    holding one distinct value reads exactly (as libtcpadvise's
    Histogram::Percentile does). Old coarse buckets are interpolated linearly
    instead. Either way the result is clamped to [min, max], the range of the
    values actually recorded, and fraction 1 is max.
    """
    return percentiles(histogram, (fraction,))[0]


def percentiles(histogram: dict, fractions: tuple[float, ...]) -> list[float | None]:
    """percentile() of each fraction, the buckets sorted and walked once for all of them."""
    count = histogram["count"]
    if count == 0 or not histogram["buckets"]:
        return [None] * len(fractions)
    results: list = [None] * len(fractions)
    wanted = []  # (rank, position) of the fractions below the top, lowest rank first
    for position, fraction in enumerate(fractions):
        rank = fraction * count
        if rank >= count:
            results[position] = histogram["max"]  # the top is known exactly
        else:
            wanted.append((rank, position))
    wanted.sort()
    fine = "sub_buckets" in histogram
    lowest, highest = histogram["min"], histogram["max"]
    cumulative = 0
    # Buckets in ascending order as they stand: only those found are turned into their edges (a
    # 100 MB trace has tens of millions of buckets, ranges() would convert each).
    for bucket in sorted(histogram["buckets"]) if wanted else ():
        bucket_count = bucket[-1]
        while wanted and bucket_count and cumulative + bucket_count >= wanted[0][0]:
            rank, position = wanted.pop(0)
            low, high = _edges(histogram, bucket)
            # The shim counts whole units (bytes, calls, clock ticks), so a coarse bucket at most one
            # unit wide holds one value: interpolating would invent fractions.
            if fine and low <= highest < high and not low <= lowest < high:
                results[position] = highest
                continue
            exact = fine or high - low <= 1
            value = low if exact else low + (high - low) * (rank - cumulative) / bucket_count
            # Clamped to [min, max] as max(lowest, min(value, highest)) does (written out: this
            # runs for every percentile of every socket item).
            value = highest if highest < value else value
            results[position] = value if value > lowest else lowest
        if not wanted:
            break
        cumulative += bucket_count
    # Bucket counts summing to less than "count" (unbucketed values, a torn snapshot): the top.
    for _, position in wanted:
        results[position] = histogram["max"]
    return results


def mean(histogram: dict) -> float | None:
    """Mean of the recorded values, or None if empty."""
    if histogram["count"] == 0:
        return None
    return histogram["sum"] / histogram["count"]


def merge(histograms: Iterable[dict]) -> dict:
    """One histogram holding every value of the given ones, which must share a unit.

    Indexed histograms of one scale merge bucket by bucket and stay indexed;
    any other mix merges as ranges.
    """
    histograms = list(histograms)
    if len(histograms) == 1 and _indexed(histograms[0]) and (histograms[0]["count"] or not histograms[0]["min"]):
        # One histogram merged is itself (a scope of one socket): the same keys, no buckets re-sorted.
        (only,) = histograms
        return {key: only[key] for key in ("unit", "count", "sum", "min", "max", "sub_buckets", "scale")} | {
            "buckets": only["buckets"]}
    units = {histogram["unit"] for histogram in histograms}
    if len(units) != 1:
        raise ValueError(f"cannot merge histograms of units {sorted(units)}")
    # An empty histogram's min and max are placeholders, not values.
    non_empty = [histogram for histogram in histograms if histogram["count"]]
    merged = {
        "unit": units.pop(),
        "count": sum(histogram["count"] for histogram in histograms),
        "sum": sum(histogram["sum"] for histogram in histograms),
        "min": min((histogram["min"] for histogram in non_empty), default=0),
        "max": max((histogram["max"] for histogram in non_empty), default=0),
    }
    if all(_indexed(histogram) for histogram in histograms):
        layouts = {(histogram["sub_buckets"], histogram["scale"]) for histogram in non_empty}
        if len(layouts) <= 1:
            sub_buckets, scale = layouts.pop() if layouts else (
                histograms[0]["sub_buckets"], histograms[0]["scale"])
            by_index: Counter[int] = Counter()
            for histogram in histograms:
                for index, count in histogram["buckets"]:
                    by_index[index] += count
            return merged | {"sub_buckets": sub_buckets, "scale": scale,
                             "buckets": [[index, count] for index, count in sorted(by_index.items())]}
    by_range: Counter[tuple[float, float]] = Counter()
    for histogram in histograms:
        for low, high, count in ranges(histogram):
            by_range[(low, high)] += count
    fine = {histogram["sub_buckets"] for histogram in histograms if "sub_buckets" in histogram}
    if fine and len(fine) == 1 and all("sub_buckets" in histogram for histogram in histograms):
        merged["sub_buckets"] = fine.pop()
    return merged | {"buckets": [[low, high, count] for (low, high), count in sorted(by_range.items())]}


def _edges(histogram: dict, bucket: list) -> tuple[float, float]:
    """A bucket's (lo, hi) in the histogram's unit, as ranges() gives them (bucket_low and
    bucket_high written out: this runs for every percentile of every socket item)."""
    if "scale" not in histogram:  # not _indexed
        return bucket[0], bucket[1]
    sub_buckets, scale, index = histogram["sub_buckets"], histogram["scale"], bucket[0]
    if index < 2 * sub_buckets:
        low, width = index, 1
    else:
        shift = index // sub_buckets - 1
        low, width = (index - shift * sub_buckets) << shift, 1 << shift
    # Whole units stay integers (_scaled).
    return (low, low + width) if scale == 1 else (low * scale, (low + width) * scale)


def _scaled(value: int, scale: float) -> float:
    # Whole units stay integers: exact beyond 2**53.
    return value if scale == 1 else value * scale


def _indexed(histogram: dict) -> bool:
    return "scale" in histogram


class Sum:
    """merge() one histogram at a time: add() each, result() is merge() of all of them, without
    keeping them (a socket group's histograms are summed as its sockets are read)."""

    def __init__(self):
        self._added = 0
        self._first: dict | None = None
        self._units: set = set()
        self._count = self._sum = 0
        self._min = self._max = None
        self._layouts: set = set()  # (sub_buckets, scale) of the non-empty indexed ones
        self._by_layout: dict[tuple, dict[int, int]] = {}
        self._by_range: Counter = Counter()
        self._ranged = False
        self._fine: set = set()
        self._all_fine = True

    def add(self, histogram: dict) -> None:
        """Add one histogram: the first is only kept (a sum of one is merge() of it), the rest counted."""
        self._added += 1
        if self._added == 1:
            self._first = histogram
            return
        if self._added == 2:
            self._count_in(self._first)
        self._count_in(histogram)

    def _count_in(self, histogram: dict) -> None:
        # Once per histogram of every socket of a group: kept to a few steps besides its buckets.
        count = histogram["count"]
        self._units.add(histogram["unit"])
        self._count += count
        self._sum += histogram["sum"]
        if count:
            low, high = histogram["min"], histogram["max"]
            if self._min is None:
                self._min, self._max = low, high
            else:  # min() and max(): the one held unless the new one is beyond it
                if low < self._min:
                    self._min = low
                if high > self._max:
                    self._max = high
        if "sub_buckets" in histogram:
            self._fine.add(histogram["sub_buckets"])
        else:
            self._all_fine = False
        if "scale" in histogram:  # _indexed
            layout = (histogram["sub_buckets"], histogram["scale"])
            if count:
                self._layouts.add(layout)
            counter = self._by_layout.get(layout)
            if counter is None:
                counter = self._by_layout[layout] = {}
            get = counter.get
            for index, bucket_count in histogram["buckets"]:
                counter[index] = get(index, 0) + bucket_count
        else:
            self._ranged = True
            for low, high, count in histogram["buckets"]:
                self._by_range[(low, high)] += count

    def result(self) -> dict:
        if self._added == 1:
            return merge([self._first])
        if len(self._units) != 1:
            raise ValueError(f"cannot merge histograms of units {sorted(self._units)}")
        merged = {"unit": next(iter(self._units)), "count": self._count, "sum": self._sum,
                  "min": 0 if self._min is None else self._min, "max": 0 if self._max is None else self._max}
        if not self._ranged and len(self._layouts) <= 1:
            sub_buckets, scale = next(iter(self._layouts)) if self._layouts else (
                self._first["sub_buckets"], self._first["scale"])
            by_index: Counter[int] = Counter()
            for counter in self._by_layout.values():
                by_index.update(counter)
            return merged | {"sub_buckets": sub_buckets, "scale": scale,
                             "buckets": [[index, count] for index, count in sorted(by_index.items())]}
        by_range = Counter(self._by_range)
        for (sub_buckets, scale), counter in self._by_layout.items():
            for index, count in counter.items():
                by_range[(_scaled(bucket_low(index, sub_buckets), scale),
                          _scaled(bucket_high(index, sub_buckets), scale))] += count
        if self._fine and len(self._fine) == 1 and self._all_fine:
            merged["sub_buckets"] = next(iter(self._fine))
        return merged | {"buckets": [[low, high, count] for (low, high), count in sorted(by_range.items())]}
