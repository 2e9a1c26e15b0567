#!/usr/bin/env python3
"""Whole-process cost of observing: a loopback request/response program run
with and without the shim, side by side.

Arms alternate run by run (plain, shim, plain, shim, ...) so that drift of
the machine hits both alike; the overhead is the median over the pairs (each
shim run against the plain run just before it) with a bootstrap 95%
confidence interval. Each run is `burst client` doing ROUNDS
request/response rounds (one 64-byte write, a 64-byte reply, TCP_NODELAY)
against `burst server`, both pinned to CPU 0; a run's figure is its median round trip. In the shim arm both processes run under the shim.
Prints a table and writes bench/results/observe-overhead.{json,md}.

With --call-sites the shim arm is three: call-site sampling off, sample (the
default) and all (every write's stack taken); the overheads are against the
plain run of the same pair, and the per-sampled-write cost is (all - off) per
round trip over its 2 writes (client's and server's, on the one CPU). Writes
bench/results/observe-overhead-call-sites.{json,md}.

usage: bench/observe_overhead.py [--build DIR] [--runs N] [--rounds N] [--call-sites]
"""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import tempfile

import numpy as np
from scipy import stats

REPO = pathlib.Path(__file__).resolve().parents[1]


def pinned(cpu, cmd):
    """Server and client share one CPU. Unpinned, a run's round trip swings
    between 5 and 70 us with where the scheduler puts the two processes;
    on separate CPUs the cross-CPU wake-up (about 70 us in this VM) hides the
    shim's cost. On one CPU a round trip is a few microseconds, so the
    comparison is the most sensitive one."""
    return ["taskset", "-c", str(cpu), *cmd]


def start_server(burst, env):
    proc = subprocess.Popen(pinned(0, [burst, "server", "--port", "0", "--writes", "1", "--size", "64", "--reply", "64"]),
                            stdout=subprocess.PIPE, env=env, text=True)
    port = int(proc.stdout.readline().split()[1])
    return proc, port


def run_once(burst, env, rounds):
    server, port = start_server(burst, env)
    try:
        out = subprocess.run(pinned(0, [burst, "client", "--port", str(port), "--rounds", str(rounds),
                                        "--writes", "1", "--size", "64", "--reply", "64", "--nodelay"]),
                             env=env, capture_output=True, text=True, check=True).stdout
    finally:
        server.terminate()
        server.wait()
    result = json.loads(out.splitlines()[-1])
    return result["round_us_median"]


def paired_overhead(plain, shim):
    """Median of the per-pair overheads (%) and its bootstrap 95% confidence
    interval: pairing cancels the machine's drift, which moves both arms."""
    pct = 100 * (np.array(shim) / np.array(plain) - 1)
    ci = stats.bootstrap((pct,), np.median, confidence_level=0.95, random_state=0).confidence_interval
    return float(np.median(pct)), [float(ci.low), float(ci.high)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--runs", type=int, default=40, help="runs per arm")
    parser.add_argument("--rounds", type=int, default=20000, help="round trips per run")
    parser.add_argument("--call-sites", action="store_true", help="shim arms with call-site sampling off, sample, all")
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    burst = str(build / "programs/burst")
    shim = str(build / "preload/libtcpadvise.so")
    plain_env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory() as out:
        shim_env = dict(plain_env, LD_PRELOAD=shim, TCPADVISE_OUT=out)
        envs = {"plain": plain_env, "shim": shim_env}
        if args.call_sites:
            del envs["shim"]
            for mode in ("off", "sample", "all"):
                envs[f"call-sites {mode}"] = dict(shim_env, TCPADVISE_CALL_SITES=mode)
        arms = {name: [] for name in envs}
        for i in range(args.runs):
            for name, env in envs.items():
                arms[name].append(run_once(burst, env, args.rounds))
                print(f"run {i + 1}/{args.runs} {name}: median round trip {arms[name][-1]:.2f} us", flush=True)
    summary = {}
    for name, runs in arms.items():
        summary[name] = {"runs": len(runs), "round_us_median_of_runs": statistics.median(runs),
                         "round_us_min_of_runs": min(runs),
                         "per_run_round_us": [round(r, 3) for r in runs]}
    if args.call_sites:
        write_call_site_results(args, summary, call_site_memory(burst, dict(plain_env, LD_PRELOAD=shim), args.rounds))
        return
    plain, shim_arm = summary["plain"], summary["shim"]
    paired_pct, paired_ci = paired_overhead(plain["per_run_round_us"], shim_arm["per_run_round_us"])
    overhead = {
        "paired_median_pct": paired_pct,
        "paired_ci95_pct": paired_ci,
        "median_pct": 100 * (shim_arm["round_us_median_of_runs"] / plain["round_us_median_of_runs"] - 1),
        "min_pct": 100 * (shim_arm["round_us_min_of_runs"] / plain["round_us_min_of_runs"] - 1),
    }
    result = {"benchmark": "observe-overhead", "rounds_per_run": args.rounds, "machine": platform.node(),
              "kernel": platform.release(), "cpus": os.cpu_count(), "arms": summary, "overhead": overhead}
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "observe-overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| arm | runs | round trip, median of runs (us) | best run (us) |", "|---|---|---|---|"]
    for name, s in summary.items():
        lines.append(f"| {name} | {s['runs']} | {s['round_us_median_of_runs']:.2f} | {s['round_us_min_of_runs']:.2f} |")
    lines.append("")
    lines.append(f"Shim overhead on the round trip: {paired_pct:+.2f}% (median of {args.runs} run pairs; 95% CI "
                 f"{paired_ci[0]:+.2f} to {paired_ci[1]:+.2f}%), {overhead['median_pct']:+.2f}% (medians of the arms), "
                 f"{overhead['min_pct']:+.2f}% (best runs). Kernel {platform.release()}, {os.cpu_count()} CPUs, "
                 f"{args.rounds} rounds per run.")
    table = "\n".join(lines)
    (results / "observe-overhead.md").write_text(table + "\n")
    print(table)


