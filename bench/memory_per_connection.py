#!/usr/bin/env python3
"""Memory the shim costs per open tracked connection.

A server (bench/conn_holder.c) accepts N loopback connections, serves
request/response rounds on each and holds them all open; its resident set
size (VmRSS) is read then. Workloads (--workloads):
  quiet   3 rounds of a 64-byte request and a 512-byte reply, then a read
          that meets EAGAIN: each histogram sees a bucket or two;
  busy    20 such rounds: the turn times spread over tens of buckets;
  varied  20 rounds whose requests (16 B-2 KiB) and replies (64 B-16 KiB)
          vary, log-uniform: the size histograms spread too. The same run is made without the shim and under it (and under any
other shim given with --compare, e.g. an older build), the arms interleaved
run by run; the clients never run under a shim. Per connection = (RSS under
the shim - RSS without) / N, summed over the server processes; each figure
is the median of --runs runs, with the lowest and highest run's marginal
figure beside it.

RLIMIT_NOFILE caps the fds of one process (its hard limit is 20000 on this
project's machines and cannot be raised there), so a count above
--per-process connections is split over several server processes, each with
its own client and source address 127.0.0.K (each source address has its own
28k ephemeral ports). The shim's state is per process, so the split does not
change what a connection costs; the shim's fixed cost per process (measured
with 0 connections) is reported, and subtracted in the "marginal" column.
Snapshots are set an hour apart so that a snapshot's buffer is not counted.

Writes bench/results/memory-per-connection.{json,md}.

usage: bench/memory_per_connection.py [--build DIR] [--counts 1000,10000,100000]
                                      [--workloads quiet,busy,varied]
                                      [--per-process N] [--runs N]
                                      [--compare NAME=PATH/libtcpadvise.so]
"""
import argparse
import json
import math
import os
import pathlib
import platform
import resource
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
# WORKLOADS: name -> (rounds per connection, conn_holder's SIZES).
WORKLOADS = {"quiet": (3, "fixed"), "busy": (20, "fixed"), "varied": (20, "varied")}


