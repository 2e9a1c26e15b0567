"""A sampled fork child's trace ("represents": N, trace/represents.py) read as N copies of it folded
together: whatever the report adds up across sockets is what N copies would add up to, and what it
averages or takes the maximum of is the child's own."""

import copy
import json
import mmap
import struct
import time
from pathlib import Path

import pytest
from tcpadvise.errors import NotATraceError
from tcpadvise.model.sockets import merge_sockets
from tcpadvise.trace import represents, spool
from tcpadvise.trace.reader import load_inputs

from .conftest import make_socket, make_trace, write_trace
from .test_spool import record

RECORDED = json.loads((Path(__file__).parent / "data" / "recorded-trace.json").read_text())
POLICY = {
    "name": "coalesce",
    "settings": {"coalesce": {"max_bytes": 16384, "max_delay_us": 1000, "enter_bursts": 2, "leave_bursts": 8}},
    "counters": {"flushes": {"wait": 3, "read": 2}, "bytes_held": 900, "max_bytes_held": 400,
                 "longest_hold_ns": 52000, "corks": 0,
                 "adaptive": {"bursts_passed_single_write": 4, "bursts_held_multi_write": 5,
                              "bursts_held_from_second_write": 1, "switches": 2},
                 "deferred_errors": {"EPIPE": 1}},
}

# CALL_SITES: a fork_echo child's, as the shim wrote it.
CALL_SITES = {
    "mode": "sample", "first": 4, "every": 1024, "every_max": 1024, "every_now": 1024, "slowdowns": 0,
    "budget_per_second": 500, "unwinder": "libunwind", "sampled_writes": 3, "dropped_writes": 0,
    "unwind_failures": 0, "left_to_tree": 0, "max_stacks": 512, "memory_bytes": 606208, "stack_bytes": 416,
    "modules": [{"path": "/usr/bin/fork_echo", "build_id": "3994aad065f29121ef73317fe163e28203f99a5e",
                 "base": 94416280043520}],
    "stacks": [{"frames": [[0, 6029], [0, 5591]], "writes": 3, "bytes": 192, "first_of_burst": 3,
                "estimated_writes": 3, "estimated_bytes": 192, "last_of_burst": 2, "alone_in_burst": 2,
                "sizes": {"unit": "bytes", "count": 3, "sum": 192, "min": 64, "max": 64, "sub_buckets": 128,
                          "scale": 1, "buckets": [[64, 3]]}}],
}


def child(times: int) -> dict:
    """recorded-trace.json as a fork child's, its sockets with tcp_info and a policy's counters."""
    trace = copy.deepcopy(RECORDED)
    for socket in trace["sockets"]:
        socket["tcp_info"] = {"samples": 1, "rtt_us": 40, "rttvar_us": 9, "snd_mss": 32768, "snd_cwnd": 10,
                              "total_retrans": 2, "segs_out": 12, "data_segs_out": 9, "busy_time_us": 70,
                              "rwnd_limited_us": 0, "sndbuf_limited_us": 0, "delivery_rate": 1000000}
        socket["policy"] = copy.deepcopy(POLICY)
        socket["call_sites"] = [{"stack": 0, "writes": 3, "bytes": 192, "first_of_burst": 3, "estimated_writes": 3,
                                 "estimated_bytes": 192}]
    trace["call_sites"] = copy.deepcopy(CALL_SITES)
    if times > 1:
        trace["represents"] = times
    return trace


@pytest.mark.parametrize("times", [2, 16, 64])
def test_the_sums_of_a_sampled_child_are_those_of_its_copies(times):
    data = child(times)
    scaled = represents.stand_for(data)
    other = make_socket()  # both sides then go through the same sums
    for index, socket in enumerate(data["sockets"]):
        assert merge_sockets([scaled["sockets"][index], other]) == merge_sockets([socket] * times + [other])
        assert scaled["sockets"][index]["connections"] == socket["connections"] * times
        assert scaled["sockets"][index]["duration_ns"] == socket["duration_ns"] * times


def test_averages_gauges_maxima_and_settings_stay_the_childs_own():
    data = child(16)
    scaled = represents.stand_for(data)
    socket, original = scaled["sockets"][0], data["sockets"][0]
    assert socket["tcp_info"] == {**original["tcp_info"], "samples": 16, "total_retrans": 32, "segs_out": 192,
                                  "data_segs_out": 144, "busy_time_us": 1120}
    counters = socket["policy"]["counters"]
    assert counters["max_bytes_held"] == 400 and counters["longest_hold_ns"] == 52000
    assert counters["bytes_held"] == 900 * 16 and counters["flushes"] == {"wait": 48, "read": 32}
    assert counters["adaptive"]["switches"] == 32 and counters["deferred_errors"] == {"EPIPE": 16}
    assert socket["policy"]["settings"] == original["policy"]["settings"]
    size = socket["writes"]["size"]
    assert (size["min"], size["max"]) == (original["writes"]["size"]["min"], original["writes"]["size"]["max"])
    assert size["count"] == 16 * original["writes"]["size"]["count"]
    for (bucket, count), (same, alone) in zip(size["buckets"], original["writes"]["size"]["buckets"]):
        assert bucket == same and count == 16 * alone
    # The stacks' counts too, not what says how they were taken.
    sites, kept = scaled["call_sites"], data["call_sites"]
    assert sites["sampled_writes"] == 16 * kept["sampled_writes"] and sites["every"] == kept["every"]
    assert [s["writes"] for s in sites["stacks"]] == [16 * s["writes"] for s in kept["stacks"]]
    assert [s["frames"] for s in sites["stacks"]] == [s["frames"] for s in kept["stacks"]]
    assert sites["stacks"][0]["sizes"]["buckets"] == [[64, 48]] and sites["stacks"][0]["sizes"]["max"] == 64
    assert socket["call_sites"] == [{"stack": 0, "writes": 48, "bytes": 3072, "first_of_burst": 48,
                                     "estimated_writes": 48, "estimated_bytes": 3072}]
    # The input is left as it was; a trace that stands for itself is itself.
    assert data == child(16)
    alone = child(1)
    assert represents.stand_for(alone) is alone


