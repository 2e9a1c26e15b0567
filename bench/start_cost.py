#!/usr/bin/env python3
"""start_cost: what the shim adds to a process's start, with and without a
policy config: runs a program that opens no socket (/bin/true by default)
plainly, under the shim (observe) and under the shim with a policy config,
interleaved, and prints each arm's median wall time and its added cost.

  python3 bench/start_cost.py --build build [--runs 300] [--program /bin/true]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def arms(build, config):
    shim = str(Path(build).resolve() / "preload" / "libtcpadvise.so")
    plain = dict(os.environ)
    plain.pop("LD_PRELOAD", None)
    with_shim = {**plain, "LD_PRELOAD": shim, "TCPADVISE_OUT": tempfile.mkdtemp(prefix="start-cost-")}
    return {
        "plain": plain,
        "observe": with_shim,
        "policy": {**with_shim, "TCPADVISE_CONFIG": str(config)},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--program", default="/bin/true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "policy.yaml"
        config.write_text("version: 1\nrules:\n  - policy: cork\n")
        envs = arms(args.build, config)
        times = {name: [] for name in envs}
        for _ in range(args.runs):
            for name, env in envs.items():
                start = time.perf_counter()
                subprocess.run([args.program], env=env, check=True)
                times[name].append((time.perf_counter() - start) * 1e3)
    plain = statistics.median(times["plain"])
    print(f"{'arm':8} {'median ms':>10} {'p25':>7} {'p75':>7} {'added ms':>9}")
    for name, values in times.items():
        q = statistics.quantiles(values, n=4)
        print(f"{name:8} {statistics.median(values):10.3f} {q[0]:7.3f} {q[2]:7.3f} "
              f"{statistics.median(values) - plain:9.3f}")


if __name__ == "__main__":
    main()
