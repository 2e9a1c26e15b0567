"""Builders of schema-valid traces and manifests, and real binaries to judge.

The traces here exercise the advisor's logic; the end-to-end tests against the
real shim live in tests/e2e.
"""

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tcpadvise.model import hist

REPO = Path(__file__).resolve().parents[2]
BUILT_SHIM = REPO / "build" / "preload" / "libtcpadvise.so"


def make_hist(values=(), unit: str = "bytes", scale: float = 1.0) -> dict:
    """A histogram as the shim writes it (libtcpadvise/histogram.cc EmitHistogram): values are
    recorded units (ticks for ns), scale converts them; whole units stay integers."""
    counts: dict[int, int] = {}
    for value in values:
        counts[hist.bucket_of(value)] = counts.get(hist.bucket_of(value), 0) + 1
    scaled = (lambda v: v) if scale == 1 else (lambda v: v * scale)
    return {
        "unit": unit,
        "count": len(values),
        "sum": scaled(sum(values)),
        # The shim writes 0 for an empty histogram's min and max.
        "min": scaled(min(values, default=0)),
        "max": scaled(max(values, default=0)),
        "sub_buckets": 128,
        "scale": scale,
        "buckets": [[index, count] for index, count in sorted(counts.items())],
    }


def make_ranged_hist(values=(), unit: str = "bytes") -> dict:
    """A histogram as traces written before the indexed encoding hold it: [lo, hi, count]
    buckets, exact below 8, four per power of two above."""
    def bucket_of(value: int) -> tuple[int, int]:
        if value < 8:
            return value, value + 1
        step = 1 << (value.bit_length() - 3)
        low = value - value % step
        return low, low + step

    counts: dict[tuple[int, int], int] = {}
    for value in values:
        counts[bucket_of(value)] = counts.get(bucket_of(value), 0) + 1
    return {
        "unit": unit,
        "count": len(values),
        "sum": sum(values),
        "min": min(values, default=0),
        "max": max(values, default=0),
        "buckets": [[low, high, count] for (low, high), count in sorted(counts.items())],
    }


_SOCKET = {
    "kind": "socket",
    "connections": 1,
    "open": True,
    "role": "client",
    "family": "ipv4",
    "local": {"addr": "127.0.0.1", "port": 40000},
    "peer": {"addr": "127.0.0.1", "port": 6379},
    "service_port": 6379,
    "options_set": {},
    "options": {"nodelay": False, "cork": False, "sndbuf": 16384, "rcvbuf": 131072},
    "writes": {
        "calls": 4,
        "bytes": 140,
        "by_api": {"send": 3, "writev": 1},
        "size": make_hist([10, 10, 20, 100]),
        "iovcnt": make_hist([1, 1, 1, 2], unit="count"),
        "syscall_ns": make_hist([2000, 2000, 3000, 9000], unit="ns"),
        "gap_ns": make_hist([500, 700], unit="ns"),
    },
    "bursts": {
        "count": 2,
        "writes": make_hist([2, 2], unit="count"),
        "bytes": make_hist([20, 120]),
    },
    "turns": {"count": 2, "ns": make_hist([50_000, 80_000], unit="ns")},
    "reads": {
        "calls": 3,
        "bytes": 128,
        "by_api": {"recv": 3},
        "size": make_hist([64, 64]),
        "eof": 1,
    },
    "errors": {},
    "tcp_info": {"rtt_us": 50.0, "rttvar_us": 10.0, "total_retrans": 0, "samples": 1},
}


def make_socket(**overrides) -> dict:
    """A client socket on loopback with a few writes, bursts, turns and reads."""
    return {**copy.deepcopy(_SOCKET), **overrides}


def make_trace(sockets=None, **overrides) -> dict:
    """A final trace of one process holding `sockets` (one default socket if None)."""
    trace = {
        "schema": "tcpadvise.trace/1",
        "program": "client",
        "pid": 4242,
        "ppid": 1,
        "start_unix_ns": 1_000,
        "written_unix_ns": 5_000,
        "final": True,
        "tsc_hz": 3.0e9,
        "groups_dropped": 0,
        "shim_warnings": [],
        "sockets": [make_socket()] if sockets is None else sockets,
    }
    trace.update(overrides)
    return trace


def make_manifest(static: bool = False, go: bool = False, **overrides) -> dict:
    """A record.json for a run that started before make_trace's traces were written."""
    manifest = {
        "schema": "tcpadvise.record/1",
        "command": ["client", "--port", "6379"],
        "pid": 4242,
        "exit_status": 0,
        "started_unix_ns": 500,
        "ended_unix_ns": 9_000,
        "shim": "/usr/local/lib/tcpadvise/libtcpadvise.so",
        "binary": {"path": "/usr/bin/client", "static": static, "go": go},
    }
    manifest.update(overrides)
    return manifest


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def write_trace(directory: Path, trace: dict) -> Path:
    """Save a trace under the name the shim gives it."""
    return write_json(directory / f"{trace['program']}.{trace['pid']}.json", trace)


@pytest.fixture
def fake_shim(tmp_path, monkeypatch) -> Path:
    """An empty file as the shim: the loader only warns that it cannot preload it and runs the program."""
    shim = tmp_path / "not-a-library.so"
    shim.touch()
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim))
    return shim


def build_c(directory: Path, name: str, *flags: str) -> Path:
    """A C program that exits 0, built with `flags`; skips the test if gcc cannot."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    source = directory / f"{name}.c"
    source.write_text("int main(void) { return 0; }\n")
    binary = directory / name
    built = subprocess.run(["gcc", *flags, "-o", binary, source], capture_output=True, text=True, check=False)
    if built.returncode != 0:
        pytest.skip(f"gcc {' '.join(flags)} failed (static libc missing?): {built.stderr.strip()[:200]}")
    return binary


@pytest.fixture(scope="session")
def static_binary(tmp_path_factory) -> Path:
    """A statically linked C program that exits 0."""
    return build_c(tmp_path_factory.mktemp("static"), "static-true", "-static")


@pytest.fixture(scope="session")
def go_binary(tmp_path_factory) -> Path:
    """A Go program built with the Go toolchain here."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    directory = tmp_path_factory.mktemp("go")
    source = directory / "main.go"
    source.write_text("package main\n\nfunc main() {}\n")
    binary = directory / "gohello"
    environment = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GO111MODULE": "off"}
    built = subprocess.run(
        ["go", "build", "-o", binary, source],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(f"go build failed: {built.stderr.strip()[:500]}")
    return binary
