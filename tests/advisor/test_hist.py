import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpadvise import hist

from .conftest import make_hist

SUB_BUCKETS = 128


def indexed(values, unit="bytes", scale=1.0) -> dict:
    """A histogram as the shim writes it (libtcpadvise/histogram.cc EmitHistogram)."""
    counts: dict[int, int] = {}
    for value in values:
        counts[hist.bucket_of(value)] = counts.get(hist.bucket_of(value), 0) + 1
    scaled = (lambda v: v) if scale == 1 else (lambda v: v * scale)  # the shim writes whole units as integers
    return {
        "unit": unit,
        "count": len(values),
        "sum": scaled(sum(values)),
        "min": scaled(min(values, default=0)),
        "max": scaled(max(values, default=0)),
        "sub_buckets": SUB_BUCKETS,
        "scale": scale,
        "buckets": [[index, count] for index, count in sorted(counts.items())],
    }


def exact_percentile(values, fraction):
    """The smallest value with at least fraction * n values at or below it (the shim's ranking)."""
    ordered = sorted(values)
    rank = fraction * len(ordered)
    return ordered[max(0, min(len(ordered), math.ceil(rank)) - 1)]


def ranged(buckets, minimum, maximum, unit="bytes"):
    return {
        "unit": unit,
        "count": sum(count for _, _, count in buckets),
        "sum": 0,
        "min": minimum,
        "max": maximum,
        "buckets": buckets,
    }


# ---- the shim's indexed encoding ----

values_strategy = st.lists(
    st.one_of(st.integers(0, 300), st.integers(0, 2**20), st.integers(0, 2**63)), min_size=1, max_size=300
)
fractions = st.sampled_from([0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0])


@settings(max_examples=200, deadline=None)
@given(values_strategy, fractions)
def test_percentile_is_within_one_percent_below_the_true_value(values, fraction):
    true = exact_percentile(values, fraction)
    got = hist.percentile(indexed(values), fraction)
    assert true * (1 - 1 / SUB_BUCKETS) <= got <= true
    if true < 2 * SUB_BUCKETS or fraction == 1.0:
        assert got == true


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_every_value_lies_in_its_bucket(value):
    index = hist.bucket_of(value)
    assert hist.bucket_low(index, SUB_BUCKETS) <= value < hist.bucket_high(index, SUB_BUCKETS)
    width = hist.bucket_high(index, SUB_BUCKETS) - hist.bucket_low(index, SUB_BUCKETS)
    assert width == 1 or width <= hist.bucket_low(index, SUB_BUCKETS) / SUB_BUCKETS


def test_buckets_match_the_shims_layout():
    # libtcpadvise/histogram.h: exact below 256, then 128 buckets per power of two.
    assert [hist.bucket_of(v) for v in (0, 255, 256, 257, 511, 512, 1000, 65536)] == [
        0, 255, 256, 256, 383, 384, 506, 1280]
    assert hist.bucket_low(506, SUB_BUCKETS) == 1000
    assert hist.bucket_high(506, SUB_BUCKETS) == 1004
    assert hist.bucket_low(1280, SUB_BUCKETS) == 65536
    assert hist.bucket_of(2**64 - 1) == 58 * SUB_BUCKETS - 1


def test_the_issues_examples_are_exact():
    assert hist.percentile(indexed([128] * 100), 0.5) == 128
    assert hist.percentile(indexed([65536] * 100), 0.5) == 65536
    assert hist.percentile(indexed([1000] * 99 + [5000]), 0.5) == 1000


def test_scale_turns_ticks_into_units():
    ticks = [3000, 3000, 9000]
    histogram = indexed(ticks, unit="ns", scale=0.5)
    assert histogram["min"] == 1500
    assert hist.percentile(histogram, 0.5) == 1500
    assert hist.percentile(histogram, 1.0) == 4500
    assert hist.mean(histogram) == 2500


def test_unbucketed_values_count_but_have_no_bucket():
    histogram = indexed([5, 6])
    histogram |= {"count": 3, "max": 900, "unbucketed": 1}
    assert hist.percentile(histogram, 0.3) == 5
    assert hist.percentile(histogram, 0.5) == 6
    assert hist.percentile(histogram, 0.99) == 900


