#!/usr/bin/env python3
"""Two builds of the shim side by side (a change against the commit before
it): hooks_bench's stubbed hot-path benchmarks (CPU and wall time per call)
and the burst client's round trip under observe and coalesce, the builds
alternating run by run (A, B, A, B, ...) so that the machine's drift hits
both alike. Reports each figure's median and range per build and the ratio
of medians; writes bench/results/<output>.{json,md} (compare-builds unless
--output says otherwise).

usage: bench/compare_builds.py --base [NAME=]DIR --new [NAME=]DIR [--runs N] [--rounds N]
                               [--min-time SECONDS] [--benchmarks REGEX] [--hooks-only]
                               [--output NAME]
  (DIR: a build directory holding bench/hooks_bench, preload/libtcpadvise.so
   and tests/progs/burst, e.g. of an export of the base commit; NAME labels
   it in the results. A base without one of the benchmarks has no figure
   for it: run the new bench/hooks_bench.cc in both builds to compare it.)
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = "Write_Stub_TrackedSocket$|WriteRead_Stub_TrackedSocket|CoalescedBurst"
# The client's own TCP_NODELAY under observe (else each round is a 40 ms
# delayed ACK); the plain client under coalesce.
POLICIES = {"observe": ["--nodelay"], "coalesce": []}


def hooks_bench(build, benchmarks, min_time):
    """{benchmark: (cpu ns, wall ns)} of one run of build's hooks_bench."""
    cmd = [str(build / "bench" / "hooks_bench"), f"--benchmark_filter={benchmarks}",
           f"--benchmark_min_time={min_time}", "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {b["name"].split("/")[0]: (b["cpu_time"], b["real_time"]) for b in json.loads(out)["benchmarks"]}


def burst_program(build):
    """The build's burst: in programs/, or tests/progs/ in a build from before it moved."""
    moved = build / "programs/burst"
    return str(moved if moved.is_file() else build / "tests/progs/burst")


def burst_round_us(build, policy, client_args, rounds):
    """The burst client's median round trip (us) under policy, server without the shim."""
    with tempfile.TemporaryDirectory() as tmp:
        config = pathlib.Path(tmp) / "policy.yaml"
        config.write_text(f"version: 1\nrules:\n  - policy: {policy}\n")
        server = subprocess.Popen([burst_program(build), "server", "--port", "0"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline().split()[1])
            env = {"LD_PRELOAD": str(build / "preload/libtcpadvise.so"), "TCPADVISE_OUT": tmp,
                   "TCPADVISE_CONFIG": str(config), "PATH": "/usr/bin:/bin"}
            cmd = [burst_program(build), "client", "--port", str(port), "--rounds", str(rounds),
                   *client_args]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=120)
        finally:
            server.terminate()
            server.wait(timeout=10)
    return json.loads(out.stdout.splitlines()[-1])["round_us_median"]


def labelled(arg, default):
    """NAME=DIR or DIR -> (name, path)."""
    name, _, path = arg.rpartition("=")
    return name or default, pathlib.Path(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, metavar="[NAME=]DIR")
    parser.add_argument("--new", required=True, metavar="[NAME=]DIR")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2000, help="burst rounds per run")
    parser.add_argument("--min-time", type=float, default=0.3, help="hooks_bench seconds per benchmark")
    parser.add_argument("--benchmarks", default=BENCHMARKS, help="hooks_bench filter (a regular expression)")
    parser.add_argument("--hooks-only", action="store_true", help="only the hooks_bench figures, no burst rounds")
    parser.add_argument("--output", default="compare-builds", help="results file name, without extension")
    args = parser.parse_args()
    builds = dict([labelled(args.base, "base"), labelled(args.new, "new")])
    if len(builds) != 2:
        parser.error("--base and --new need different names")
    (base_name, new_name) = builds
    samples = {name: {} for name in builds}
    for _ in range(args.runs):
        for name, build in builds.items():
            for key, (cpu, wall) in hooks_bench(build, args.benchmarks, args.min_time).items():
                samples[name].setdefault(f"hooks_bench {key} (cpu ns)", []).append(cpu)
                samples[name].setdefault(f"hooks_bench {key} (wall ns)", []).append(wall)
            if args.hooks_only:
                continue
            for policy, client_args in POLICIES.items():
                samples[name].setdefault(f"burst round, {policy} (us)", []).append(
                    burst_round_us(build, policy, client_args, args.rounds))
    rows = []
    for figure in samples[new_name]:
        base, new = samples[base_name].get(figure), samples[new_name][figure]
        rows.append({"figure": figure,
                     "base_median": statistics.median(base) if base else None,
                     "base_range": [min(base), max(base)] if base else None,
                     "new_median": statistics.median(new), "new_range": [min(new), max(new)],
                     "ratio": statistics.median(new) / statistics.median(base) if base else None})
    results = REPO / "bench" / "results"
    summary = {"runs": args.runs, "builds": {name: str(path) for name, path in builds.items()}, "rows": rows}
    (results / f"{args.output}.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [f"# Two builds side by side ({args.runs} alternating runs; median [min-max])", "",
             f"`bench/compare_builds.py`: {base_name} against {new_name}.", "",
             f"| figure | {base_name} | {new_name} | {new_name}/{base_name} |", "|---|---|---|---|"]
    for r in rows:
        base = (f"{r['base_median']:.1f} [{r['base_range'][0]:.1f}-{r['base_range'][1]:.1f}]"
                if r["base_median"] is not None else "-")
        new = f"{r['new_median']:.1f} [{r['new_range'][0]:.1f}-{r['new_range'][1]:.1f}]"
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        lines.append(f"| {r['figure']} | {base} | {new} | {ratio} |")
    (results / f"{args.output}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
