"""server_functions: where the shim's instructions go on a real server, per function, two shims side by side.

bench/server_instructions.py counts the shim's own instructions a request under each policy; its totals
move 10-20% from run to run with the time histograms' adds (callgrind stretches the times, so they fall
in more buckets). This runs the same count (its `count`) for each build and arm, rounds interleaved,
keeps the callgrind dumps, and reads them per function (callgrind_annotate, self cost): the write
hook's own instructions a request (hooks::Write for redis, hooks::Writev for nginx, hooks::Sendmsg
for memcached, run under valgrind as server_instructions.py says), which do not move, and the shim's total less the histograms' adds (SparseCounters), which barely do.

    cd bench && PYTHONPATH=../advisor python3 server_functions.py --server redis --rounds 5 \\
        main=/tmp/main/build/preload/libtcpadvise.so branch=../build/preload/libtcpadvise.so [-o F.json]

Prints median [range] per build and arm; --top N adds, per arm, the N costliest of the shim's
functions (self cost a request, median per build: where the rest of the count goes); -o writes every
round's figures as JSON, those functions' included.
"""

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from server_instructions import count

from tcpadvise.bench import servers as S

WRITE_HOOK = {"redis": "tcpadvise::hooks::Write(int", "nginx": "tcpadvise::hooks::Writev(int",
              "memcached": "tcpadvise::hooks::Sendmsg(int"}
ARMS = ["observe", "cork", "coalesce"]
_LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S+?:(.*?)(?:\s+\[([/?][^\[\]]*)\])?$")


def functions(dumps: list[Path]) -> tuple[collections.Counter, collections.Counter]:
    """Self instructions by function name, summed over a run's dumps (one per server process): all
    of them, and the shim's own. callgrind_annotate names a function's object on some of its lines
    (those of the files it was inlined from), at times on none: a line without one is the shim's
    when its name is the shim's only, or in its namespace and no other object's (the shim's export
    `read` and libc's share a name, each line naming its object)."""
    totals, shim = collections.Counter(), collections.Counter()
    for dump in dumps:
        text = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", str(dump)],
                              capture_output=True, text=True, check=True).stdout
        lines = [(m[2], int(m[1].replace(",", "")), m[3]) for m in map(_LINE.match, text.splitlines()) if m]
        objects = collections.defaultdict(set)
        for name, _, obj in lines:
            if obj:
                objects[name].add("libtcpadvise" in obj)
        for name, n, obj in lines:
            totals[name] += n
            mine = objects[name] == {True} or (not objects[name] and name.split("(")[0].find("tcpadvise::") >= 0)
            if ("libtcpadvise" in obj) if obj else mine:
                shim[name] += n
    return totals, shim


def one(server: S.Server, arm: str, shim: Path, scratch: Path) -> dict:
    before = set(scratch.glob("callgrind-*"))
    row = count(server, arm, shim, scratch)
    (directory,) = set(scratch.glob("callgrind-*")) - before
    by_function, shim = functions(sorted(directory.glob("cg.*.1")))
    n = row["requests"]
    hist = sum(v for k, v in by_function.items() if "SparseCounters" in k)
    return {"requests": n, "shim": row["shim_instructions"] / n, "shim_less_histograms": (row["shim_instructions"] - hist) / n,
            "write_hook": sum(v for k, v in by_function.items() if k.startswith(WRITE_HOOK[server.name])) / n,
            "functions": {k: v / n for k, v in shim.items() if v / n >= 0.5}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="LABEL=path/to/libtcpadvise.so")
    parser.add_argument("--server", choices=sorted(WRITE_HOOK), default="redis")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=0, help="also print the N costliest shim functions per arm")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    builds = dict(b.split("=", 1) for b in args.builds)
    server = next(s for s in S.SERVERS if s.name == args.server)
    if server.missing():
        print(f"{server.name}: {server.missing()}", file=sys.stderr)
        return 2
    results = {label: {arm: [] for arm in ARMS} for label in builds}
    with tempfile.TemporaryDirectory(prefix="server-functions-") as scratch:
        Path(scratch).chmod(0o777)  # the servers run as another user and write their dumps here
        for i in range(args.rounds):
            for label, shim in builds.items():
                for arm in ARMS:
                    results[label][arm].append(one(server, arm, Path(shim).resolve(), Path(scratch)))
            print(f"round {i + 1} done", file=sys.stderr)
    print(f"| {server.name}, a request (median [range], {args.rounds} rounds) | " + " | ".join(ARMS) + " |")
    print("|---|" + "---:|" * len(ARMS))
    for key, what in [("shim", "the shim's own"), ("shim_less_histograms", "less the histograms' adds"),
                      ("write_hook", "the write hook's own")]:
        for label in builds:
            cells = []
            for arm in ARMS:
                xs = [r[key] for r in results[label][arm]]
                cells.append(f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]")
            print(f"| {what}, {label} | " + " | ".join(cells) + " |")
    for arm in ARMS if args.top else []:
        medians = {label: collections.Counter({k: statistics.median(r["functions"].get(k, 0.0) for r in results[label][arm])
                                               for r0 in results[label][arm] for k in r0["functions"]})
                   for label in builds}
        names = collections.Counter()
        for m in medians.values():
            names |= m
        print(f"\n| {arm}: the shim's functions, self, a request (median) | " + " | ".join(builds) + " |")
        print("|---|" + "---:|" * len(builds))
        for name, _ in names.most_common(args.top):
            print(f"| {name[:90]} | " + " | ".join(f"{medians[label][name]:.1f}" for label in builds) + " |")
    if args.output:
        args.output.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
