#!/usr/bin/env python3
"""Two builds of the shim side by side (a change against the commit before
it): hooks_bench's observe and coalesce benchmarks, and the burst client's
round trip under observe and coalesce, the builds alternating run by run.
Reports each figure's median and range per build and the ratio of medians;
writes bench/results/compare-builds.{json,md}.

usage: bench/compare_builds.py --base DIR --new DIR [--runs N]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = "Write_Stub_TrackedSocket|WriteRead_Stub_TrackedSocket|CoalescedBurst"
# The client's own TCP_NODELAY under observe (else each round is a 40 ms
# delayed ACK); the plain client under coalesce.
POLICIES = {"observe": ["--nodelay"], "coalesce": []}


def hooks_bench(build):
    cmd = [str(build / "bench" / "hooks_bench"), f"--benchmark_filter={BENCHMARKS}",
           "--benchmark_min_time=0.3", "--benchmark_format=json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {b["name"].split("/")[0]: b["cpu_time"] for b in json.loads(out)["benchmarks"]}


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=pathlib.Path, required=True)
    parser.add_argument("--new", type=pathlib.Path, required=True)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    samples = {"base": {}, "new": {}}
    for _ in range(args.runs):
        for name, build in (("base", args.base), ("new", args.new)):
            for key, value in hooks_bench(build).items():
                samples[name].setdefault(f"hooks_bench {key} (cpu ns)", []).append(value)
            for policy, client_args in POLICIES.items():
                samples[name].setdefault(f"burst round, {policy} (us)", []).append(
                    burst_round_us(build, policy, client_args, args.rounds))
    rows = []
    for figure in samples["base"]:
        base, new = samples["base"][figure], samples["new"][figure]
        rows.append({"figure": figure,
                     "base_median": statistics.median(base), "base_range": [min(base), max(base)],
                     "new_median": statistics.median(new), "new_range": [min(new), max(new)],
                     "ratio": statistics.median(new) / statistics.median(base)})
    results = REPO / "bench" / "results"
    summary = {"runs": args.runs, "rows": rows}
    (results / "compare-builds.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [f"# Two builds side by side ({args.runs} alternating runs; median [min-max])", "",
             "| figure | base | new | new/base |", "|---|---|---|---|"]
    for r in rows:
        base = f"{r['base_median']:.1f} [{r['base_range'][0]:.1f}-{r['base_range'][1]:.1f}]"
        new = f"{r['new_median']:.1f} [{r['new_range'][0]:.1f}-{r['new_range'][1]:.1f}]"
        lines.append(f"| {r['figure']} | {base} | {new} | {r['ratio']:.3f} |")
    (results / "compare-builds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