def rss_bytes(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def expect(proc: subprocess.Popen, prefix: str) -> str:
    line = proc.stdout.readline()
    if not line.startswith(prefix):
        raise RuntimeError(f"conn_holder said {line!r}, expected {prefix!r}: {proc.stderr.read()}")
    return line


def measure(holder: str, shim: str | None, count: int, per_process: int, workload: str, out_dir: str) -> int:
    """Summed VmRSS of the server processes holding count connections."""
    processes = max(1, math.ceil(count / per_process))
    rounds, sizes = WORKLOADS[workload]
    env = dict(os.environ, TCPADVISE_OUT=out_dir, TCPADVISE_INTERVAL="3600")
    env.pop("LD_PRELOAD", None)
    server_env = dict(env, LD_PRELOAD=shim) if shim else env
    started, servers = [], []
    try:
        for k in range(processes):
            n = count // processes + (1 if k < count % processes else 0)
            server = subprocess.Popen([holder, "server", "0", str(n), str(rounds), sizes], env=server_env, text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            started.append(server)
            port = int(expect(server, "listening").split()[1])
            client = subprocess.Popen([holder, "client", str(port), str(n), str(rounds), f"127.0.0.{k + 2}", sizes],
                                      env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            started.append(client)
            servers.append((server, client))
        total = 0
        for server, client in servers:
            expect(client, "ready")
            expect(server, "ready")
            total += rss_bytes(server.pid)
        return total
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
        # A shim that warned (a socket it could not track, a policy turned off) measured something
        # else: say so beside the run, whose figure the median may still keep.
        for server, _ in servers:
            said = [line for line in server.stderr.read().splitlines() if "tcpadvise" in line]
            if said:
                print(f"  (a server under {shim}, {count} {workload} connections: {said[0]})",
                      file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--counts", default="1000,10000,100000")
    parser.add_argument("--per-process", type=int, default=12500)
    parser.add_argument("--workloads", default="quiet,busy,varied", help=f"of {', '.join(WORKLOADS)}")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; the median is kept")
    parser.add_argument("--compare", action="append", default=[], metavar="NAME=SHIM",
                        help="another shim to measure beside this build's (e.g. base=../base/build/preload/libtcpadvise.so)")
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    holder = str(build / "bench" / "conn_holder")
    shims = {"shim": str(build / "preload" / "libtcpadvise.so")}
    shims.update(dict(item.split("=", 1) for item in args.compare))
    counts = [int(c) for c in args.counts.split(",")]
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]

    workloads = args.workloads.split(",")
    for workload in workloads:
        if workload not in WORKLOADS:
            parser.error(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")

    def interleaved_rss(count, workload="quiet"):
        """RSS without a shim and under each, the arms interleaved run by run."""
        runs = {name: [] for name in [None, *shims]}
        with tempfile.TemporaryDirectory() as out_dir:
            for _ in range(args.runs):
                runs[None].append(measure(holder, None, count, args.per_process, workload, out_dir))
                for name, path in shims.items():
                    runs[name].append(measure(holder, path, count, args.per_process, workload, out_dir))
        return runs

    idle = interleaved_rss(0)
    fixed = {name: statistics.median(idle[name]) - statistics.median(idle[None]) for name in shims}
    rows = []
    for count in counts:
        for workload in workloads:
            runs = interleaved_rss(count, workload)
            plain = statistics.median(runs[None])
            processes = max(1, math.ceil(count / args.per_process))
            for name in shims:
                under = statistics.median(runs[name])
                # Spread: each run's shim arm against the same run's plain arm.
                per_run = [(u - p - processes * fixed[name]) / count for u, p in zip(runs[name], runs[None])]
                row = {
                    "shim": name,
                    "workload": workload,
                    "rounds": WORKLOADS[workload][0],
                    "sizes": WORKLOADS[workload][1],
                    "connections": count,
                    "server_processes": processes,
                    "rss_plain_bytes": plain,
                    "rss_shim_bytes": under,
                    "per_connection_bytes": (under - plain) / count,
                    "marginal_per_connection_bytes": (under - plain - processes * fixed[name]) / count,
                    "marginal_per_run_bytes": per_run,
                    "rss_plain_per_run_bytes": runs[None],
                    "rss_shim_per_run_bytes": runs[name],
                }
                rows.append(row)
                print(f"{name:>6} {workload:>6} {count:>7} connections in {processes} process(es): "
                      f"{row['per_connection_bytes']:8.0f} B per connection "
                      f"({row['marginal_per_connection_bytes']:.0f} B marginal, runs {min(per_run):.0f}-"
                      f"{max(per_run):.0f})", flush=True)

    results = {
        "machine": {"cpus": os.cpu_count(), "kernel": platform.release(), "rlimit_nofile_hard": nofile},
        "workloads": {name: {"rounds": WORKLOADS[name][0], "sizes": WORKLOADS[name][1]} for name in workloads},
        "runs_per_figure": args.runs,
        "fixed_per_process_bytes": fixed,
        "rows": rows,
    }
    out = REPO / "bench" / "results"
    (out / "memory-per-connection.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Memory per open tracked connection",
        "",
        "`bench/memory_per_connection.py`: a server holding N open loopback connections, its VmRSS "
        "under the shim minus without, divided by N; median of "
        f"{args.runs} runs, the arms interleaved run by run; the spread is the marginal figure's lowest and "
        "highest run. Workloads: quiet = 3 rounds of a 64-byte request and a 512-byte reply, then a read "
        "meeting EAGAIN; busy = 20 such rounds; varied = 20 rounds of 16 B-2 KiB requests and 64 B-16 KiB "
        f"replies (log-uniform). Above {args.per_process} connections the server is split over several "
        f"processes (RLIMIT_NOFILE hard limit here: {nofile}).",
        "",
        "| shim | workload | connections | server processes | RSS without shim | RSS under shim | per connection "
        "| marginal | marginal, runs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['shim']} | {row['workload']} | {row['connections']} | {row['server_processes']} | "
            f"{row['rss_plain_bytes'] / 2**20:.1f} MiB | {row['rss_shim_bytes'] / 2**20:.1f} MiB | "
            f"{row['per_connection_bytes']:.0f} B | {row['marginal_per_connection_bytes']:.0f} B | "
            f"{min(row['marginal_per_run_bytes']):.0f}-{max(row['marginal_per_run_bytes']):.0f} B |")
    lines += ["", "Fixed cost of the shim per process (0 connections): "
              + ", ".join(f"{name} {value / 2**20:.2f} MiB" for name, value in fixed.items()), ""]
    (out / "memory-per-connection.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