@settings(max_examples=100, deadline=None)
@given(st.lists(values_strategy, min_size=1, max_size=4), fractions)
def test_merge_of_one_scale_is_the_histogram_of_every_value(parts, fraction):
    merged = hist.merge(indexed(part) for part in parts)
    everything = [value for part in parts for value in part]
    assert merged == indexed(everything)
    assert hist.percentile(merged, fraction) == hist.percentile(indexed(everything), fraction)


@settings(max_examples=100, deadline=None)
@given(values_strategy, values_strategy, fractions)
def test_merge_of_scales_that_differ_stays_within_one_percent(first, second, fraction):
    # Two processes measure one clock at slightly different rates.
    merged = hist.merge([indexed(first, "ns", 0.3333), indexed(second, "ns", 0.3334)])
    assert "scale" not in merged and merged["sub_buckets"] == SUB_BUCKETS
    true = exact_percentile([v * 0.3333 for v in first] + [v * 0.3334 for v in second], fraction)
    got = hist.percentile(merged, fraction)
    assert true * (1 - 1 / SUB_BUCKETS) * (1 - 1e-9) <= got <= true * (1 + 1e-9)


def test_empty_histograms_merge_and_report_nothing():
    merged = hist.merge([indexed([]), indexed([])])
    assert merged["count"] == 0 and merged["buckets"] == []
    assert hist.percentile(merged, 0.5) is None
    assert hist.mean(merged) is None


def test_an_empty_histogram_of_another_scale_does_not_force_ranges():
    merged = hist.merge([indexed([10, 20], "ns", 0.5), indexed([], "ns", 0.25)])
    assert merged == indexed([10, 20], "ns", 0.5)


# ---- the old ranged encoding (traces written before the indexed one) ----


def test_percentile_of_an_empty_histogram_is_none():
    assert hist.percentile(make_hist([]), 0.5) is None
    assert hist.mean(make_hist([])) is None


def test_exact_buckets_give_exact_values():
    values = [1, 1, 2, 3]
    assert hist.percentile(make_hist(values), 0.5) == 1
    assert hist.percentile(make_hist(values), 0.75) == 2
    assert hist.percentile(make_hist(values), 0.99) == 3


def test_interpolates_linearly_inside_a_wide_bucket():
    # rank 2 of 4 values in [16, 20) lies halfway through the bucket.
    assert hist.percentile(ranged([[16, 20, 4]], 16, 19), 0.5) == 18


def test_walks_cumulative_counts_across_buckets():
    buckets = [[1, 2, 90], [100, 120, 10]]
    assert hist.percentile(ranged(buckets, 1, 119), 0.5) == 1
    # rank 99 is the 9th of the 10 values in [100, 120).
    assert hist.percentile(ranged(buckets, 1, 119), 0.99) == pytest.approx(118)


def test_result_is_clamped_to_min_and_max():
    assert hist.percentile(ranged([[1024, 1280, 1]], 1100, 1100), 0.5) == 1100
    assert hist.percentile(ranged([[1024, 1280, 3]], 1030, 1100), 0.99) == 1100
    assert hist.percentile(ranged([[1024, 1280, 3]], 1030, 1100), 0.0) == 1030


def test_mean_is_sum_over_count():
    assert hist.mean(make_hist([10, 20, 60])) == 30


def test_merge_adds_buckets_counts_and_sums_and_keeps_extremes():
    merged = hist.merge([make_hist([1, 100]), make_hist([1, 5000]), make_hist([])])
    assert merged["count"] == 4
    assert merged["sum"] == 5102
    assert merged["min"] == 1
    assert merged["max"] == 5000
    assert merged["buckets"] == [[1, 2, 2], [96, 112, 1], [4096, 5120, 1]]
    assert merged == make_hist([1, 1, 100, 5000])


def test_merge_of_old_and_new_encodings_is_ranged_and_interpolated():
    merged = hist.merge([make_hist([100]), indexed([1000])])
    assert merged["buckets"] == [[96, 112, 1], [1000, 1004, 1]]
    assert "sub_buckets" not in merged
    # Interpolated the old way: the one value of [96, 112) is placed at its top.
    assert hist.percentile(merged, 0.5) == 112


def test_merge_refuses_mixed_units():
    with pytest.raises(ValueError, match="units"):
        hist.merge([make_hist([1], unit="bytes"), make_hist([1], unit="ns")])
