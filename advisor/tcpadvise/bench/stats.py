"""The statistics of `tcpadvise bench`, in the manner of sockperf and neper.

Each arm of an experiment runs several times (runs, each a fresh process
and connection); each run yields samples (round trips in ns, or throughput
per interval) after its warm-up, which is never counted. A Summary pools the
runs' samples: count, minimum, median, p99, and a 95% confidence interval on
the median from a two-level bootstrap (runs drawn with replacement, then
samples within each run), so that the interval is as wide as the runs
disagree, not only as the samples within one run scatter.

A figure with one sample a run (requests/s, CPU time per request, the paired
ratios the goal lines read) gets the distribution-free interval of the median
instead: two order statistics whose coverage is at least 95%, by the binomial
distribution. A bootstrap of a handful of values is too narrow (of 7 runs, its
95% interval is about the 2nd to the 6th value, which holds the median 87.5% of
the time); the exact one of 7 runs is the lowest to the highest (98.4%), and
fewer than 6 runs have none that reaches 95% (the range then, with its
coverage, which the verdicts do not accept).
"""

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


CONFIDENCE = 0.95
BOOTSTRAP_REPLICATES = 1000
# A fixed seed: the same samples always give the same interval.
_BOOTSTRAP_SEED = 20240501


@dataclass(frozen=True)
class Summary:
    """Pooled statistics of one arm: `count` samples over `runs` runs."""

    count: int
    runs: int
    minimum: float
    median: float
    p99: float
    ci_low: float
    ci_high: float
    run_medians: tuple[float, ...]
    # The interval's coverage: CONFIDENCE for the bootstrap, the exact one of order statistics.
    confidence: float = CONFIDENCE

    def scaled(self, factor: float) -> "Summary":
        """The same summary in another unit (ns to us: 1e-3)."""
        return Summary(
            self.count,
            self.runs,
            self.minimum * factor,
            self.median * factor,
            self.p99 * factor,
            self.ci_low * factor,
            self.ci_high * factor,
            tuple(value * factor for value in self.run_medians),
            self.confidence,
        )

    def as_dict(self) -> dict:
        return {**asdict(self), "run_medians": list(self.run_medians)}


def after_warmup(samples: Sequence[float], warmup: int) -> list[float]:
    """The samples a run measured: its first `warmup` ones only warmed the connection up."""
    return list(samples[warmup:])


def interval_rates_mbit_s(ticks: Sequence[Sequence[int]], warmup_ns: float) -> list[float]:
    """Throughput of each interval between the receiver's (ns, bytes so far) ticks, in Mbit/s.

    Intervals that start before `warmup_ns` (slow start, buffers filling) are
    left out.
    """
    rates = []
    for (start_ns, start_bytes), (end_ns, end_bytes) in itertools.pairwise(ticks):
        if start_ns >= warmup_ns and end_ns > start_ns:
            rates.append((end_bytes - start_bytes) * 8e3 / (end_ns - start_ns))
    return rates


def summarize(runs: Sequence[Sequence[float]]) -> Summary | None:
    """Pool the runs' measured samples; None when no run measured anything."""
    import numpy as np  # here, not at the top: `tcpadvise --help` never imports numpy

    runs = [np.asarray(run, dtype=float) for run in runs if len(run)]
    if not runs:
        return None
    pooled = np.concatenate(runs)
    if pooled.size == len(runs):
        low, high, confidence = median_order_ci(pooled)
    else:
        (low, high), confidence = median_ci(runs), CONFIDENCE
    return Summary(
        count=int(pooled.size),
        runs=len(runs),
        minimum=float(pooled.min()),
        median=float(np.median(pooled)),
        p99=float(np.percentile(pooled, 99)),
        ci_low=low,
        ci_high=high,
        run_medians=tuple(float(np.median(run)) for run in runs),
        confidence=confidence,
    )


