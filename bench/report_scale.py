#!/usr/bin/env python3
"""How long `tcpadvise report` takes, and how much memory, on what a fleet produces.

The inputs are made from a real recorded trace: a Python program run under the
shim (`tcpadvise record`) talks to its own echo server over 40 connections (half
closed into groups, half left open), one small trace. That trace is scaled:

- traces-N: N small traces, each a process of its own (pid, cookies) with two of its sockets;
- big: one trace whose sockets are the recorded ones repeated, each copy a
  connection of its own (cookie, ports spread over 64 services), to about
  --big-mb MB (100 MB is about 45,000 sockets);
- snapshot: the same for a server's periodic snapshot (final: false) with
  --snapshot-sockets open connections.

Each input is reported (--formats: text and JSON unless told, output to /dev/null) in a fresh process
--runs times; the figures are the median wall time, the median CPU time and
the median peak RSS (VmHWM of the child). Cases run interleaved, one run of each in turn.

Writes bench/results/report-scale.{json,md} (--out PREFIX: PREFIX.{json,md} instead; the HTML
page of the 100 MB trace against the code before: --counts '' --snapshot-sockets 0 --formats html
--baseline DIR --out bench/results/report-scale-html).

usage: bench/report_scale.py [--build DIR] [--runs N] [--counts 1,100,1000,10000]
                             [--big-mb 100] [--snapshot-sockets 10000] [--timeout S] [--formats text,json,html]
                             [--baseline DIR] [--out PREFIX]
"""
import argparse
import copy
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

# The recorded program: an echo server and 40 clients of it, 20 rounds each, every other one closed.
_PROGRAM = """
import socket, threading
srv = socket.create_server(("127.0.0.1", 0)); port = srv.getsockname()[1]
def serve():
    while True:
        c, _ = srv.accept()
        def echo(c=c):
            while (d := c.recv(65536)): c.sendall(d)
            c.close()
        threading.Thread(target=echo, daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
conns = []
for i in range(40):
    s = socket.create_connection(("127.0.0.1", port))
    for j in range(20):
        s.sendall(b"x" * (17 * (i + 1) + j)); s.recv(65536)
    if i % 2: s.close()
    else: conns.append(s)
"""
_SERVICES = 64


def record_seed(build: pathlib.Path, directory: pathlib.Path) -> dict:
    """The trace of one real run of _PROGRAM under the shim."""
    env = {**os.environ, "TCPADVISE_SHIM": str(build / "preload" / "libtcpadvise.so"), "TCPADVISE_BUILD": str(build)}
    subprocess.run([sys.executable, "-m", "tcpadvise", "record", "-o", str(directory), "--", sys.executable, "-c",
                    _PROGRAM], env=env, check=True, capture_output=True, timeout=120)
    (trace,) = directory.glob("python*.json")
    return json.loads(trace.read_text())


def _renumbered(socket: dict, copy_index: int) -> dict:
    """The socket as another connection: its own cookie and ports."""
    socket = copy.deepcopy(socket)
    if socket.get("cookie"):
        socket["cookie"] = socket["cookie"] * 1_000_003 + copy_index
    service = 20_000 + copy_index % _SERVICES
    if socket["role"] == "server":
        socket["local"]["port"] = socket["service_port"] = service
        socket["peer"]["port"] = 30_000 + copy_index % 30_000 if socket["peer"]["port"] else 0
    else:
        socket["peer"]["port"] = socket["service_port"] = service
        socket["local"]["port"] = 30_000 + copy_index % 30_000 if socket["local"]["port"] else 0
    return socket


def write_scaled(seed: dict, path: pathlib.Path, target_bytes: int, *, final: bool, open_only: bool) -> int:
    """Writes one trace of about target_bytes made of the seed's sockets repeated; returns its socket count."""
    pattern = [socket for socket in seed["sockets"] if socket["open"] or not open_only]
    one = sum(len(json.dumps(socket)) for socket in pattern) / len(pattern)
    count = max(1, int(target_bytes / one))
    header = {key: value for key, value in seed.items() if key != "sockets"} | {"final": final}
    with path.open("w") as out:
        out.write(json.dumps(header)[:-1] + ', "sockets": [')
        for index in range(count):
            out.write((",\n" if index else "") + json.dumps(_renumbered(pattern[index % len(pattern)], index)))
        out.write("]}\n")
    return count


def write_copies(seed: dict, directory: pathlib.Path, count: int) -> None:
    """count small traces: processes of one open and one closed connection of the seed's each."""
    directory.mkdir()
    small = [next(s for s in seed["sockets"] if s["open"]), next(s for s in seed["sockets"] if not s["open"])]
    for index in range(count):
        pid = 100_000 + index
        trace = seed | {"pid": pid, "ppid": 1, "sockets": [_renumbered(socket, index) for socket in small]}
        (directory / f"{seed['program']}.{pid}.json").write_text(json.dumps(trace))


