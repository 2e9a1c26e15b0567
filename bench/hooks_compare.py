#!/usr/bin/env python3
"""Hot-path cost of two builds side by side: bench/hooks_bench.cc's stubbed
write and write+read benchmarks, runs of the two builds interleaved (A, B,
A, B, ...) so that the machine's drift hits both alike; medians and ranges
of CPU and wall time per call.

Writes bench/results/hooks-compare.{json,md}.

usage: bench/hooks_compare.py --base [NAME=]DIR [--build [NAME=]DIR] [--runs N] [--min-time SECONDS]
  (DIR: a build directory holding bench/hooks_bench, e.g. of a `git worktree`
   of the base commit; NAME labels it in the results)
"""
import argparse
import json
import pathlib
import statistics
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ["BM_Write_Stub_TrackedSocket", "BM_WriteRead_Stub_TrackedSocket"]


def run(build: str, min_time: float) -> dict:
    out = subprocess.run(
        [str(pathlib.Path(build) / "bench" / "hooks_bench"), f"--benchmark_filter=^({'|'.join(BENCHMARKS)})$",
         f"--benchmark_min_time={min_time}", "--benchmark_format=json"],
        capture_output=True, text=True, check=True).stdout
    return {b["name"]: (b["cpu_time"], b["real_time"]) for b in json.loads(out)["benchmarks"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True)
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--min-time", type=float, default=0.5)
    args = parser.parse_args()
    arms = dict(arg.split("=", 1) if "=" in arg else (default, arg)
                for default, arg in (("base", args.base), ("build", args.build)))
    samples = {arm: {name: [] for name in BENCHMARKS} for arm in arms}
    for _ in range(args.runs):
        for arm, build in arms.items():
            for name, times in run(build, args.min_time).items():
                samples[arm][name].append(times)
    rows = []
    for name in BENCHMARKS:
        for arm in arms:
            cpu = [c for c, _ in samples[arm][name]]
            wall = [w for _, w in samples[arm][name]]
            rows.append({"benchmark": name, "build": arm, "dir": arms[arm],
                         "cpu_ns_median": statistics.median(cpu), "cpu_ns_min": min(cpu), "cpu_ns_max": max(cpu),
                         "wall_ns_median": statistics.median(wall), "wall_ns_min": min(wall),
                         "wall_ns_max": max(wall)})
    out = REPO / "bench" / "results"
    (out / "hooks-compare.json").write_text(json.dumps({"runs": args.runs, "rows": rows}, indent=2) + "\n")
    lines = ["# Hot path, two builds side by side", "",
             f"`bench/hooks_compare.py`: {args.runs} interleaved runs of each build's `hooks_bench`; "
             "ns per call, median [min-max].", "",
             "| benchmark | build | CPU time | wall time |", "|---|---|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | {r['build']} | {r['cpu_ns_median']:.1f} "
                     f"[{r['cpu_ns_min']:.1f}-{r['cpu_ns_max']:.1f}] | {r['wall_ns_median']:.1f} "
                     f"[{r['wall_ns_min']:.1f}-{r['wall_ns_max']:.1f}] |")
    (out / "hooks-compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
