#!/usr/bin/env python3
"""cpu_per_request: one server's CPU time per request under one or two builds of the shim, arms interleaved.

`tcpadvise bench servers` measures every server and policy under one shim; this compares two shims
(a change against main) on one server, or one shim's policies against no shim: each round runs, in a
shuffled order, the server under no shim and under each build's observe and cork, and each figure is
read paired, against the round's no-shim run (the CPU time of the server's cgroup over the requests the
client made). Needs the cgroup accounting `bench servers` uses (root, or a delegated cgroup).

--pin compares where the server and its client run, in the same rounds: none (where the scheduler puts
them), split (the server on the first CPU we may use, the client on the next) or same (both on the
first); --seconds compares the length of a run (a shorter run is a shorter segment between a run and
its paired baseline). Every combination of the two gets its own baseline in each round; the table gives
each arm's paired figure with its median, range, interquartile range and standard deviation (the paired
spread).

    PYTHONPATH=advisor python3 bench/cpu_per_request.py --base main=/tmp/main/build/preload/libtcpadvise.so \\
        [--new branch=build/preload/libtcpadvise.so] [--server redis] [--rounds 11] [--seconds 2[,0.5]] \\
        [--pin none[,split,same]] [-o FILE.json]
"""

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tcpadvise.bench.cgroup import Hierarchy, cpu_accounting
from tcpadvise.bench.servers import PINS, SERVERS, ServerArm, placement, run_server_arm
from tcpadvise.bench.suites import POLICIES

from fork_echo import ForkEcho

# The bench's servers, and the fork-per-connection server of bench/fork_echo.c.
CHOICES = (*SERVERS, ForkEcho())

def named(text: str) -> tuple[str, Path]:
    name, _, path = text.rpartition("=")
    return name or Path(path).parent.name, Path(path).resolve()


def setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not name.startswith("TCPADVISE_") or not equals:
        raise argparse.ArgumentTypeError(f"{text!r}: TCPADVISE_NAME=VALUE")
    return name, value


def listed(kind, choices=None):
    def parse(text: str) -> list:
        values = [kind(value) for value in text.split(",") if value]
        if not values or (choices and any(value not in choices for value in values)):
            raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list" +
                                             (f" of {', '.join(choices)}" if choices else ""))
        return values
    return parse


def spread(values: list[float]) -> dict:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "iqr": quartiles[2] - quartiles[0], "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=named, required=True)
    parser.add_argument("--new", type=named)
    parser.add_argument("--new-env", action="append", type=setting, default=[], metavar="TCPADVISE_NAME=VALUE",
                        help="a shim setting for the --new build only (TCPADVISE_CALL_SITES=off with --new the "
                             "same file as --base: what sampling call sites costs)")
    parser.add_argument("--env", action="append", type=setting, default=[], metavar="TCPADVISE_NAME=VALUE",
                        help="a shim setting for every build (TCPADVISE_INTERVAL=5, the default outside the bench, "
                             "which runs the shim at 0)")
    parser.add_argument("--server", default="redis", choices=[server.name for server in CHOICES])
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES), help="default: observe and cork")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--seconds", type=listed(float), default=[2.0], help="comma-separated: each is compared")
    parser.add_argument("--pin", type=listed(str, PINS), default=["none"],
                        help="comma-separated, of none, split, same: each is compared")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    if args.new_env and (not args.new or args.new[0] == args.base[0]):
        parser.error("--new-env needs a --new build with a label of its own (off=PATH)")
    accounting = cpu_accounting()
    if not isinstance(accounting, Hierarchy):
        print(f"cpu_per_request: no CPU accounting here: {accounting}", file=sys.stderr)
        return 2
    server = next(server for server in CHOICES if server.name == args.server)
    if why := server.missing():
        print(f"cpu_per_request: {server.name}: {why}", file=sys.stderr)
        return 2
    policies = args.policy or ["observe", "cork"]
    builds = [build for build in (args.base, args.new) if build]
    conditions = [f"{pin}@{seconds:g}s" for pin, seconds in itertools.product(args.pin, args.seconds)]
    shapes = {f"{pin}@{seconds:g}s": (pin, seconds) for pin, seconds in itertools.product(args.pin, args.seconds)}
    kinds = [("baseline", None, None)] + [(f"{build[0]}:{policy}", build[1], policy)
                                          for policy in policies for build in builds]
    settings = {f"{build[0]}:{policy}": (*args.env, *(args.new_env if build is args.new else ()))
                for policy in policies for build in builds}
    arms = [(condition, *kind) for condition in conditions for kind in kinds]
    runs: dict[str, list[float]] = {f"{condition} {key}": [] for condition, key, _, _ in arms}
    paired: dict[str, list[float]] = {f"{condition} {key}": [] for condition, key, _, _ in arms if key != "baseline"}
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cpu-per-request-") as scratch:
        for round_ in range(args.rounds):
            order = arms[:]
            random.shuffle(order)
            figures = {}
            for condition, key, shim, policy in order:
                pin, seconds = shapes[condition]
                server_cpus, client_cpus = placement(pin)
                arm = ServerArm(key, server, POLICIES[policy] if policy else None, seconds, accounting,
                                server_cpus, client_cpus, settings=settings.get(key, ()))
                result = run_server_arm(arm, shim, Path(scratch))
                name = f"{condition} {key}"
                figures[name] = result["cpu_ns"] / result["requests"] / 1000
                runs[name].append(figures[name])
            for name in paired:
                condition = name.split(" ")[0]
                paired[name].append(100 * figures[name] / figures[f"{condition} baseline"])
            loads.append(os.getloadavg()[0])
            print(f"round {round_ + 1} ({time.strftime('%H:%M:%S')}, load {loads[-1]:.2f}): "
                  + ", ".join(f"{name} {value:.3f} us" for name, value in sorted(figures.items())), file=sys.stderr)
    summary = {name: {"cpu_us_per_request": spread(values),
                      **({"paired_pct": spread(paired[name])} if name in paired else {})}
               for name, values in runs.items()}
    print(f"| {server.name}, {args.rounds} rounds, load average {min(loads):.1f}-{max(loads):.1f} "
          "| CPU/request, median [min-max] | paired with the no-shim run of its round and condition: "
          "median [min-max] | IQR | sd |")
    print("|---|---:|---:|---:|---:|")
    for name, row in summary.items():
        cpu, pair = row["cpu_us_per_request"], row.get("paired_pct")
        cells = (f"{pair['median']:.1f}% [{pair['min']:.1f}-{pair['max']:.1f}] | {pair['iqr']:.1f} | {pair['sd']:.1f}"
                 if pair else " | | ")
        print(f"| {name} | {cpu['median']:.3f} us [{cpu['min']:.3f}-{cpu['max']:.3f}] | {cells} |")
    if args.output:
        args.output.write_text(json.dumps({"server": server.name, "rounds": args.rounds, "load_average_1m": loads,
                                           "summary": summary, "runs": runs, "paired": paired}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