def median_order_ci(values: "np.ndarray") -> tuple[float, float, float]:
    """The distribution-free interval of the median of independent `values`: the k-th lowest and k-th
    highest, k as large as keeps the coverage 1 - 2 P(Binomial(n, 1/2) < k) at CONFIDENCE or more; the
    whole range when none does (fewer than 6 values). Returns (low, high, coverage)."""
    import numpy as np  # here, not at the top: `tcpadvise --help` never imports numpy
    from scipy.stats import binom

    ordered, n = np.sort(values), len(values)
    k = 1
    while k < (n + 1) // 2 and 1 - 2 * binom.cdf(k, n, 0.5) >= CONFIDENCE:
        k += 1
    return float(ordered[k - 1]), float(ordered[n - k]), float(1 - 2 * binom.cdf(k - 1, n, 0.5))


def median_ci(runs: "Sequence[np.ndarray]", replicates: int = BOOTSTRAP_REPLICATES) -> tuple[float, float]:
    """The CONFIDENCE interval of the pooled median by a two-level bootstrap.

    Each replicate draws as many runs as there are, with replacement, then
    as many samples from each drawn run as it has, with replacement, and
    takes the median of them all.
    """
    import numpy as np  # here, not at the top: `tcpadvise --help` never imports numpy

    rng = np.random.default_rng(_BOOTSTRAP_SEED)
    lengths = np.array([len(run) for run in runs])
    longest = int(lengths.max())
    # Runs padded with NaN into one array, so that every replicate is one vectorised draw.
    table = np.full((len(runs), longest), np.nan)
    for row, run in enumerate(runs):
        table[row, : len(run)] = run
    chosen = rng.integers(0, len(runs), size=(replicates, len(runs)))
    # Column k of a chosen run of length n is drawn from its first n samples; the rest stay NaN.
    columns = (rng.random((replicates, len(runs), longest)) * lengths[chosen][..., None]).astype(int)
    draws = table[chosen[..., None], columns]
    if (lengths == longest).all():
        medians = np.median(draws.reshape(replicates, -1), axis=1)
    else:
        # A drawn run contributes as many samples as it has: the columns past its length do not count.
        draws[np.arange(longest)[None, None, :] >= lengths[chosen][..., None]] = np.nan
        medians = np.nanmedian(draws.reshape(replicates, -1), axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def segment_penalties(times_by_size: dict[int, float], mss: int) -> dict[str, float | None]:
    """The seed 000 summary: how much longer than a 1-byte message a round trip takes
    when the message fills one segment, needs a second, and needs a fourth.

    `times_by_size` maps message bytes to a round trip (the seed eyeballed
    minimums); the sizes used are the largest one that fits one segment of
    `mss` bytes, the smallest that needs two, and the smallest that needs
    four. Each penalty is a fraction (0.3 for 30%), None when the sweep has
    no such size.
    """
    if 1 not in times_by_size:
        raise ValueError("the 1-byte message is the baseline and must be measured")
    base = times_by_size[1]
    sizes = sorted(times_by_size)
    picks = {
        "fill": max((size for size in sizes if size <= mss), default=None),
        "second": min((size for size in sizes if size > mss), default=None),
        "fourth": min((size for size in sizes if size > 3 * mss), default=None),
    }
    return {
        name: None if size is None or size == 1 else times_by_size[size] / base - 1
        for name, size in picks.items()
    }


WITHIN, NOT_WITHIN, NOT_RESOLVED = "within", "not within", "not resolved"


def verdict(paired: dict | None, limit: float, higher_is_worse: bool) -> str:
    """Whether a paired ratio (a summary's dict: median and 95% interval) meets a goal's `limit`: WITHIN when
    its whole interval is on the goal's side of it (at most `limit` for a cost, at least for a rate),
    NOT_WITHIN when the whole interval is beyond it, NOT_RESOLVED when the interval straddles it, or when
    there is no interval (no figure, or a single run's) or it covers less than CONFIDENCE (fewer than 6 runs)."""
    if paired is None or paired["runs"] < 2 or paired.get("confidence", CONFIDENCE) < CONFIDENCE:
        return NOT_RESOLVED
    low, high = paired["ci_low"], paired["ci_high"]
    if higher_is_worse:
        return WITHIN if high <= limit else NOT_WITHIN if low > limit else NOT_RESOLVED
    return WITHIN if low >= limit else NOT_WITHIN if high < limit else NOT_RESOLVED
