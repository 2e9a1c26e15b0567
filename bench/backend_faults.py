#!/usr/bin/env python3
"""backend_faults: the page faults a fork-per-connection server's children take in the shim (issue 16), by
`perf record -e page-faults -c 1 -d` on a PostgreSQL postmaster (its children inherited) while
`pgbench -C -S` makes the connections, after 20 that warm the postmaster up. Counts, not times: the load
of a shared machine does not move them.

Before each run the shim's page cache is dropped (posix_fadvise DONTNEED), so that it is read back as at
a first start: the kernel maps a file's pages around a fault 64 KiB at a time, or a whole large folio
when one spans the fault, and the folios a `cp` leaves are not the readahead's. For each shim, per
connection: a child's faults in the shim's file (at any instruction: the loader's read of its symbol
hash too) with the pages they fall on (4 KiB, offset in the image it loads), a child's faults at the
shim's instructions, the postmaster's there, and all of a child's.

    PYTHONPATH=advisor python3 bench/backend_faults.py --shim build/preload/libtcpadvise.so \\
        [--shim OTHER/libtcpadvise.so ...] [--rounds 1] [--connections 100] [-o RESULTS.md]

Needs PostgreSQL (scripts/install-deps.sh), perf, and the right to record the server's processes.
"""

import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fork_server_cost import postgres_arms, postgres_rounds, report
from tcpadvise.bench import servers as S
from tcpadvise.bench.strace import listening_pids
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

# perf script -F pid,ip,sym,dso,addr: pid, the data address, its symbol (its object), the instruction, its
# symbol (its object).
_RECORD = re.compile(r"^\s*(\d+)\s+([0-9a-f]+)\s+.*?\s+\(([^()]*)\)\s+([0-9a-f]+)\s+.*\s+\(([^()]*)\)\s*$")


def pgbench(port: int, connections: int) -> None:
    subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n", "-c", "1",
                    "-t", str(connections), "postgres"], capture_output=True, env=isolated_environment(), check=True,
                   timeout=600)


def drop_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def measure(server: S.Server, directory: Path, shim: Path, connections: int) -> dict:
    drop_page_cache(shim)
    with tempfile.TemporaryDirectory(prefix="traces-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as traces, \
            tempfile.TemporaryDirectory(prefix="backend-faults-") as scratch:
        Path(traces).chmod(0o777)  # written by a server that runs as another user
        with S.running(server, directory, POLICIES["observe"], shim, Path(traces)) as port:
            pgbench(port, 20)
            postmaster = min(listening_pids(port))
            base = min(int(line.split("-")[0], 16) for line in Path(f"/proc/{postmaster}/maps").read_text().splitlines()
                       if line.endswith(str(shim)))
            data = Path(scratch) / "perf.data"
            record = subprocess.Popen(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-p",
                                       str(postmaster), "-o", str(data)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.5)  # perf attached
            pgbench(port, connections)
            record.send_signal(signal.SIGINT)
            record.wait(timeout=60)
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "pid,ip,sym,dso,addr"],
                                capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    pages = collections.Counter()
    for line in script.splitlines():
        found = _RECORD.match(line)
        if not found:
            continue
        who = "postmaster" if int(found[1]) == postmaster else "child"
        counts[f"{who} all"] += 1
        if found[5] == str(shim):
            counts[f"{who} at the shim"] += 1
        if who == "child" and found[3] == str(shim):
            counts["child in its file"] += 1
            pages[(int(found[2], 16) - base) >> 12] += 1
    result = {key: counts[key] / connections for key in
              ("child in its file", "child at the shim", "postmaster at the shim", "child all")}
    result["pages"] = {page: n / connections for page, n in sorted(pages.items()) if n / connections >= 0.05}
    return result


def render(results: dict[str, list[dict]], connections: int) -> str:
    lines = [f"Page faults a `pgbench -C -S` connection ({connections} after 20, perf record), each run's figure",
             "", "| arm | a child's in the shim's file | their pages (4 KiB, offset in its image) | a child's at the "
             "shim's instructions | the postmaster's there | all of a child's |", "|---|---:|---|---:|---:|---:|"]
    for arm, runs in results.items():
        cells = [", ".join(f"{run[key]:.2f}" for run in runs) for key in ("child in its file",)]
        cells.append("; ".join(" ".join(f"{page:#x}" for page in run["pages"]) for run in runs))
        cells += [", ".join(f"{run[key]:.2f}" for run in runs)
                  for key in ("child at the shim", "postmaster at the shim", "child all")]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    args, server, arms = postgres_arms(__doc__, rounds=1, connections=100)
    shims = {arm: shim for arm, shim in arms.items() if shim is not None}
    results = postgres_rounds(args, server, shims, measure, "backend-faults-")
    return report(render(results, args.connections), args.output)


if __name__ == "__main__":
    sys.exit(main())
