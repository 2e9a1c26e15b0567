#!/usr/bin/env python3
"""server_instructions: the instructions a real server executes per request under each policy (issue 16).

Throughput on a shared 2-vCPU machine moves 5-15% from run to run; the goal (adaptive policies within
1% of no shim on one-write servers) is below that. The work each arm makes the server do is not: the
system calls (bench/server_syscalls.py) and, here, the user-space instructions. Each server of
`tcpadvise bench servers` runs under valgrind's callgrind (--trace-children, so a server started
through setpriv is counted too); after a warm-up load its counters are zeroed, a fixed load runs
(the requests server_syscalls.py sends), and the counts are dumped: instructions per request, summed
over the server's processes. Callgrind counts the program's own instructions and the shim's, not the
kernel's (the system calls are counted apart).

    PYTHONPATH=advisor python3 bench/server_instructions.py --shim build/preload/libtcpadvise.so \\
        [--server redis ...] [--arm observe ...] [-o bench/results/server-instructions.md]

Needs valgrind. Left out by default: memcached (it raises its open-file limit at start, which
valgrind refuses: "failed to set rlimit for open files") and PostgreSQL (its background processes run
on timers, so their counts follow the wall time, which callgrind stretches differently per arm). The
shim's time histograms hold callgrind's stretched times, with more distinct buckets than a native run
has: its share is, if anything, overstated.
"""

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server_syscalls import fixed_client, run, server_pids

from tcpadvise.bench import servers as S
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


def count(server: S.Server, arm: str, shim: Path, scratch: Path) -> dict:
    directory = S._prepared(server, scratch)
    policy = POLICIES[arm]
    out = Path(tempfile.mkdtemp(prefix="callgrind-", dir=scratch))
    out.chmod(0o777)  # written by a server that runs as another user
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=directory))
    launcher = ["valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={out}/cg.%p"]
    with S.running(server, directory, policy, shim if policy is not None else None, traces, launcher) as port:
        command, requests_of = fixed_client(server, port)
        subprocess.run(command, capture_output=True, env=isolated_environment(), timeout=600)  # warm-up
        pids = server_pids(server, port)
        for pid in pids:
            subprocess.run(["callgrind_control", "--zero", str(pid)], capture_output=True, timeout=60, check=True)
        measured = subprocess.run(command, capture_output=True, text=True, env=isolated_environment(), timeout=600)
        for pid in pids:
            subprocess.run(["callgrind_control", "--dump", str(pid)], capture_output=True, timeout=60, check=True)
        time.sleep(0.5)
    requests = requests_of(measured.stdout)
    # The dumps are cg.PID.1 (the parts written at exit, cg.PID, hold start-up and the trace).
    instructions = sum(int(_SUMMARY.search(dump.read_text())[1]) for dump in out.glob("cg.*.1"))
    return {"requests": requests, "instructions": instructions, "processes": len(pids)}


def render(results: dict, arms: list[str]) -> str:
    lines = ["| instructions per request (user space) | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]
    for server in dict.fromkeys(key.split(":")[0] for key in results):
        rows = [results.get(f"{server}:{arm}") for arm in arms]
        base = rows[0]["instructions"] / rows[0]["requests"] if rows[0] else None
        cells = []
        for row in rows:
            if row is None:
                cells.append("")
                continue
            per = row["instructions"] / row["requests"]
            cells.append(f"{per:,.0f}" + (f" ({100 * per / base:.1f}%)" if base and row is not rows[0] else ""))
        lines.append(f"| {server} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, count, render, default_servers=["redis", "nginx"]))
