#!/usr/bin/env python3
"""postmaster_layout: the mappings and written pages a fork-per-connection server's parent holds under
each shim (issue 16: what every fork and exit of a child pays for, which neither page faults nor
system calls count).

A fork copies the entry of each of the parent's mappings and written pages, and the child's exit
tears them down: about 1.7 us a mapping, 0.24 us a written page and 1.4 us a library's segment here
(bench/fork_child_costs.c, mode vmas). For each round this starts PostgreSQL as `tcpadvise bench
servers` does (observe, traces on tmpfs), once without the shim and once under each shim given, the
arms interleaved, makes `pgbench -C -S` connections, and reads the postmaster's /proc/PID/smaps:
its mappings, its anonymous memory (the pages written: private ones, and those still shared with
its background processes), and the shim's libraries' and libunwind's mappings. Counts, not times:
the load of a shared machine does not move them.

    PYTHONPATH=advisor python3 bench/postmaster_layout.py --shim build/preload/libtcpadvise.so \\
        [--shim OTHER/libtcpadvise.so ...] [--rounds 5] [--connections 20] [-o RESULTS.md]

Needs PostgreSQL (scripts/install-deps.sh) and the right to read the postmaster's smaps (root, or
the server's user).
"""

import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fork_server_cost import postgres_arms, postgres_rounds, report
from tcpadvise.bench import servers as S
from tcpadvise.bench.strace import listening_pids
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

_RANGE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ")


def layout(pid: int) -> dict:
    """The postmaster's mappings, anonymous kB, and libunwind's mappings, from its smaps."""
    mappings = anonymous = unwind = 0
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if _RANGE.match(line):
            mappings += 1
            unwind += "libunwind" in line
        elif line.startswith("Anonymous:"):
            anonymous += int(line.split()[1])
    return {"mappings": mappings, "anonymous_kb": anonymous, "libunwind_mappings": unwind}


def measure(server: S.Server, directory: Path, shim: Path | None, connections: int) -> dict:
    policy = POLICIES["observe" if shim is not None else "baseline"]
    with tempfile.TemporaryDirectory(prefix="traces-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as traces:
        Path(traces).chmod(0o777)  # written by a server that runs as another user
        with S.running(server, directory, policy, shim, Path(traces)) as port:
            subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n",
                            "-c", "1", "-t", str(connections), "postgres"], capture_output=True,
                           env=isolated_environment(), check=True, timeout=600)
            # The postmaster is the lowest pid listening (its backends are gone or forked after it).
            return layout(min(listening_pids(port)))


def render(results: dict[str, list[dict]], connections: int) -> str:
    lines = [f"The postmaster after {connections} `pgbench -C -S` connections ({len(next(iter(results.values())))} "
             "rounds, arms interleaved), median [lowest-highest]",
             "", "| arm | mappings | anonymous kB | libunwind's mappings |", "|---|---:|---:|---:|"]
    for arm, runs in results.items():
        cells = []
        for key in ("mappings", "anonymous_kb", "libunwind_mappings"):
            values = [run[key] for run in runs]
            cells.append(f"{statistics.median(values):g} [{min(values)}-{max(values)}]")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    args, server, arms = postgres_arms(__doc__, rounds=5, connections=20)
    results = postgres_rounds(args, server, arms, measure, "postmaster-layout-")
    return report(render(results, args.connections), args.output)


if __name__ == "__main__":
    sys.exit(main())
