"""The export's histogram conversion and its command-line errors (the end-to-end runs with a
real Prometheus are in tests/e2e/test_openmetrics.py)."""
import socket

from hypothesis import given, settings
from hypothesis import strategies as st
from tcpadvise.model import hist
from tcpadvise.render.openmetrics import cumulative_buckets
from testlib import assert_one_line_error, invoke


def indexed(values, scale=1):
    """The shim's indexed encoding of whole recorded values (scale: units per recorded unit)."""
    counts = {}
    for value in values:
        counts[hist.bucket_of(value)] = counts.get(hist.bucket_of(value), 0) + 1
    return {"unit": "ns" if scale != 1 else "bytes", "count": len(values), "sum": sum(values) * scale,
            "min": min(values) * scale, "max": max(values) * scale, "sub_buckets": 128, "scale": scale,
            "buckets": [[index, count] for index, count in sorted(counts.items())]}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=200),
       st.sampled_from([1, 0.37, 2.5]))
def test_cumulative_counts_never_claim_a_value_above_its_le(values, scale):
    whole = scale == 1
    buckets = cumulative_buckets(indexed(values, scale), whole=whole)
    assert buckets[-1] == ("+Inf", len(values))
    les = [(float(le), count) for le, count in buckets[:-1]]
    assert [count for _, count in les] == sorted(count for _, count in les)
    for position, (le, count) in enumerate(les):
        # Never more than the values whose bucket lies at or below le (the values at or below it,
        # to the shim's resolution); at least those whose bucket lies at or below the le before it
        # (a fine bucket straddling an le is counted one step up).
        assert count <= sum(top(value, scale, values) <= le for value in values)
        assert count >= sum(value * scale <= le for value in values if top(value, scale, values) == value * scale)
        if position:
            assert count >= sum(top(value, scale, values) <= les[position - 1][0] for value in values)
    assert les[-1][1] == len(values)


def top(value, scale, values):
    """The largest value the bucket holding a recorded value can hold, in the histogram's unit
    (the exact max bounds it too)."""
    high = hist.bucket_high(hist.bucket_of(value), 128)
    return min(high - 1 if scale == 1 else high * scale, max(values) * scale)


def test_whole_units_land_on_their_own_le():
    # 8-byte writes are at or below le=8 exactly, not one step up.
    buckets = dict(cumulative_buckets(indexed([8] * 5), whole=True))
    assert buckets["8.0"] == 5 and buckets["7.0"] == 0


def test_bad_listen_and_busy_port_are_one_line_errors(tmp_path):
    assert_one_line_error(invoke("serve-metrics", "--listen", "nowhere", str(tmp_path)), 2, "expected ADDR:PORT")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_line_error(invoke("serve-metrics", "--listen", f"127.0.0.1:{port}", str(tmp_path)), 2,
                              "cannot listen")


def test_export_of_an_unknown_host_names_the_hosts_found(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text('{"schema": "tcpadvise.trace/1", "program": "p", "host": "web1", "pid": 1, "ppid": 0, '
                     '"start_unix_ns": 1, "written_unix_ns": 2, "final": true, "tsc_hz": 1e9, "sockets": [], '
                     '"shim_warnings": []}')
    assert_one_line_error(invoke("export", "--host", "db9", str(trace)), 2, "these traces are of: web1")
