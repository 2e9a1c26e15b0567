"""Trace spools (libtcpadvise/trace_spool.h): the file a forking process's children append their final
traces to. Each committed record is read as a trace file of its own; a hostile or damaged spool is a
one-line warning (or, named on its own and not a spool, a one-line error), never a traceback."""

import json
import struct
import time

import pytest
from tcpadvise.errors import NotATraceError, UnknownSchemaError
from tcpadvise.trace import spool
from tcpadvise.trace.reader import load_inputs
from testlib import assert_one_line_error, invoke

from .conftest import make_trace, write_trace

CAPACITY = 1 << 20


def record(data: bytes, pid: int, committed: bool = True) -> bytes:
    state = b"CMIT" if committed else b"\0\0\0\0"
    body = b"\xffREC" + struct.pack("<I", len(data)) + state + struct.pack("<i", pid) + data
    return body + b"\0" * (-len(body) % 8)


def spool_bytes(*records: bytes, offset=None, capacity=CAPACITY, magic=b"TCPASPOL", version=1, size=None) -> bytes:
    body = b"".join(records)
    offset = 64 + len(body) if offset is None else offset
    header = struct.pack("<8sIIQQiIQQQ", magic, version, 64, capacity, offset, 1, 1 << 20, time.time_ns(),
                         capacity, 0)
    data = header + body
    size = capacity if size is None else size
    return data[:size] + b"\0" * max(0, size - len(data))


def trace_record(pid: int, **overrides) -> bytes:
    return record(json.dumps(make_trace(pid=pid, ppid=1, **overrides)).encode(), pid)


def test_each_committed_record_is_a_trace_named_after_the_spool_and_its_pid(tmp_path):
    path = tmp_path / "postgres.1.00112233aabbccdd.spool"
    path.write_bytes(spool_bytes(trace_record(11), trace_record(12), trace_record(13)))
    write_trace(tmp_path, make_trace(pid=1, ppid=0))  # the parent's own trace, a file
    inputs = load_inputs([tmp_path])
    assert sorted(trace.data["pid"] for trace in inputs.traces) == [1, 11, 12, 13]
    assert {str(trace.path) for trace in inputs.traces if trace.data["pid"] == 12} == {f"{path}#12"}
    assert inputs.warnings == []
    result = invoke("report", "--format", "json", tmp_path)
    assert result.exit_code == 0, result.output
    assert f"{path}#13" in json.loads(result.stdout)["traces"]


def test_an_uncommitted_record_and_garbage_are_skipped_with_one_warning(tmp_path):
    path = tmp_path / "server.1.0000000000000001.spool"
    torn = record(b'{"schema": "tcpadvise.tra', 21, committed=False)  # its process died copying it
    unwritten = b"\0" * 48  # a claim whose process died before its first word
    garbage = b"\x01\x02 not a record, not zeros \x03".ljust(32, b"\0")
    path.write_bytes(spool_bytes(trace_record(20), torn, unwritten, trace_record(22), garbage, trace_record(23)))
    inputs = load_inputs([tmp_path])
    assert sorted(trace.data["pid"] for trace in inputs.traces) == [20, 22, 23]
    assert inputs.warnings == [f"{path}: skipped 1 record(s) not committed (their process died, or was still, "
                               "writing them) and 1 stretch(es) of bytes that are no record"]
    assert inputs.damaged == [path]
    result = invoke("report", tmp_path)
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert "not committed" in result.output


def test_a_record_that_is_not_a_valid_trace_is_skipped_like_a_damaged_file(tmp_path):
    path = tmp_path / "server.1.0000000000000002.spool"
    bad = make_trace(pid=31)
    bad["sockets"] = "many"
    path.write_bytes(spool_bytes(trace_record(30), record(b"{not json", 32), record(json.dumps(bad).encode(), 31)))
    inputs = load_inputs([tmp_path])
    assert [trace.data["pid"] for trace in inputs.traces] == [30]
    assert len(inputs.warnings) == 2 and all(len(w.splitlines()) == 1 for w in inputs.warnings)
    assert inputs.warnings[0].startswith(f"skipped {path}#32: not JSON")
    assert inputs.warnings[1].startswith(f"skipped {path}#31: invalid")


@pytest.mark.parametrize("content, fragment", [
    (b"TCPASP", "less than a header"),
    (spool_bytes(magic=b"NOTASPOL"), "no TCPASPOL magic"),
])
def test_a_file_named_on_its_own_that_is_no_spool_is_a_one_line_error(tmp_path, content, fragment):
    path = tmp_path / "x.spool"
    path.write_bytes(content)
    assert_one_line_error(invoke("report", path), 2, fragment)
    with pytest.raises(NotATraceError):
        spool.read(path)


def test_an_unknown_version_is_a_one_line_error(tmp_path):
    path = tmp_path / "x.spool"
    path.write_bytes(spool_bytes(trace_record(5), version=9))
    with pytest.raises(UnknownSchemaError):
        spool.read(path)
    assert_one_line_error(invoke("report", path), 2, "unknown trace spool version 9")


def test_a_no_spool_among_traces_is_skipped_with_a_warning(tmp_path):
    write_trace(tmp_path, make_trace(pid=1))
    (tmp_path / "junk.spool").write_bytes(b"\0" * 100)
    inputs = load_inputs([tmp_path])
    assert [trace.data["pid"] for trace in inputs.traces] == [1]
    assert inputs.warnings == [f"skipped {tmp_path / 'junk.spool'}: not a tcpadvise trace spool"]


def test_huge_lengths_offsets_and_a_cut_short_file_read_in_bounded_time(tmp_path):
    path = tmp_path / "x.spool"
    huge = b"\xffREC" + struct.pack("<I", 0xFFFFFFF0) + b"CMIT" + struct.pack("<i", 7)
    good = trace_record(8)
    # The offset claims 2**63 bytes, the capacity 2**64 - 1, the file is 64 KiB: read to its end.
    path.write_bytes(spool_bytes(huge, good, offset=1 << 63, capacity=(1 << 64) - 1, size=65536))
    started = time.monotonic()
    found = spool.read(path)
    assert time.monotonic() - started < 2
    assert [r.pid for r in found.records] == [8]
    assert "1 stretch(es) of bytes that are no record" in found.problem
    # A spool cut short: what is there is read, the rest noted.
    first = trace_record(9)
    path.write_bytes(spool_bytes(first, trace_record(10))[:64 + len(first) + 100])
    found = spool.read(path)
    assert [r.pid for r in found.records] == [9]
    assert "cut short" in found.problem


def test_a_spool_over_the_size_bound_is_refused_unread(tmp_path):
    path = tmp_path / "x.spool"
    with open(path, "wb") as f:
        f.truncate(spool.SIZE_BOUND + 1)
    assert_one_line_error(invoke("report", path), 2, "over 256 MiB")


def test_an_empty_spool_holds_no_trace(tmp_path):
    (tmp_path / "x.spool").write_bytes(spool_bytes())
    write_trace(tmp_path, make_trace(pid=1))
    inputs = load_inputs([tmp_path])
    assert [trace.data["pid"] for trace in inputs.traces] == [1] and inputs.warnings == []
