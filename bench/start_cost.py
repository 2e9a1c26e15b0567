#!/usr/bin/env python3
"""start_cost: what the shim adds to the start of a process that opens no
socket (/bin/true by default), with and without a policy config.

Arms, interleaved run by run:
  plain               no shim
  observe             the shim, observing
  policy (YAML)       the shim with TCPADVISE_CONFIG naming a YAML config
  policy (compiled)   the same config compiled (tcpadvise config compile),
                      as tcpadvise record --policy hands it to its processes

Each run is one posix_spawn and wait of the program, timed from here; the
figures are each arm's median and quartiles, and the median's excess over
plain. Writes bench/results/start-cost.{json,md}.

  python3 bench/start_cost.py --build build [--runs 1000] [--program /bin/true]
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


def arms(build: Path, work: Path) -> dict[str, dict[str, str]]:
    yaml_config = work / "policy.yaml"
    yaml_config.write_text(CONFIG)
    compiled = work / "policy.compiled"
    with compiled.open("wb") as out:
        subprocess.run([str(build / "preload" / "tcpadvise-config-check"), "--compile", str(yaml_config)],
                       stdout=out, check=True)
    plain = {key: value for key, value in os.environ.items() if not key.startswith(("LD_PRELOAD", "TCPADVISE_"))}
    observe = {**plain, "LD_PRELOAD": str(build / "preload" / "libtcpadvise.so"), "TCPADVISE_OUT": str(work)}
    return {
        "plain": plain,
        "observe": observe,
        "policy (YAML)": {**observe, "TCPADVISE_CONFIG": str(yaml_config)},
        "policy (compiled)": {**observe, "TCPADVISE_CONFIG": str(compiled)},
    }


def run_once(program: str, env: dict[str, str]) -> float:
    """Milliseconds from spawning program to reaping it."""
    start = time.perf_counter()
    pid = os.posix_spawn(program, [program], env)
    _, status = os.waitpid(pid, 0)
    elapsed = (time.perf_counter() - start) * 1e3
    if status != 0:
        raise SystemExit(f"{program} failed (wait status {status}) with {env.get('TCPADVISE_CONFIG', 'no config')}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, default=REPO / "build")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--program", default="/bin/true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="start-cost.") as tmp:
        envs = arms(args.build.resolve(), Path(tmp))
        times = {name: [] for name in envs}
        for _ in range(args.runs):
            for name, env in envs.items():
                times[name].append(run_once(args.program, env))
    plain = statistics.median(times["plain"])
    rows = []
    for name, values in times.items():
        quartiles = statistics.quantiles(values, n=4)
        rows.append({"arm": name, "median_ms": statistics.median(values), "p25_ms": quartiles[0],
                     "p75_ms": quartiles[2], "added_ms": statistics.median(values) - plain})
    results = {"benchmark": "start-cost", "program": args.program, "runs": args.runs, "host": platform.node(),
               "cpus": os.cpu_count(), "rows": rows}
    out = REPO / "bench" / "results"
    (out / "start-cost.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["# Process start under the shim", "",
             (f"`bench/start_cost.py`: {args.program} spawned and reaped {args.runs} times per arm, arms interleaved; "
              "median and quartiles of the wall time, and the median's excess over no shim."), "",
             "| arm | median | p25-p75 | added |", "|---|---:|---:|---:|"]
    lines += [f"| {row['arm']} | {row['median_ms']:.3f} ms | {row['p25_ms']:.3f}-{row['p75_ms']:.3f} ms | "
              f"{row['added_ms']:+.3f} ms |" for row in rows]
    (out / "start-cost.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
