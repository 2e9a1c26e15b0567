#!/usr/bin/env python3
"""server_instructions: the instructions a real server executes per request under each policy (issue 16).

Throughput on a shared 2-vCPU machine moves 5-15% from run to run; the goal (adaptive policies within
1% of no shim on one-write servers) is below that. The work each arm makes the server do is not: the
system calls (bench/server_syscalls.py) and, here, the user-space instructions. Each server of
`tcpadvise bench servers` runs under valgrind's callgrind (--trace-children, so a server started
through setpriv is counted too); after a warm-up load its counters are zeroed, a fixed load runs
(the requests server_syscalls.py sends), and the counts are dumped: instructions per request, summed
over the server's processes. Callgrind counts the program's own instructions and the shim's, not the
kernel's (the system calls are counted apart). A second table counts the shim's own code alone
(libtcpadvise.so, with what is inlined into it; not the libc calls it makes, nor libunwind's call-site
unwinding): the server's own count moves by several per cent between runs (its timers fire more often
the slower callgrind runs it), the shim's much less.

    PYTHONPATH=advisor python3 bench/server_instructions.py --shim build/preload/libtcpadvise.so \\
        [--server redis ...] [--arm observe ...] [-o bench/results/server-instructions.md]

Needs valgrind. memcached sets its open-file limit, soft and hard, to its -c (1024 by default) at
start; valgrind keeps the descriptors above the soft limit it was started with for itself, and refuses
("failed to set rlimit for open files") a hard limit other than that soft limit (with 20000:20000
here, -c 100, 1000 and 1024 all failed): so memcached runs under `prlimit --nofile=1024:` (soft 1024,
hard as it was), and its own setrlimit(1024, 1024) is the one valgrind accepts, with memcached's
arguments as the bench gives them. Left out by default: PostgreSQL (its background processes run on
timers, so their counts follow the wall time, which callgrind stretches differently per arm). The
shim's time histograms hold callgrind's stretched times, with more distinct buckets than a native run
has: its share is, if anything, overstated.
"""

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from server_syscalls import fixed_client, run, server_pids

from tcpadvise.bench import servers as S
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

_MEMCACHED_FILES = 1024
_SUMMARY = re.compile(r"^summary: (\d+)$", re.MULTILINE)


def measured_dumps(server: S.Server, policy: dict | None, shim: Path | None, scratch: Path,
                   options: Sequence[str] = (), settings: Sequence[tuple[str, str]] = ()) -> tuple[int, list[Path]]:
    """The server under callgrind (valgrind `options` added) and its fixed load, run twice: the requests
    of the second run and the dumps of what the server's processes ran during it (their counters zeroed
    after the warm-up; the parts written at exit, cg.PID, hold the start and the trace)."""
    directory = S._prepared(server, scratch)
    out = Path(tempfile.mkdtemp(prefix="callgrind-", dir=scratch))
    out.chmod(0o777)  # written by a server that runs as another user
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=directory))
    # memcached: see the docstring; _MEMCACHED_FILES is its default -c.
    limit = ["prlimit", f"--nofile={_MEMCACHED_FILES}:"] if server.name == "memcached" else []
    launcher = [*limit, "valgrind", "--tool=callgrind", *options, "--trace-children=yes",
                f"--callgrind-out-file={out}/cg.%p"]
    with S.running(server, directory, policy, shim if policy is not None else None, traces, launcher,
                   settings if policy is not None else ()) as port:
        command, requests_of = fixed_client(server, port)
        subprocess.run(command, capture_output=True, env=isolated_environment(), timeout=600)  # warm-up
        pids = server_pids(server, port)
        for pid in pids:
            subprocess.run(["callgrind_control", "--zero", str(pid)], capture_output=True, timeout=60, check=True)
        measured = subprocess.run(command, capture_output=True, text=True, env=isolated_environment(), timeout=600)
        for pid in pids:
            subprocess.run(["callgrind_control", "--dump", str(pid)], capture_output=True, timeout=60, check=True)
        time.sleep(0.5)
    return requests_of(measured.stdout), sorted(out.glob("cg.*.1"))


def count(server: S.Server, arm: str, shim: Path, scratch: Path) -> dict:
    requests, dumps = measured_dumps(server, POLICIES[arm], shim, scratch)
    texts = [dump.read_text() for dump in dumps]
    instructions = sum(int(_SUMMARY.search(text)[1]) for text in texts)
    objects: dict[str, int] = {}
    for text in texts:
        for name, row in by_object(text).items():
            objects[name] = objects.get(name, 0) + (row[0] if row else 0)
    shim_own = sum(n for name, n in objects.items() if Path(name).name == shim.name)
    return {"requests": requests, "instructions": instructions, "shim_instructions": shim_own,
            "processes": len(texts), "by_object": dict(sorted(objects.items(), key=lambda kv: -kv[1])[:8])}


def by_object(text: str) -> dict[str, list[int]]:
    """A callgrind dump's costs by the object of the function that ran them (inlined code counts for the
    function it is inlined into), one figure per event of its `events:` line, in that order: its cost
    lines, less the inclusive costs of calls."""
    names: dict[str, str] = {}
    totals: dict[str, list[int]] = {}
    current = "???"
    skip = False
    positions = 1  # "positions: line", or "instr line" with --dump-instr=yes
    for line in text.splitlines():
        if line.startswith("positions:"):
            positions = len(line.split()) - 1
        elif line.startswith(("ob=", "cob=")):  # a called function's object names its number too
            m = _COMPRESSED.match(line.split("=", 1)[1])
            if m[1] is not None and m[2]:
                names[m[1]] = m[2]
            if line.startswith("ob="):
                current = names.get(m[1], m[2]) if m[1] is not None else m[2]
        elif line.startswith("calls="):
            skip = True  # the next cost line is the call's inclusive cost
        elif line[:1].isdigit() or line[:1] in "+-*":
            if skip:
                skip = False
                continue
            # Callgrind leaves out an event's trailing zeros.
            values = [int(value) for value in line.split()[positions:]]
            row = totals.setdefault(current, [])
            row.extend([0] * (len(values) - len(row)))
            for i, value in enumerate(values):
                row[i] += value
    return totals


_COMPRESSED = re.compile(r"^(?:\((\d+)\))?\s*(.*)$")


def render(results: dict, arms: list[str]) -> str:
    return render_totals(results, arms) + "\n" + render_shim(results, arms)


def render_shim(results: dict, arms: list[str]) -> str:
    """The instructions in the shim's own code per request: what the shim adds, without the server's
    own work, which moves with callgrind's timing (its timers fire more often the slower it runs)."""
    arms = [arm for arm in arms if arm != "baseline"]
    lines = ["| shim's own instructions per request (libtcpadvise.so) | " + " | ".join(arms) + " |",
             "|---|" + "---:|" * len(arms)]
    for server in dict.fromkeys(key.split(":")[0] for key in results):
        cells = []
        for arm in arms:
            row = results.get(f"{server}:{arm}")
            cells.append(f"{row['shim_instructions'] / row['requests']:,.0f}" if row else "")
        lines.append(f"| {server} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_totals(results: dict, arms: list[str]) -> str:
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
    sys.exit(run(__doc__, count, render, default_servers=["redis", "nginx", "memcached"]))
