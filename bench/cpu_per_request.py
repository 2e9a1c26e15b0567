#!/usr/bin/env python3
"""cpu_per_request: one server's CPU time per request under two builds of the shim, arms interleaved.

`tcpadvise bench servers` measures every server and policy under one shim; this compares two shims
(a change against main) on one server: each round runs, in a shuffled order, the server under no
shim and under each build's observe and cork, and each figure is read paired, against the round's
no-shim run (the CPU time of the server's cgroup over the requests the client made). Needs the
cgroup accounting `bench servers` uses (root, or a delegated cgroup).

    PYTHONPATH=advisor python3 bench/cpu_per_request.py --base main=/tmp/main/build/preload/libtcpadvise.so \\
        --new branch=build/preload/libtcpadvise.so [--server redis] [--rounds 11] [--seconds 2] [-o FILE.json]
"""

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

from tcpadvise.bench.cgroup import Hierarchy, cpu_accounting
from tcpadvise.bench.servers import SERVERS, ServerArm, run_server_arm
from tcpadvise.bench.suites import POLICIES


def named(text: str) -> tuple[str, Path]:
    name, _, path = text.rpartition("=")
    return name or Path(path).parent.name, Path(path).resolve()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=named, required=True)
    parser.add_argument("--new", type=named, required=True)
    parser.add_argument("--server", default="redis", choices=[server.name for server in SERVERS])
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: observe and cork")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    accounting = cpu_accounting()
    if not isinstance(accounting, Hierarchy):
        print(f"cpu_per_request: no CPU accounting here: {accounting}", file=sys.stderr)
        return 2
    server = next(server for server in SERVERS if server.name == args.server)
    policies = args.policy or ["observe", "cork"]
    arms = [("baseline", None, None)] + [(f"{build[0]}:{policy}", build[1], policy)
                                         for policy in policies for build in (args.base, args.new)]
    runs: dict[str, list[float]] = {key: [] for key, _, _ in arms}
    paired: dict[str, list[float]] = {key: [] for key, _, _ in arms[1:]}
    with tempfile.TemporaryDirectory(prefix="cpu-per-request-") as scratch:
        for round_ in range(args.rounds):
            order = arms[:]
            random.shuffle(order)
            figures = {}
            for key, shim, policy in order:
                arm = ServerArm(key, server, POLICIES[policy] if policy else None, args.seconds, accounting)
                result = run_server_arm(arm, shim, Path(scratch))
                figures[key] = result["cpu_ns"] / result["requests"] / 1000
                runs[key].append(figures[key])
            for key in paired:
                paired[key].append(100 * figures[key] / figures["baseline"])
            print(f"round {round_ + 1}: " + ", ".join(f"{key} {value:.3f} us" for key, value in figures.items()),
                  file=sys.stderr)
    summary = {key: {"cpu_us_per_request_median": statistics.median(values), "min": min(values), "max": max(values),
                     **({"paired_pct_median": statistics.median(paired[key]), "paired_pct_min": min(paired[key]),
                         "paired_pct_max": max(paired[key])} if key in paired else {})}
               for key, values in runs.items()}
    print(f"| {server.name}, {args.rounds} rounds | CPU/request, median [min-max] | paired with no shim's run |")
    print("|---|---:|---:|")
    for key, row in summary.items():
        pair = (f"{row['paired_pct_median']:.1f}% [{row['paired_pct_min']:.1f}-{row['paired_pct_max']:.1f}]"
                if "paired_pct_median" in row else "")
        print(f"| {key} | {row['cpu_us_per_request_median']:.3f} us [{row['min']:.3f}-{row['max']:.3f}] | {pair} |")
    if args.output:
        args.output.write_text(json.dumps({"summary": summary, "runs": runs, "paired": paired}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
