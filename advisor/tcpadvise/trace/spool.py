"""Read a trace spool: the file a process tree's fork children append their final traces to
(libtcpadvise/trace_spool.h has the format). The parent that forks them creates it in the trace
directory, <program>.<pid>.<nonce>.spool; each committed record is one child's trace, read as if it
were a file of its own named <spool>#<pid>.

A reader trusts nothing in it: the header's offset and capacity are bounded by the file's size, a
record's length by the shim's bound and by what is left; a record never committed (its process
died while copying it) is skipped by its length; bytes where a record should start that are not one
(zeros: a claim whose process died before it wrote a word, or that did not fit; anything else:
garbage) are skipped up to the next record's magic (ff 'R' 'E' 'C', a byte that no UTF-8 text
holds), at a multiple of 8. Time and memory are bounded by the file's size: it is mapped, not read,
and each record is copied once.
"""

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInputError, NotATraceError, UnknownSchemaError

SUFFIX = ".spool"
MAGIC = b"TCPASPOL"
# VERSIONS: 1, then 2 (session 17): the header a page, its sample slots after the first 64 bytes.
VERSIONS = (1, 2)
# HEADER: magic, version, header bytes, capacity, offset, owner pid, record bound, created unix ns,
# allocated, reserved.
HEADER = struct.Struct("<8sIIQQiIQQQ")
# SAMPLE_SLOT: a service's key + 1 (0: a free slot), its fork children that asked whether to write
# their trace, the children the traces written stand for (libtcpadvise/trace_spool.h).
SAMPLE_SLOT = struct.Struct("<IIII")
SAMPLE_SLOTS = 128
RECORD = struct.Struct("<4sIIi")  # magic, length, state, pid
RECORD_MAGIC = b"\xffREC"
COMMITTED = struct.unpack("<I", b"CMIT")[0]
# RECORD_BOUND: the shim's bound on a record (kSpoolRecordBound); a larger length is not the shim's.
RECORD_BOUND = 1 << 20
# SIZE_BOUND: four times the shim's capacity (64 MiB): a larger file is not one of its spools.
SIZE_BOUND = 256 << 20


@dataclass(frozen=True)
class Record:
    """One committed record: the trace's bytes, the pid the shim wrote beside them, where it starts."""

    pid: int
    offset: int
    data: bytes


@dataclass
class Spool:
    """A spool's committed records, and one line on what was skipped (None: nothing)."""

    records: list[Record]
    problem: str | None
    # unrepresented: by service key (sample_key), the fork children that wrote no trace (sampled,
    # TCPADVISE_CHILD_TRACES_EVERY) and that no written trace stands for: the last of a service's,
    # fewer than its EVERY, and a sampled child that died before its trace was written.
    unrepresented: dict[int, int] = field(default_factory=dict)


# ROLES: a role's number in a sample slot's key (the shim's Role).
ROLES = {"unknown": 0, "client": 1, "server": 2, "listener": 3}


def sample_key(trace: dict) -> int | None:
    """The sample slot key of a fork child's trace of one connection (the shim's ServiceKey: its
    role's number << 16 | its service port); None for any other trace."""
    sockets = trace["sockets"]
    if len(sockets) != 1 or sockets[0]["connections"] != 1 or sockets[0]["role"] not in ROLES:
        return None
    return ROLES[sockets[0]["role"]] << 16 | sockets[0].get("service_port", 0)


def is_spool(path: Path) -> bool:
    return path.suffix == SUFFIX


def records_in(directory: Path) -> int:
    """The committed records of every spool in directory (a count of the traces its fork children
    wrote, beside the *.json files)."""
    return sum(len(read(path).records) for path in sorted(directory.glob(f"*{SUFFIX}")))


def read(path: Path) -> Spool:
    """The records of the spool at path. NotATraceError: not a spool (too short, wrong magic, too
    large); UnknownSchemaError: a version this advisor does not know; BadInputError: unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as error:
        raise BadInputError(f"{path}: cannot read ({error.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        if size < HEADER.size:
            raise NotATraceError(f"{path}: not a tcpadvise trace spool ({size} bytes, less than a header)")
        if size > SIZE_BOUND:
            bound = SIZE_BOUND >> 20
            raise NotATraceError(f"{path}: not a tcpadvise trace spool ({size} bytes, over {bound} MiB)")
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as view:
            return _records(path, view, size)
    except OSError as error:
        raise BadInputError(f"{path}: cannot read ({error.strerror})") from None
    finally:
        os.close(fd)


def _records(path: Path, view: mmap.mmap, size: int) -> Spool:
    magic, version, header_bytes, capacity, offset, *_ = HEADER.unpack_from(view, 0)
    if magic != MAGIC:
        raise NotATraceError(f"{path}: not a tcpadvise trace spool (no {MAGIC.decode()} magic)")
    if version not in VERSIONS:
        known = " and ".join(str(known) for known in VERSIONS)
        raise UnknownSchemaError(f"{path}: unknown trace spool version {version}; this tcpadvise knows {known}")
    least = HEADER.size + (SAMPLE_SLOT.size * SAMPLE_SLOTS if version >= 2 else 0)
    if header_bytes < least or header_bytes % 8 or header_bytes > size:
        raise NotATraceError(f"{path}: not a tcpadvise trace spool (header of {header_bytes} bytes)")
    unrepresented = _unrepresented(view) if version >= 2 else {}
    end = min(offset, capacity, size)
    cut_short = size < min(offset, capacity)
    records, uncommitted, garbage = [], 0, 0
    at = header_bytes
    while at + RECORD.size <= end:
        record_magic, length, state, pid = RECORD.unpack_from(view, at)
        if record_magic == RECORD_MAGIC and length <= RECORD_BOUND and at + RECORD.size + length <= end:
            if state == COMMITTED:
                records.append(Record(pid, at, view[at + RECORD.size : at + RECORD.size + length]))
            else:
                uncommitted += 1
            at += (RECORD.size + length + 7) & ~7
            continue
        if record_magic == RECORD_MAGIC and length <= RECORD_BOUND and cut_short:
            break  # the file ends within this record
        # Not a record: skip to the next record's magic at a multiple of 8.
        following = _next_record(view, at + 8, end)
        if any(view[at:following]):  # not an unwritten claim (zeros)
            garbage += 1
        at = following
    skipped = []
    if uncommitted:
        skipped.append(
            f"{uncommitted} record(s) not committed (their process died, or was still, writing them)"
        )
    if garbage:
        skipped.append(f"{garbage} stretch(es) of bytes that are no record")
    if cut_short:
        skipped.append(f"the records past byte {size} (the file was cut short)")
    return Spool(records, f"{path}: skipped {' and '.join(skipped)}" if skipped else None, unrepresented)


def _unrepresented(view: mmap.mmap) -> dict[int, int]:
    """By service key, the children the sample slots counted that no written trace stands for."""
    found = {}
    for slot in range(SAMPLE_SLOTS):
        mark, seen, represented, _ = SAMPLE_SLOT.unpack_from(view, HEADER.size + slot * SAMPLE_SLOT.size)
        if mark and seen > represented:
            found[mark - 1] = found.get(mark - 1, 0) + seen - represented
    return found


def _next_record(view: mmap.mmap, start: int, end: int) -> int:
    """The first offset from start, a multiple of 8, where a record's magic is; end if none."""
    at = start
    while True:
        found = view.find(RECORD_MAGIC, at, end)
        if found < 0:
            return end
        if found % 8 == 0:
            return found
        at = found + 1
