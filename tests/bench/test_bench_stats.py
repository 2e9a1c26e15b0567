"""The statistics and the TCP arithmetic of tcpadvise bench, on known numbers."""

import pytest
from tcpadvise.bench.stats import (
    after_warmup,
    interval_rates_mbit_s,
    segment_penalties,
    summarize,
)
from tcpadvise.bench.suites import Pingpong, Settings, tail_waits_for_delayed_ack


def test_warmup_rounds_are_dropped():
    assert after_warmup([900, 800, 10, 11, 12], 2) == [10, 11, 12]
    assert after_warmup([10, 11], 0) == [10, 11]


def test_stream_intervals_before_the_warmup_are_dropped():
    # (ns since the hello, bytes so far): 160 Mbit/s while warming up, then 200 Mbit/s.
    ticks = [
        [50_000_000, 1_000_000],
        [100_000_000, 2_000_000],
        [150_000_000, 3_250_000],
        [200_000_000, 4_500_000],
    ]
    assert interval_rates_mbit_s(ticks, warmup_ns=100_000_000) == pytest.approx([200, 200])
    assert interval_rates_mbit_s(ticks, warmup_ns=0) == pytest.approx([160, 200, 200])


def test_summary_counts_and_percentiles():
    summary = summarize([[5.0] * 10, [5.0] * 10])
    assert (summary.count, summary.runs, summary.minimum, summary.median, summary.p99) == (20, 2, 5, 5, 5)
    assert (summary.ci_low, summary.ci_high) == (5, 5)
    assert summary.run_medians == (5, 5)


def test_nothing_measured_is_no_summary():
    assert summarize([]) is None
    assert summarize([[], []]) is None


def test_median_ci_of_one_run_is_about_the_order_statistic_interval():
    # 1..1000: the distribution-free 95% interval of the median is the 469th to the 532nd value.
    summary = summarize([list(range(1, 1001))])
    assert summary.median == 500.5
    assert 455 < summary.ci_low < 485 and 515 < summary.ci_high < 545


def test_median_ci_widens_when_runs_disagree():
    summary = summarize([list(range(1, 101)), list(range(101, 201))])
    assert summary.median == 100.5
    assert summary.ci_low < 60 and summary.ci_high > 140
    assert summary.run_medians == (50.5, 150.5)


def test_median_ci_is_reproducible_and_takes_runs_of_unequal_length():
    runs = [[1.0, 2, 3], [10.0, 11, 12, 13]]
    assert summarize(runs) == summarize(runs)
    summary = summarize(runs)
    assert summary.count == 7 and summary.median == 10
    assert 1 <= summary.ci_low <= summary.median <= summary.ci_high <= 13


def test_segment_penalties_as_the_seed_summary():
    # Seed 000's wired LAN: +30% to fill a packet, +30% for a second, +60% for a fourth.
    minimum_us = {1: 100, 1001: 110, 1448: 130, 1449: 130, 2001: 131, 4345: 160, 4401: 161}
    assert segment_penalties(minimum_us, mss=1448) == pytest.approx(
        {"fill": 0.3, "second": 0.3, "fourth": 0.6}
    )


def test_segment_penalties_from_a_sweep_inside_one_segment():
    assert segment_penalties({1: 4.0, 5001: 5.0, 9901: 6.0}, mss=65483) == {
        "fill": 0.5,
        "second": None,
        "fourth": None,
    }
    with pytest.raises(ValueError):
        segment_penalties({2: 1.0}, mss=1448)


@pytest.mark.parametrize(
    ("first_write", "waits"),
    [
        (508, True),
        (2044, False),
        (2896, False),
        (3996, True),
        (4092, True),
        (4948, False),
        (7996, False),
        (8188, False),
        (8956, True),
    ],
)
def test_tail_waits_when_a_partial_segment_follows_an_even_number_of_full_ones(first_write, waits):
    assert tail_waits_for_delayed_ack(first_write, mss=1448) is waits


def test_pingpong_analysis_leaves_the_warmup_out():
    labels = Pingpong().labels()

    def point(label, index):
        size = {"mss": 1448, "mss+1": 1449, "3*mss+1": 4345}.get(label) or int(label)
        # Three warm-up rounds of a full second, then 10 us plus a microsecond per point.
        rounds = [1e9] * 3 + [10_000 + 1_000 * index] * 4
        return {
            "request_bytes": size,
            "writes": 1,
            "mss": 1448,
            "warmup": 3,
            "round_ns": rounds,
            "data_segs_out": 4 * (size // 1448 + 1),
            "total_retrans": 0,
        }

    document = {"near": {"points": [point(label, index) for index, label in enumerate(labels)]}, "far": {}}
    result = Pingpong().analyze({"pingpong": [document, document]}, Settings(), None)
    first = result["points"][0]
    assert first["round_trip_us"]["count"] == 8
    assert first["round_trip_us"]["minimum"] == first["round_trip_us"]["p99"] == 10
    assert result["mss"] == 1448
    by_label = {p["label"]: p for p in result["points"]}
    assert by_label["mss+1"]["segments_per_round"] == 2
    assert result["penalties"]["minimum"]["second"] == pytest.approx(
        by_label["mss+1"]["round_trip_us"]["median"] / 10 - 1
    )
