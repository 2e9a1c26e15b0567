"""--link: a veth pair between two namespaces of our own, built and always removed.
The real runs need root (CI has it); without it they are skipped."""

import os
import subprocess
from pathlib import Path

import pytest
from tcpadvise.bench import netns as bench_netns
from tcpadvise.bench import run as bench
from testlib import invoke

from .conftest import TINY

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def our_namespaces() -> list[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.startswith(f"tcpadvise-{os.getpid()}-")]


@needs_root
def test_a_rate_limited_link_measures_ethernet_segments_and_is_removed(built, tmp_path):
    result = invoke(
        "bench", "--link", "1gbit", "--suite", "pingpong", *TINY, "-o", str(tmp_path / "c.json"), env=built
    )
    assert result.exit_code == 0, result.output
    # A pipe is 80 columns wide: the heading may wrap, so compare the words.
    assert "tbf 1 Gbit/s" in " ".join(result.stdout.split())
    # MTU 1500: 1448 bytes a segment with timestamps, so 9901 bytes take seven.
    assert "MSS 1448 B" in result.stdout
    assert our_namespaces() == []


@needs_root
@pytest.mark.parametrize("failure", [KeyboardInterrupt, bench.BenchError("the arm failed")])
def test_the_link_is_removed_on_ctrl_c_and_errors(built, monkeypatch, failure):
    def fail(*args):
        assert len(our_namespaces()) == 2  # built, and in use
        raise failure

    monkeypatch.setattr(bench, "run_arm", fail)
    result = invoke("bench", "--link", "veth", "--suite", "nagle", *TINY, env=built)
    assert result.exit_code == 1
    assert our_namespaces() == []


@needs_root
def test_namespaces_of_a_killed_run_are_removed_by_the_next():
    # No process ever has the pid pid_max.
    dead = int(Path("/proc/sys/kernel/pid_max").read_text())
    stale = f"tcpadvise-{dead}-far"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        bench_netns.remove_stale_namespaces()
        assert (
            stale
            not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
        )
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True, check=False)