def run_report(path: pathlib.Path, fmt: str, timeout: float, pythonpath: str | None = None) -> tuple[float | None, int, float]:
    """Wall seconds (None past the timeout), peak RSS bytes and CPU seconds of one `tcpadvise report`
    (of the package on pythonpath if given)."""
    start = time.monotonic()
    # VmHWM, not ru_maxrss: Linux carries a parent's ru_maxrss across fork and exec. CPU time (user
    # and system) beside the wall time: on a machine shared with other work, it is what the report costs.
    code = (f"import re, resource, sys; sys.argv = ['tcpadvise', 'report', '--format', {fmt!r}, {str(path)!r}]\n"
            "from tcpadvise.cli import main\n"
            "try:\n    main()\nfinally:\n"
            "    status = open('/proc/self/status').read()\n"
            "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    print(re.search(r'VmHWM:\\s*(\\d+) kB', status).group(1), usage.ru_utime + usage.ru_stime,"
            " file=sys.stderr)\n")
    try:
        done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, timeout=timeout, check=False,
                              env={**os.environ, "COLUMNS": "120", **({"PYTHONPATH": pythonpath} if pythonpath else {})})
    except subprocess.TimeoutExpired:
        return None, 0, 0.0
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"tcpadvise report {path} failed: {done.stderr.strip()}")
    rss, cpu = done.stderr.strip().splitlines()[-1].split()
    return elapsed, int(rss) * 1024, float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=pathlib.Path, default=REPO / "build")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--counts", default="1,100,1000,10000")
    parser.add_argument("--big-mb", type=float, default=100)
    parser.add_argument("--snapshot-sockets", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--formats", default="text,json", help="of text, json and html (the page to /dev/null)")
    parser.add_argument("--keep", type=pathlib.Path, help="make the inputs here and keep them")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run the tcpadvise package in DIR (e.g. an earlier release's advisor/), interleaved: "
                        "rows of arm 'baseline' beside 'this'")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "results" / "report-scale",
                        help="write the results to OUT.json and OUT.md (default: bench/results/report-scale)")
    args = parser.parse_args()

    work = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="report-scale."))
    work.mkdir(parents=True, exist_ok=True)
    seed = record_seed(args.build, work / "seed")
    cases = {}
    for count in (int(value) for value in args.counts.split(",") if value):
        write_copies(seed, work / f"traces-{count}", count)
        cases[f"{count} traces"] = {"path": work / f"traces-{count}", "sockets": count * 2}
    if args.big_mb:
        big = work / "big" / "server.1.json"
        big.parent.mkdir()
        sockets = write_scaled(seed, big, int(args.big_mb * 1e6), final=True, open_only=False)
        cases[f"one {args.big_mb:g} MB trace"] = {"path": big, "sockets": sockets}
    if args.snapshot_sockets:
        snap = work / "snapshot" / "server.2.json"
        snap.parent.mkdir()
        pattern = [socket for socket in seed["sockets"] if socket["open"]]
        one = sum(len(json.dumps(socket)) for socket in pattern) / len(pattern)
        sockets = write_scaled(seed, snap, int(args.snapshot_sockets * one), final=False, open_only=True)
        cases[f"snapshot of {sockets} open sockets"] = {"path": snap, "sockets": sockets}
    for case in cases.values():
        path = case["path"]
        case["bytes"] = sum(f.stat().st_size for f in path.iterdir()) if path.is_dir() else path.stat().st_size

    formats = args.formats.split(",")
    arms = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    samples = {(name, fmt, arm): [] for name in cases for fmt in formats for arm in arms}
    for _ in range(args.runs):
        for name, case in cases.items():
            for fmt in formats:
                for arm, pythonpath in arms.items():
                    samples[(name, fmt, arm)].append(run_report(case["path"], fmt, args.timeout, pythonpath))
                    print(name, fmt, arm, samples[(name, fmt, arm)][-1], file=sys.stderr, flush=True)

    rows = []
    for (name, fmt, arm), runs in samples.items():
        times = [elapsed for elapsed, _, _ in runs if elapsed is not None]
        rows.append({"case": name, "format": fmt, "arm": arm, "sockets": cases[name]["sockets"],
                     "bytes": cases[name]["bytes"], "runs": len(runs), "timed_out": len(runs) - len(times),
                     "median_s": statistics.median(times) if times else None,
                     "min_s": min(times) if times else None, "max_s": max(times) if times else None,
                     "median_peak_rss_bytes": statistics.median(rss for _, rss, _ in runs if rss) if times else None,
                     "median_cpu_s": statistics.median(cpu for elapsed, _, cpu in runs if elapsed is not None)
                     if times else None})
    results = {"benchmark": "report-scale", "host": platform.node(), "cpus": os.cpu_count(),
               "python": platform.python_version(), "runs": args.runs, "timeout_s": args.timeout, "rows": rows}
    args.out.with_name(args.out.name + ".json").write_text(json.dumps(results, indent=2) + "\n")
    lines = ["# tcpadvise report at fleet scale", "",
             (f"{args.runs} runs of each case, interleaved; median wall time (min-max) and median peak RSS of the "
              "`tcpadvise report` process (VmHWM) and its median CPU time (user + system), over the runs that "
              "ended within the timeout. Inputs scaled from one recorded trace (bench/report_scale.py)."), "",
             "| input | sockets | size | format | arm | time | CPU | peak RSS |", "|---|---:|---:|---|---|---:|---:|---:|"]
    for row in rows:
        if row["median_s"] is None:
            time_text = f"> {args.timeout:g} s"
        else:
            time_text = f"{row['median_s']:.2f} s ({row['min_s']:.2f}-{row['max_s']:.2f})"
            if row["timed_out"]:
                time_text += f", {row['timed_out']} of {row['runs']} runs over {args.timeout:g} s"
        rss = f"{row['median_peak_rss_bytes'] / 2**20:.0f} MiB" if row["median_peak_rss_bytes"] else "-"
        cpu = f"{row['median_cpu_s']:.2f} s" if row["median_cpu_s"] is not None else "-"
        lines.append(f"| {row['case']} | {row['sockets']} | {row['bytes'] / 1e6:.1f} MB | {row['format']} | "
                     f"{row['arm']} | {time_text} | {cpu} | {rss} |")
    args.out.with_name(args.out.name + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