def call_site_memory(burst, env, rounds):
    """The call-site tables of one run with every write sampled: their fixed size (the cap), the
    bytes of one distinct stack, and how many stacks the client used."""
    with tempfile.TemporaryDirectory() as out:
        run_once(burst, dict(env, TCPADVISE_OUT=out, TCPADVISE_CALL_SITES="all"), rounds)
        traces = [json.loads(path.read_text()) for path in pathlib.Path(out).glob("burst.*.json")]
    info = max((t["call_sites"] for t in traces), key=lambda c: c.get("sampled_writes", 0))
    return {"memory_bytes": info["memory_bytes"], "max_stacks": info["max_stacks"],
            "stack_bytes": info.get("stack_bytes"), "stacks": len(info.get("stacks", []))}


def write_call_site_results(args, summary, memory):
    plain = summary["plain"]["per_run_round_us"]
    overhead = {}
    for name, s in summary.items():
        if name != "plain":
            pct, ci = paired_overhead(plain, s["per_run_round_us"])
            overhead[name] = {"paired_median_pct": pct, "paired_ci95_pct": ci}
    off, every = np.array(summary["call-sites off"]["per_run_round_us"]), np.array(summary["call-sites all"]["per_run_round_us"])
    per_write_ns = float(np.median(every - off)) * 1000 / 2
    result = {"benchmark": "observe-overhead-call-sites", "rounds_per_run": args.rounds, "machine": platform.node(),
              "kernel": platform.release(), "cpus": os.cpu_count(), "arms": summary, "overhead": overhead,
              "per_sampled_write_ns": per_write_ns, "memory": memory}
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "observe-overhead-call-sites.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["| arm | runs | round trip, median of runs (us) | overhead vs plain, paired median (95% CI) |",
             "|---|---|---|---|"]
    for name, s in summary.items():
        o = overhead.get(name)
        cell = f"{o['paired_median_pct']:+.2f}% ({o['paired_ci95_pct'][0]:+.2f} to {o['paired_ci95_pct'][1]:+.2f}%)" if o else ""
        lines.append(f"| {name} | {s['runs']} | {s['round_us_median_of_runs']:.2f} | {cell} |")
    lines.append("")
    lines.append(f"Per sampled write (all - off, paired median, 2 writes a round): {per_write_ns:.0f} ns. "
                 f"Kernel {platform.release()}, {os.cpu_count()} CPUs, {args.rounds} rounds per run.")
    lines.append(f"Memory: {memory['stack_bytes']} B per distinct stack; the tables are fixed at "
                 f"{memory['memory_bytes']} B of address space (cap {memory['max_stacks']} stacks), touched as used; "
                 f"this benchmark's processes used {memory['stacks']} stacks.")
    table = "\n".join(lines)
    (results / "observe-overhead-call-sites.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
