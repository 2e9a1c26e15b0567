import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tcpadvise.model import hist

from .conftest import make_hist, make_ranged_hist

SUB_BUCKETS = 128


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
    got = hist.percentile(make_hist(values), fraction)
    assert abs(got - true) <= true / SUB_BUCKETS
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
    assert hist.percentile(make_hist([128] * 100), 0.5) == 128
    assert hist.percentile(make_hist([65536] * 100), 0.5) == 65536
    assert hist.percentile(make_hist([1000] * 99 + [5000]), 0.5) == 1000


def test_a_bucket_of_one_distinct_value_reads_exactly_at_either_end():
    # 50000 and 80000 are no bucket's low edge; they are min and max.
    turns = make_hist([50_000, 80_000], unit="ns")
    assert hist.percentile(turns, 0.5) == 50_000
    assert hist.percentile(turns, 0.99) == 80_000
    assert hist.percentile(make_hist([1000, 80_000, 90_000]), 0.5) == 79_872  # a middle bucket: its low edge


def test_scale_turns_ticks_into_units():
    ticks = [3000, 3000, 9000]
    histogram = make_hist(ticks, unit="ns", scale=0.5)
    assert histogram["min"] == 1500
    assert hist.percentile(histogram, 0.5) == 1500
    assert hist.percentile(histogram, 1.0) == 4500
    assert hist.mean(histogram) == 2500


def test_unbucketed_values_count_but_have_no_bucket():
    histogram = make_hist([5, 6])
    histogram |= {"count": 3, "max": 900, "unbucketed": 1}
    assert hist.percentile(histogram, 0.3) == 5
    assert hist.percentile(histogram, 0.5) == 6
    assert hist.percentile(histogram, 0.99) == 900


@settings(max_examples=100, deadline=None)
@given(st.lists(values_strategy, min_size=1, max_size=4), fractions)
def test_merge_of_one_scale_is_the_histogram_of_every_value(parts, fraction):
    merged = hist.merge(make_hist(part) for part in parts)
    everything = [value for part in parts for value in part]
    assert merged == make_hist(everything)
    assert hist.percentile(merged, fraction) == hist.percentile(make_hist(everything), fraction)


@settings(max_examples=100, deadline=None)
@given(values_strategy, values_strategy, fractions)
def test_merge_of_scales_that_differ_stays_within_one_percent(first, second, fraction):
    # Two processes measure one clock at slightly different rates.
    merged = hist.merge([make_hist(first, "ns", 0.3333), make_hist(second, "ns", 0.3334)])
    assert "scale" not in merged and merged["sub_buckets"] == SUB_BUCKETS
    true = exact_percentile([v * 0.3333 for v in first] + [v * 0.3334 for v in second], fraction)
    got = hist.percentile(merged, fraction)
    assert abs(got - true) <= true / SUB_BUCKETS * (1 + 1e-9)


def test_empty_histograms_merge_and_report_nothing():
    merged = hist.merge([make_hist([]), make_hist([])])
    assert merged["count"] == 0 and merged["buckets"] == []
    assert hist.percentile(merged, 0.5) is None
    assert hist.mean(merged) is None


def test_an_empty_histogram_of_another_scale_does_not_force_ranges():
    merged = hist.merge([make_hist([10, 20], "ns", 0.5), make_hist([], "ns", 0.25)])
    assert merged == make_hist([10, 20], "ns", 0.5)


# ---- the old ranged encoding (traces written before the indexed one) ----


def test_percentile_of_an_empty_histogram_is_none():
    assert hist.percentile(make_ranged_hist([]), 0.5) is None
    assert hist.mean(make_ranged_hist([])) is None


def test_exact_buckets_give_exact_values():
    values = [1, 1, 2, 3]
    assert hist.percentile(make_ranged_hist(values), 0.5) == 1
    assert hist.percentile(make_ranged_hist(values), 0.75) == 2
    assert hist.percentile(make_ranged_hist(values), 0.99) == 3


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
    assert hist.mean(make_ranged_hist([10, 20, 60])) == 30


def test_merge_adds_buckets_counts_and_sums_and_keeps_extremes():
    merged = hist.merge([make_ranged_hist([1, 100]), make_ranged_hist([1, 5000]), make_ranged_hist([])])
    assert merged["count"] == 4
    assert merged["sum"] == 5102
    assert merged["min"] == 1
    assert merged["max"] == 5000
    assert merged["buckets"] == [[1, 2, 2], [96, 112, 1], [4096, 5120, 1]]
    assert merged == make_ranged_hist([1, 1, 100, 5000])


def test_merge_of_old_and_new_encodings_is_ranged_and_interpolated():
    merged = hist.merge([make_ranged_hist([100]), make_hist([1000])])
    assert merged["buckets"] == [[96, 112, 1], [1000, 1004, 1]]
    assert "sub_buckets" not in merged
    # Interpolated the old way: the one value of [96, 112) is placed at its top.
    assert hist.percentile(merged, 0.5) == 112


def test_merge_refuses_mixed_units():
    with pytest.raises(ValueError, match="units"):
        hist.merge([make_ranged_hist([1], unit="bytes"), make_ranged_hist([1], unit="ns")])