def v2_spool(*records: bytes, slots=()) -> bytes:
    """A version 2 spool: its header a page, the sample slots (key, seen, represented) after byte 64."""
    body = b"".join(records)
    header = struct.pack("<8sIIQQiIQQQ", b"TCPASPOL", 2, 4096, 1 << 20, 4096 + len(body), 1, 1 << 20,
                         time.time_ns(), 1 << 20, 0)
    table = b"".join(struct.pack("<IIII", key, seen, represented, 0) for key, seen, represented in slots)
    page = (header + table).ljust(4096, b"\0")
    return (page + body).ljust(1 << 20, b"\0")


def test_a_spools_sampled_records_are_read_as_the_children_they_stand_for(tmp_path):
    """The slot of redis clients' children (port 6379) counted 21 that asked, and the traces written
    stand for 18 (pids 11 and 12 for themselves, 30 for 16): the last 3 are added to the last one
    written, pid 12. A service none of whose traces is here (a server's on port 5432: 40 asked, 32
    stood for) leaves its 8 to one warning."""
    path = tmp_path / "postgres.1.00112233aabbccdd.spool"
    redis = 1 << 16 | 6379
    sampled = make_trace(pid=30, ppid=1, represents=16)
    path.write_bytes(v2_spool(record(json.dumps(make_trace(pid=11, ppid=1)).encode(), 11),
                              record(json.dumps(sampled).encode(), 30),
                              record(json.dumps(make_trace(pid=12, ppid=1)).encode(), 12),
                              slots=[(redis + 1, 21, 18), ((2 << 16 | 5432) + 1, 40, 32)]))
    write_trace(tmp_path, make_trace(pid=1, ppid=0))
    inputs = load_inputs([tmp_path])
    by_pid = {trace.data["pid"]: trace.data for trace in inputs.traces}
    one = make_socket()
    # The last record of the service stands for the 3 too.
    assert by_pid[12]["represents"] == 4 and by_pid[30]["represents"] == 16 and "represents" not in by_pid[11]
    assert by_pid[30]["sockets"][0]["connections"] == 16 * one["connections"]
    assert by_pid[30]["sockets"][0]["writes"]["calls"] == 16 * one["writes"]["calls"]
    assert by_pid[12]["sockets"][0]["writes"]["calls"] == 4 * one["writes"]["calls"]
    assert represents.processes(inputs.traces) == 1 + 1 + 16 + 4
    assert inputs.warnings == [
        f"{path}: 8 fork child(ren) of one connection are not counted: they wrote no trace, and no trace of "
        "their service was written to stand for them"]
    # Compact loading reads the same figures.
    compact = {trace.data["pid"]: trace for trace in load_inputs([tmp_path], compact=True).traces}
    assert list(compact[30].data["sockets"])[0]["writes"]["calls"] == 16 * one["writes"]["calls"]
    assert list(compact[12].data["sockets"])[0]["writes"]["calls"] == 4 * one["writes"]["calls"]


def test_a_v2_spool_whose_header_has_no_room_for_its_slots_is_no_spool(tmp_path):
    path = tmp_path / "x.spool"
    data = bytearray(v2_spool())
    struct.pack_into("<I", data, 12, 64)  # header bytes: the version 1 header's
    path.write_bytes(bytes(data))
    with pytest.raises(NotATraceError):
        spool.read(path)


def test_hostile_slot_counts_are_bounded():
    """Seen below represented counts none; every slot full is one pass over 128."""
    view = v2_spool(slots=[(1, 5, 9)] + [(key + 2, 0xFFFFFFFF, 0) for key in range(127)])
    with mmap.mmap(-1, len(view)) as mapped:
        mapped.write(view)
        assert spool._unrepresented(mapped) == {key + 1: 0xFFFFFFFF for key in range(127)}


@pytest.mark.parametrize("compact", [False, True])
def test_a_sampled_childs_trace_in_a_file_stands_for_its_siblings_too(tmp_path, compact):
    """A sampled child whose spool had no room writes its trace to a file, "represents" and all."""
    write_trace(tmp_path, make_trace(pid=7, ppid=1, represents=4))
    (trace,) = load_inputs([tmp_path], compact=compact).traces
    assert list(trace.data["sockets"])[0]["writes"]["calls"] == 4 * make_socket()["writes"]["calls"]
    assert represents.processes([trace]) == 4
