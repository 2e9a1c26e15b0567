#!/usr/bin/env python3
"""cli_start: how long `tcpadvise --help` (and a command's --help) takes, against
a bare Python start, optionally beside another source tree's advisor
(--baseline DIR/advisor), interleaved; prints a Markdown table of medians and
min-max and writes it, with the raw times, to --output (.md and .json).

  python3 bench/cli_start.py [--runs 30] [--baseline /tmp/old/advisor] [--output bench/results/cli-start]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ADVISOR = Path(__file__).resolve().parents[1] / "advisor"
COMMANDS = {
    "python3 -c pass": ["-c", "pass"],
    "tcpadvise --help": ["-m", "tcpadvise", "--help"],
    "tcpadvise report --help": ["-m", "tcpadvise", "report", "--help"],
    "tcpadvise ab report --help": ["-m", "tcpadvise", "ab", "report", "--help"],
}


def timed(args: list[str], advisor: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(advisor)}
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--baseline", type=Path, help="another tree's advisor/ directory to time beside this one")
    parser.add_argument("--output", type=Path, help="write OUTPUT.md and OUTPUT.json")
    options = parser.parse_args()
    trees = {"this tree": ADVISOR}
    if options.baseline:
        trees["baseline"] = options.baseline.resolve()
    times = {(tree, name): [] for tree in trees for name in COMMANDS}
    for _ in range(options.runs):
        for tree, advisor in trees.items():
            for name, args in COMMANDS.items():
                times[(tree, name)].append(timed(args, advisor))
    rows = ["| command | " + " | ".join(trees) + " |", "|---|" + "---:|" * len(trees)]
    for name in COMMANDS:
        cells = []
        for tree in trees:
            runs = times[(tree, name)]
            cells.append(f"{statistics.median(runs) * 1000:.0f} ms ({min(runs) * 1000:.0f}-{max(runs) * 1000:.0f})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    header = (f"# CLI start\n\n`bench/cli_start.py`: {options.runs} interleaved runs of each; median wall time "
              "(min-max) of the whole process, Python's own start included (the first row).\n\n")
    print(header + table)
    if options.output:
        options.output.with_suffix(".md").write_text(header + table + "\n")
        raw = {f"{tree}: {name}": runs for (tree, name), runs in times.items()}
        options.output.with_suffix(".json").write_text(json.dumps({"runs": options.runs, "seconds": raw}, indent=1) + "\n")


if __name__ == "__main__":
    main()
