#!/usr/bin/env python3
"""start_cost: what the shim adds to the start of a process that opens no
socket (/bin/true by default), with and without a policy config.

Arms, interleaved run by run:
  plain               no shim
  observe             the shim, observing
  policy (YAML)       the shim with TCPADVISE_CONFIG naming a YAML config
  policy (compiled)   the same config compiled (tcpadvise config compile),
                      as tcpadvise record --policy hands it to its processes

With --baseline BUILD, the observe and compiled-policy arms of that build's
shim (another checkout's, say main's) run interleaved with the rest, each
with a config compiled by its own build.

Each run is one posix_spawn and wait of the program, timed from here; the
figures are each arm's median and quartiles, the median's excess over plain,
the median of the runs' excesses over the plain run of the same round (less
moved by the machine's load changing during the benchmark), and the median
of the child's minor page faults (wait4's rusage), which do not depend on how
busy the machine is. Writes
bench/results/start-cost.{json,md}.

  python3 bench/start_cost.py --build build [--baseline ../main/build] [--runs 1000] [--program /bin/true]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = "schema: https://tcpadvise.dev/schemas/config/1\nrules:\n  - policy: cork\n"


def shim_arms(build: Path, work: Path, suffix: str = "", yaml: bool = True) -> dict[str, dict[str, str]]:
    """The observe and policy arms of build's shim, each config compiled by build's own parser."""
    work.mkdir(exist_ok=True)
    yaml_config = work / "policy.yaml"
    yaml_config.write_text(CONFIG)
    compiled = work / "policy.compiled"
    with compiled.open("wb") as out:
        subprocess.run([str(build / "preload" / "tcpadvise-config-check"), "--compile", str(yaml_config)],
                       stdout=out, check=True)
    observe = {**plain_env(), "LD_PRELOAD": str(build / "preload" / "libtcpadvise.so"), "TCPADVISE_OUT": str(work)}
    arms = {f"observe{suffix}": observe}
    if yaml:
        arms[f"policy (YAML){suffix}"] = {**observe, "TCPADVISE_CONFIG": str(yaml_config)}
    arms[f"policy (compiled){suffix}"] = {**observe, "TCPADVISE_CONFIG": str(compiled)}
    return arms


def plain_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith(("LD_PRELOAD", "TCPADVISE_"))}


def run_once(program: str, env: dict[str, str]) -> tuple[float, int]:
    """Milliseconds from spawning program to reaping it, and its minor page faults."""
    start = time.perf_counter()
    pid = os.posix_spawn(program, [program], env)
    _, status, usage = os.wait4(pid, 0)
    elapsed = (time.perf_counter() - start) * 1e3
    if status != 0:
        raise SystemExit(f"{program} failed (wait status {status}) with {env.get('TCPADVISE_CONFIG', 'no config')}")
    return elapsed, usage.ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=REPO / "build")
    parser.add_argument("--baseline", type=Path, help="another build whose shim runs beside this one's")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--program", default="/bin/true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="start-cost.") as tmp:
        envs = {"plain": plain_env(), **shim_arms(args.build.resolve(), Path(tmp) / "build")}
        if args.baseline:
            envs.update(shim_arms(args.baseline.resolve(), Path(tmp) / "baseline", " [baseline]", yaml=False))
        times = {name: [] for name in envs}
        faults = {name: [] for name in envs}
        for _ in range(args.runs):
            for name, env in envs.items():
                elapsed, minflt = run_once(args.program, env)
                times[name].append(elapsed)
                faults[name].append(minflt)
    plain = statistics.median(times["plain"])
    rows = []
    for name, values in times.items():
        quartiles = statistics.quantiles(values, n=4)
        paired = [value - base for value, base in zip(values, times["plain"])]
        rows.append({"arm": name, "median_ms": statistics.median(values), "p25_ms": quartiles[0],
                     "p75_ms": quartiles[2], "added_ms": statistics.median(values) - plain,
                     "paired_added_ms": statistics.median(paired), "page_faults": statistics.median(faults[name])})
    results = {"benchmark": "start-cost", "program": args.program, "runs": args.runs, "host": platform.node(),
               "cpus": os.cpu_count(), "build": str(args.build),
               "baseline": str(args.baseline) if args.baseline else None, "rows": rows}
    out = REPO / "bench" / "results"
    (out / "start-cost.json").write_text(json.dumps(results, indent=2) + "\n")
    baseline = f" [baseline] is the shim of {args.baseline}." if args.baseline else ""
    lines = ["# Process start under the shim", "",
             (f"`bench/start_cost.py`: {args.program} spawned and reaped {args.runs} times per arm, arms interleaved; "
              "median and quartiles of the wall time, the median's excess over no shim (added), the median of "
              "each run's excess over the no-shim run of its round (paired), and the median of the process's minor "
              f"page faults.{baseline}"), "",
             "| arm | median | p25-p75 | added | paired | page faults |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {row['arm']} | {row['median_ms']:.3f} ms | {row['p25_ms']:.3f}-{row['p75_ms']:.3f} ms | "
              f"{row['added_ms']:+.3f} ms | {row['paired_added_ms']:+.3f} ms | {row['page_faults']:.0f} |"
              for row in rows]
    (out / "start-cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
