#!/usr/bin/env python3
"""server_cache: what the shim costs a real server's request beyond its own instructions (issue 16).

bench/server_instructions.py counts the instructions in the shim's own functions; a request also pays
for what other objects run for the shim (libunwind and libc during the sampled unwinds of call sites),
and for the cache lines and branch predictions the shim's code takes from the server's. This runs the
same fixed load under valgrind's callgrind with its cache and branch simulation (--cache-sim=yes
--branch-sim=yes: L1 32 KiB 8-way for instructions and data, LRU, no kernel), once with no shim and
once per build, rounds interleaved, and gives per request, by object (the server, libc, the shim,
libunwind, all), the instructions (Ir), L1 data read and write misses (D1mr, D1mw), L1 instruction
misses (I1mr), and mispredicted conditional and indirect branches (Bcm, Bim). A miss the server's own
code takes more under a shim is a line of its the shim's lines evicted. The simulated cache is no
machine's (no prefetch, no kernel between calls): read the differences, not the absolute counts.

    cd bench && PYTHONPATH=../advisor python3 server_cache.py --server nginx --rounds 2 \\
        main=/tmp/main/build/preload/libtcpadvise.so branch=../build/preload/libtcpadvise.so [-o F.json]

--set TCPADVISE_NAME=VALUE gives the shim a setting (TCPADVISE_CALL_SITES=off: what sampling costs).
"""

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

from server_instructions import by_object, measured_dumps

from tcpadvise.bench import servers as S
from tcpadvise.bench.suites import POLICIES

EVENTS = ["Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim"]
SHOWN = ["Ir", "D1mr", "D1mw", "I1mr", "Bcm", "Bim"]


def measure(server: S.Server, shim: Path | None, settings: dict, scratch: Path) -> dict:
    requests, dumps = measured_dumps(server, POLICIES["observe"] if shim is not None else None, shim, scratch,
                                     ["--cache-sim=yes", "--branch-sim=yes"], tuple(settings.items()))
    objects: dict[str, list[int]] = collections.defaultdict(lambda: [0] * len(EVENTS))
    for dump in dumps:
        for name, row in by_object(dump.read_text()).items():
            total = objects[Path(name).name]
            for i, value in enumerate(row):
                total[i] += value
    shim_name = shim.name if shim else None
    per = {}
    for name, row in objects.items():
        key = "shim" if name == shim_name else "libunwind" if name.startswith("libunwind") else \
            "libc" if name.startswith("libc.so") else name
        per[key] = {e: v / requests for e, v in zip(EVENTS, row)}
    per["all"] = {e: sum(row[i] for row in objects.values()) / requests for i, e in enumerate(EVENTS)}
    return {"requests": requests, "objects": per}


def render(server: str, results: dict[str, list[dict]]) -> str:
    """Per build, the median over rounds of each event a request, by object: all of the server's
    processes, its own executable (redis-server is redis-check-rdb), libc, the shim, libunwind."""
    lines = [f"| {server}, a request (median of rounds) | " + " | ".join(SHOWN) + " |", "|---|" + "---:|" * len(SHOWN)]
    for label, rounds in results.items():
        own = max((k for k in rounds[0]["objects"] if k not in ("all", "libc", "shim", "libunwind")),
                  key=lambda k: rounds[0]["objects"][k]["Ir"])
        for obj, title in (("all", "all"), (own, "the server's own"), ("libc", "libc"), ("shim", "the shim"),
                           ("libunwind", "libunwind")):
            rows = [r["objects"][obj] for r in rounds if obj in r["objects"]]
            if rows:
                cells = [f"{statistics.median(row[e] for row in rows):,.2f}" for e in SHOWN]
                lines.append(f"| {label}: {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not name.startswith("TCPADVISE_") or not equals:
        raise argparse.ArgumentTypeError(f"{text!r}: TCPADVISE_NAME=VALUE")
    return name, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="LABEL=path/to/libtcpadvise.so")
    parser.add_argument("--server", choices=["redis", "nginx", "memcached"], default="nginx")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", action="append", type=setting, default=[], metavar="TCPADVISE_NAME=VALUE")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    server = next(s for s in S.SERVERS if s.name == args.server)
    if server.missing():
        print(f"{server.name}: {server.missing()}", file=sys.stderr)
        return 2
    arms = [("no shim", None)] + [(label, Path(path).resolve()) for label, _, path in
                                  (text.rpartition("=") for text in args.builds)]
    results: dict[str, list[dict]] = {label: [] for label, _ in arms}
    with tempfile.TemporaryDirectory(prefix="server-cache-") as scratch:
        for n in range(args.rounds):
            for label, shim in arms:
                results[label].append(measure(server, shim, dict(args.set), Path(scratch)))
            print(f"round {n + 1} done", file=sys.stderr)
    text = render(server.name, results)
    print(text)
    if args.output:
        args.output.write_text(json.dumps({"server": server.name, "settings": dict(args.set), "results": results},
                                          indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
