import pytest

from tcpadvise import hist

from .conftest import make_hist


def histogram(buckets, minimum, maximum, unit="bytes"):
    return {
        "unit": unit,
        "count": sum(count for _, _, count in buckets),
        "sum": 0,
        "min": minimum,
        "max": maximum,
        "buckets": buckets,
    }


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
    assert hist.percentile(histogram([[16, 20, 4]], 16, 19), 0.5) == 18


def test_walks_cumulative_counts_across_buckets():
    buckets = [[1, 2, 90], [100, 120, 10]]
    assert hist.percentile(histogram(buckets, 1, 119), 0.5) == 1
    # rank 99 is the 9th of the 10 values in [100, 120).
    assert hist.percentile(histogram(buckets, 1, 119), 0.99) == pytest.approx(118)


def test_result_is_clamped_to_min_and_max():
    assert hist.percentile(histogram([[1024, 1280, 1]], 1100, 1100), 0.5) == 1100
    assert hist.percentile(histogram([[1024, 1280, 3]], 1030, 1100), 0.99) == 1100
    assert hist.percentile(histogram([[1024, 1280, 3]], 1030, 1100), 0.0) == 1030


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


def test_merge_of_empty_histograms_is_empty():
    merged = hist.merge([make_hist([]), make_hist([])])
    assert merged["count"] == 0
    assert hist.percentile(merged, 0.5) is None


def test_merge_refuses_mixed_units():
    with pytest.raises(ValueError, match="units"):
        hist.merge([make_hist([1], unit="bytes"), make_hist([1], unit="ns")])
