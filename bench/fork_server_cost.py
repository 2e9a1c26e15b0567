#!/usr/bin/env python3
"""fork_server_cost: the CPU time and page faults a forked PostgreSQL backend costs, per connection,
under each shim (issue 16: what the shim costs each process of a fork-per-connection server).

`pgbench -C -S` opens a connection per transaction, and PostgreSQL forks a backend for each: the
backend opens one TCP socket, answers a few requests, writes its trace and exits. For each round
this starts the server as `tcpadvise bench servers` does, traces on tmpfs (/dev/shm), once without
the shim and once under observe with each shim given, the arms interleaved round by round; it counts
the server's processes (the postmaster and every backend it forks) with `perf stat -e
task-clock,page-faults,raw_syscalls:sys_enter` while pgbench makes the connections, and divides by them. The table gives
the medians, [lowest-highest], and each shim's paired difference from the no-shim run of the same
round (median over rounds), which load that changes during the run moves less.

    PYTHONPATH=advisor python3 bench/fork_server_cost.py --shim build/preload/libtcpadvise.so \
        [--shim OTHER/libtcpadvise.so ...] [--rounds 11] [--connections 600] [-o RESULTS.md]

Needs perf and PostgreSQL (scripts/install-deps.sh); perf stat -p needs root or a permissive
kernel.perf_event_paranoid.
"""

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tcpadvise.bench import servers as S
from tcpadvise.bench.strace import listening_pids
from tcpadvise.bench.suites import POLICIES
from tcpadvise.record.shim import isolated_environment

# raw_syscalls:sys_enter counts the system calls (a tracepoint: the same few ns on each call in every arm).
EVENTS = ("task-clock", "page-faults", "raw_syscalls:sys_enter")


class PerfLost(Exception):
    """perf stat could not attach to every process it was given."""


def measure_again(server: S.Server, directory: Path, shim: Path | None, connections: int) -> dict:
    """measure, tried again (twice at most) when perf stat lost a process it was to attach to."""
    for _ in range(2):
        try:
            return measure(server, directory, shim, connections)
        except PerfLost:
            print("perf stat could not attach to every server process; measuring again", file=sys.stderr, flush=True)
    return measure(server, directory, shim, connections)


def measure(server: S.Server, directory: Path, shim: Path | None, connections: int) -> dict:
    """Per connection: the server's CPU time (ms), page faults and system calls, one run of pgbench -C -S."""
    policy = POLICIES["observe" if shim is not None else "baseline"]
    with tempfile.TemporaryDirectory(prefix="traces-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as traces:
        with S.running(server, directory, policy, shim, Path(traces)) as port:
            counts = Path(traces) / "perf.csv"
            perf = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "-o", str(counts), "-p",
                                     ",".join(map(str, listening_pids(port)))])
            time.sleep(0.5)  # perf attached
            subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n",
                            "-c", "2", "-t", str(connections // 2), "postgres"], capture_output=True,
                           env=isolated_environment(), check=True, timeout=600)
            time.sleep(0.3)  # the last backends exit
            perf.send_signal(signal.SIGINT)
            perf.wait()
            values = {}
            for line in counts.read_text().splitlines():
                fields = line.split(",")
                if len(fields) > 3 and fields[2] in EVENTS and fields[0][:1].isdigit():
                    values[fields[2]] = float(fields[0]) / connections
    if not values:
        # perf stat -p found a listening process gone (a backend of the readiness check): no counts.
        raise PerfLost("perf stat could not attach to every server process")
    if set(values) != set(EVENTS):
        raise RuntimeError(f"perf stat counted {sorted(values)}, not {list(EVENTS)}")
    return values


def render(results: dict[str, list[dict]], connections: int) -> str:
    base = [r["task-clock"] for r in results["no shim"]]
    lines = [f"Per connection, pgbench -C -S ({connections} connections a round, {len(base)} rounds, arms "
             "interleaved); CPU time of the server's processes (perf stat task-clock), median [lowest-highest]; "
             "the paired difference is each round's time minus the no-shim run's, median [lowest-highest]", "",
             "| arm | CPU ms | over no shim | paired difference, us | page faults | system calls |",
             "|---|---:|---:|---:|---:|---:|"]
    for arm, rows in results.items():
        times = [r["task-clock"] for r in rows]
        median = statistics.median(times)
        paired = sorted((t - b) * 1000 for t, b in zip(times, base))
        over = "" if arm == "no shim" else f"{100 * (median / statistics.median(base) - 1):+.1f}%"
        difference = "" if arm == "no shim" else f"{statistics.median(paired):.0f} [{paired[0]:.0f} to {paired[-1]:.0f}]"
        faults = statistics.median(r["page-faults"] for r in rows)
        calls = statistics.median(r["raw_syscalls:sys_enter"] for r in rows)
        lines.append(f"| {arm} | {median:.3f} [{min(times):.2f}-{max(times):.2f}] | {over} | {difference} | {faults:.0f} "
                     f"| {calls:.1f} |")
    return "\n".join(lines) + "\n"


def postgres_arms(description: str, rounds: int, connections: int):
    """The command line of the PostgreSQL benches (this one, postmaster_layout.py): their
    arguments, the server, and the arms: no shim, then each --shim under observe."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", type=Path, action="append", required=True,
                        help="a shim to measure under observe (repeat to compare builds)")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--connections", type=int, default=connections)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    server = next(s for s in S.SERVERS if s.name == "postgres")
    if server.missing():
        print(f"postgres: {server.missing()}", file=sys.stderr)
        raise SystemExit(2)
    for shim in args.shim:
        # The loader ignores a shim it cannot find: the arm would run without it.
        if not shim.is_file():
            parser.error(f"--shim {shim}: no such file")
    return args, server, {"no shim": None, **{str(shim): shim.resolve() for shim in args.shim}}


def postgres_rounds(args, server: S.Server, arms: dict, measure, prefix: str) -> dict[str, list[dict]]:
    """The PostgreSQL benches' rounds: each runs measure(server, directory, shim, connections) for every
    arm in turn, the server's directory prepared once in a scratch directory; the runs by arm."""
    results: dict[str, list[dict]] = {arm: [] for arm in arms}
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch:
        directory = S._prepared(server, Path(scratch))
        for round_number in range(1, args.rounds + 1):
            for arm, shim in arms.items():
                results[arm].append(measure(server, directory, shim, args.connections))
                figures = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                                    for k, v in results[arm][-1].items())
                print(f"round {round_number}: {arm}: {figures}", file=sys.stderr, flush=True)
    return results


def report(text: str, output: Path | None) -> int:
    """Print a bench's table, and write it to output if given."""
    print(text)
    if output:
        output.write_text(text)
    return 0


def main() -> int:
    args, server, arms = postgres_arms(__doc__, rounds=11, connections=600)
    results = postgres_rounds(args, server, arms, measure_again, "fork-server-cost-")
    return report(render(results, args.connections), args.output)


if __name__ == "__main__":
    sys.exit(main())
