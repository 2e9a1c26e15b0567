#!/usr/bin/env python3
"""server_syscalls: the system calls a real server makes per request under each policy (issue 16).

Throughput on a shared machine is noisy; a count of system calls is not. For each server of
`tcpadvise bench servers` (redis, memcached, nginx, PostgreSQL with pgbench -C) and each arm (no
shim, observe, adaptive cork and coalesce), this starts the server as the bench does, attaches
`strace -f -c` to every thread of it, sends a fixed number of requests with the usual client, and
divides each system call's count by the requests the client counted.

    PYTHONPATH=advisor python3 bench/server_syscalls.py --shim build/preload/libtcpadvise.so \
        [--server nginx ...] [--arm observe ...] [-o bench/results/server-syscalls.md]

Needs strace and root (ptrace of a server that runs as another user). Counts of the waits
(epoll_wait, poll) depend on timing; the per-connection and per-write calls do not.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tcpadvise.bench import servers as S
from tcpadvise.bench.strace import counted_calls, listening_pids
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

ARMS = ("baseline", "observe", "cork", "coalesce")


def fixed_client(server: S.Server, port: int) -> tuple[list[str], "callable"]:
    """A client command that sends a fixed load, and how to read the requests it made."""
    if server.name == "redis":
        n = 20000
        return (["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "4", "-n", str(n), "-t", "get",
                 "-q"], lambda out: n)
    if server.name == "memcached":
        # It sets each key once before it gets them: the sets are requests too (Memcached.requests).
        command = ["memcslap", f"--servers=127.0.0.1:{port}", "--concurrency=4", "--execute-number=5000",
                   "--test=get"]
        return command, lambda out: server.requests(out, command)
    if server.name == "nginx":
        return (["wrk", "-t1", "-c4", "-d2s", f"http://127.0.0.1:{port}/index.html"],
                lambda out: int(re.search(r"(\d+) requests in", out)[1]))
    if server.name == "postgres":
        n = 300
        return (["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n", "-c", "2",
                 "-t", str(n // 2), "postgres"], lambda out: n)
    raise ValueError(server.name)


def count(server: S.Server, arm: str, shim: Path, scratch: Path) -> dict:
    directory = S._prepared(server, scratch)
    policy = POLICIES[arm]
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=directory))
    with S.running(server, directory, policy, shim if policy is not None else None, traces) as port:
        with counted_calls(server_pids(server, port), directory / f"strace-{arm}.txt") as calls:
            command, requests_of = fixed_client(server, port)
            out = subprocess.run(command, capture_output=True, text=True, env=isolated_environment(),
                                 timeout=300)
    return {"requests": requests_of(out.stdout), "calls": calls}


def server_pids(server: S.Server, port: int) -> list[int]:
    """The processes listening on port (nginx: its master and worker)."""
    pids = listening_pids(port)
    if not pids:
        raise RuntimeError(f"{server.name}: no listener on {port}")
    return pids


def run(doc: str, count_arm, render_results, default_servers: list[str] | None = None) -> int:
    """The command line of this script and of server_instructions.py: count_arm(server, arm, shim,
    scratch) for each server and arm chosen, the table render_results(results, arms) makes, -o FILE."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", type=Path, required=True)
    parser.add_argument("--server", action="append", choices=[s.name for s in S.SERVERS])
    parser.add_argument("--arm", action="append", choices=ARMS)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    names = args.server or default_servers or [s.name for s in S.SERVERS]
    arms = args.arm or list(ARMS)
    results = {}
    with tempfile.TemporaryDirectory(prefix="server-counts-") as scratch:
        for server in (s for s in S.SERVERS if s.name in names):
            if server.missing():
                print(f"{server.name}: {server.missing()}", file=sys.stderr)
                continue
            for arm in arms:
                results[f"{server.name}:{arm}"] = count_arm(server, arm, args.shim.resolve(), Path(scratch))
                print(f"{server.name}:{arm} done", file=sys.stderr)
    text = render_results(results, arms)
    print(text)
    if args.output:
        args.output.write_text(text)
        args.output.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


def render(results: dict, arms: list[str]) -> str:
    lines = []
    for server in dict.fromkeys(key.split(":")[0] for key in results):
        rows = {arm: results[f"{server}:{arm}"] for arm in arms if f"{server}:{arm}" in results}
        names = sorted({name for r in rows.values() for name in r["calls"]},
                       key=lambda name: -max(r["calls"].get(name, 0) / r["requests"] for r in rows.values()))
        requests = ", ".join(f"{a} {r['requests']}" for a, r in rows.items())
        lines.append(f"\n{server}: system calls per request (requests: {requests})\n")
        lines.append("| syscall | " + " | ".join(rows) + " |")
        lines.append("|---|" + "---:|" * len(rows))
        totals = {a: sum(r["calls"].values()) / r["requests"] for a, r in rows.items()}
        lines.append("| **all** | " + " | ".join(f"**{totals[a]:.2f}**" for a in rows) + " |")
        for name in names:
            per = [r["calls"].get(name, 0) / r["requests"] for r in rows.values()]
            if max(per) < 0.005:
                continue
            lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in per) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(run(__doc__, count, render))
