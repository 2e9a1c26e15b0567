#!/usr/bin/env python3
"""The Nagle x delayed-ACK experiment of ../shared/seeds/004, side by side:
the project's burst client sends each request as 15 two-byte writes and
reads a 2-byte reply. Arms:

  plain          the client as is (Nagle on)
  own-nodelay    the client sets TCP_NODELAY itself
  own-cork       the client corks and uncorks each request itself
  own-writev     the client sends each request with one writev
  shim-nodelay   the plain client under the shim's nodelay policy
  shim-cork      the plain client under the shim's cork policy
  shim-coalesce  the plain client under the shim's coalesce policy

over loopback and over a veth pair between two network namespaces this
script creates (and deletes), addresses from the benchmarking range
198.18.0.0/15. Server and client share one CPU. Arms alternate run by run;
a run's figure is its median round trip. Writes bench/results/policy-compare.{json,md}. Needs root for the veth
path (--paths loopback runs without).

usage: bench/policy_compare.py [--build DIR] [--runs N] [--rounds N] [--paths loopback,veth]
"""
import argparse
import contextlib
import json
import os
import pathlib
import platform
import statistics
import subprocess
import tempfile

from tcpadvise.bench.netns import veth_pair  # the advisor package: make deps installs it

REPO = pathlib.Path(__file__).resolve().parents[1]
ARMS = {
    "plain": ([], None),
    "own-nodelay": (["--nodelay"], None),
    "own-cork": (["--cork"], None),
    "own-writev": (["--single-writev"], None),
    "shim-nodelay": ([], "nodelay"),
    "shim-cork": ([], "cork"),
    "shim-coalesce": ([], "coalesce"),
}


@contextlib.contextmanager
def veth_path():
    """Two namespaces joined by a veth pair (MTU 1500, tcpadvise.bench_netns); yields
    the command prefixes that run a process in each and the server's address."""
    with veth_pair(what="the veth path") as pair:
        yield pair.far_prefix, pair.near_prefix, pair.far_addr


@contextlib.contextmanager
def loopback_path():
    yield [], [], "127.0.0.1"


def run_arm(burst, shim, prefixes, arm, rounds, policy_dir):
    server_prefix, client_prefix, host = prefixes
    client_args, policy = ARMS[arm]
    # Both ends on one CPU: unpinned, a round trip is 5 or 70 us depending on
    # where the scheduler puts the two processes, whatever the arm.
    pin = ["taskset", "-c", "0"]
    server = subprocess.Popen([*server_prefix, *pin, burst, "server", "--host", host, "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().split()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_PRELOAD", "TCPADVISE_"))}
        if policy:
            config = pathlib.Path(policy_dir) / f"{policy}.yaml"
            config.write_text(f"version: 1\nrules:\n  - policy: {policy}\n")
            env.update(LD_PRELOAD=shim, TCPADVISE_CONFIG=str(config), TCPADVISE_OUT=policy_dir)
        # The plain arm waits 40 ms a round: fewer rounds keep it to seconds.
        n = max(20, rounds // 100) if arm == "plain" else rounds
        out = subprocess.run([*client_prefix, *pin, "env",
                              *[f"{k}={v}" for k, v in env.items() if k.startswith(("LD_", "TCPADVISE_"))],
                              burst, "client", "--host", host, "--port", port, "--rounds", str(n), *client_args],
                             capture_output=True, text=True, check=True).stdout
    finally:
        server.terminate()
        server.wait()
    return json.loads(out.splitlines()[-1])["round_us_median"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--runs", type=int, default=15, help="runs per arm and path")
    parser.add_argument("--rounds", type=int, default=3000, help="requests per run (plain: a hundredth)")
    parser.add_argument("--paths", default="loopback,veth")
    args = parser.parse_args()
    build = pathlib.Path(args.build)
    burst, shim = str(build / "tests/progs/burst"), str(build / "preload/libtcpadvise.so")
    paths = {"loopback": loopback_path, "veth": veth_path}
    results = {}
    with tempfile.TemporaryDirectory() as policy_dir:
        for path in args.paths.split(","):
            samples = {arm: [] for arm in ARMS}
            with paths[path]() as prefixes:
                for i in range(args.runs):
                    for arm in ARMS:
                        samples[arm].append(run_arm(burst, shim, prefixes, arm, args.rounds, policy_dir))
                    print(f"{path}: run {i + 1}/{args.runs} done", flush=True)
            results[path] = {arm: {"median_us": statistics.median(v), "runs_us": v} for arm, v in samples.items()}
    verdicts = {}
    for path, arms in results.items():
        med = {arm: arms[arm]["median_us"] for arm in arms}
        verdicts[path] = {
            "coalesce_vs_own_writev": med["shim-coalesce"] / med["own-writev"],
            "coalesce_faster_than_own_cork": med["shim-coalesce"] < med["own-cork"],
            "cork_vs_own_cork": med["shim-cork"] / med["own-cork"],
        }
    document = {"benchmark": "policy-compare", "seed": "004", "rounds_per_run": args.rounds, "runs": args.runs,
                "kernel": platform.release(), "cpus": os.cpu_count(), "paths": results, "verdicts": verdicts}
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "policy-compare.json").write_text(json.dumps(document, indent=2) + "\n")
    lines = [f"15 two-byte writes then a 2-byte reply; median round trip in microseconds (median of {args.runs} runs; "
             f"kernel {platform.release()}, {os.cpu_count()} CPUs).", "",
             "| arm | " + " | ".join(results) + " |", "|---|" + "---|" * len(results)]
    for arm in ARMS:
        lines.append(f"| {arm} | " + " | ".join(f"{results[p][arm]['median_us']:.1f}" for p in results) + " |")
    lines.append("")
    for path, v in verdicts.items():
        lines.append(f"- {path}: shim coalesce / own writev = {v['coalesce_vs_own_writev']:.2f}; "
                     f"coalesce faster than own cork: {'yes' if v['coalesce_faster_than_own_cork'] else 'no'}; "
                     f"shim cork / own cork = {v['cork_vs_own_cork']:.2f}")
    (out / "policy-compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
