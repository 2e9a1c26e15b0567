"""A network path of our own: two network namespaces joined by a veth pair
(MTU 1500, so that a message's segment count is that of an Ethernet path),
optionally rate-limited with tbf in both directions. Addresses come from the
benchmarking range 198.18.0.0/15, which no real network uses. Needs root;
everything is deleted on the way out (errors and Ctrl-C included), and
namespaces a killed run left behind are deleted by the next one.

Shared by `tcpadvise bench --link` and bench/policy_compare.py.
"""

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import BenchError, LinkNeedsRootError

FAR_ADDR, NEAR_ADDR = "198.18.0.1", "198.18.0.2"
MTU = 1500
_NAMESPACE = re.compile(r"^tcpadvise-(\d+)-(far|near)\b")


@dataclass(frozen=True)
class LinkProfile:
    """A path to build: a rate for tbf, or None for the veth pair at full speed."""

    name: str
    rate_bit_s: float | None
    description: str

    def tbf_arguments(self) -> list[str]:
        """tbf with a bucket of two frames and a queue of 50 ms at the rate (16 frames at least).

        A token bucket is not a wire: whatever the bucket holds after a pause
        leaves at once. Two frames is as small as tbf takes safely, so a
        message pays for its bytes as on a wire, but for the first two frames
        after a pause."""
        frame = MTU + 14
        burst = 2 * frame
        limit = max(16 * frame, int(self.rate_bit_s / 8 * 0.05))
        return ["tbf", "rate", f"{int(self.rate_bit_s)}bit", "burst", str(burst), "limit", str(limit)]


PROFILES = {
    profile.name: profile
    for profile in (
        LinkProfile("veth", None, "veth pair, MTU 1500, no rate limit"),
        LinkProfile("1gbit", 1e9, "veth pair, MTU 1500, tbf 1 Gbit/s"),
        LinkProfile("100mbit", 1e8, "veth pair, MTU 1500, tbf 100 Mbit/s"),
        LinkProfile("10mbit", 1e7, "veth pair, MTU 1500, tbf 10 Mbit/s"),
        LinkProfile("1mbit", 1e6, "veth pair, MTU 1500, tbf 1 Mbit/s"),
    )
}


@dataclass(frozen=True)
class NamespacePair:
    """Where the far end and the near end run: prefixes that run a command in each namespace."""

    far_prefix: list[str]
    near_prefix: list[str]
    far_addr: str


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise LinkNeedsRootError(
            f"{what} needs root: it creates network namespaces, a veth pair and tbf qdiscs "
            "(run it as root or with sudo)"
        )
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        raise BenchError(f"{what} needs {' and '.join(missing)} (Debian package iproute2)")


@contextlib.contextmanager
def veth_pair(profile: LinkProfile | None = None, what: str = "--link") -> Iterator[NamespacePair]:
    """Build the path, yield where to run each end, and delete it all afterwards."""
    require_root(what)
    remove_stale_namespaces()
    pid = os.getpid()
    far, near = f"tcpadvise-{pid}-far", f"tcpadvise-{pid}-near"
    far_dev, near_dev = f"tcpa{pid}f", f"tcpa{pid}n"
    try:
        _run("ip", "netns", "add", far)
        _run("ip", "netns", "add", near)
        _run(
            "ip",
            "link",
            "add",
            far_dev,
            "netns",
            far,
            "type",
            "veth",
            "peer",
            "name",
            near_dev,
            "netns",
            near,
        )
        for ns, dev, addr in ((far, far_dev, FAR_ADDR), (near, near_dev, NEAR_ADDR)):
            _run("ip", "-n", ns, "link", "set", dev, "mtu", str(MTU))
            _run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            if profile is not None and profile.rate_bit_s is not None:
                _run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", *profile.tbf_arguments())
        yield NamespacePair(["ip", "netns", "exec", far], ["ip", "netns", "exec", near], FAR_ADDR)
    finally:
        for ns in (far, near):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def remove_stale_namespaces() -> None:
    """Delete the namespaces of runs whose process is gone (killed before it could clean up)."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    for line in listing.splitlines():
        match = _NAMESPACE.match(line)
        if match and not _alive(int(match.group(1))):
            subprocess.run(["ip", "netns", "del", line.split()[0]], capture_output=True, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _run(*command: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        reason = failure_reason(result.stderr, result.returncode)
        raise BenchError(f"cannot build the link: '{' '.join(command)}' failed: {reason}")


def failure_reason(stderr: str, returncode: int) -> str:
    """Why a command failed: the last line of its stderr, which is where tools say it, else its exit status."""
    lines = stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {returncode}"
