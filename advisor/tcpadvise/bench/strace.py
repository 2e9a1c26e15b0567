"""Counting a running server's system calls, for the benchmarks and tests that compare arms by what
does not vary with the machine's load (bench/server_syscalls.py, tests/realprogs/test_adaptive_servers.py).

listening_pids finds the processes serving a port; counted_calls attaches `strace -f -c` to every
thread of them for the length of a block and gives each system call's count once the block is left.
"""

import contextlib
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

# A row of strace -c's table: % time, seconds, usecs/call, calls, [errors,] syscall.
_ROW = re.compile(r"^\s*[0-9.]+\s+[0-9.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def listening_pids(port: int) -> list[int]:
    """The processes listening on a local TCP port (nginx: its master and worker), by ss."""
    out = subprocess.run(["ss", "-Htlnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return sorted({int(pid) for pid in re.findall(r"pid=(\d+)", out)})


def _threads(pid: int) -> list[str]:
    """pid's threads ([] once it is gone: a PostgreSQL backend of a readiness probe)."""
    try:
        return sorted(path.name for path in Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return []


@contextlib.contextmanager
def counted_calls(pids: list[int], summary: Path) -> Iterator[dict[str, int]]:
    """strace -f -c attached to every thread of pids while the block runs (and their children
    forked meanwhile), its table written to summary; the dict it yields is filled with each
    system call's count when the block is left."""
    calls: dict[str, int] = {}
    attach = [arg for pid in pids for thread in _threads(pid) for arg in ("-p", thread)]
    tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(summary), *attach], stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # strace has attached
        yield calls
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    for line in summary.read_text().splitlines():
        row = _ROW.match(line)
        if row and row[2] != "total":
            calls[row[2]] = int(row[1])
