"""Files are created safely (issue 12): a symlink planted in the trace
directory never makes the shim or the CLI write outside it; what they create
is new, mode 0600, and renamed into place."""
import os
import socket
import stat
import subprocess
import sys

import pytest

from tcpadvise.record.record import record
from testlib import load_traces, shim_env, shim_path

PLANTER = r"""
import os, socket, sys
out, port = sys.argv[1], int(sys.argv[2])
name = os.path.basename(open("/proc/self/cmdline", "rb").read().split(b"\0")[0].decode())
pid = os.getpid()
# Where the shim used to write (a fixed temporary name) and where it renames to.
os.symlink(os.path.join(out, "..", "victim-tmp"), os.path.join(out, f".{name}.{pid}.json.tmp"))
os.symlink(os.path.join(out, "..", "victim-final"), os.path.join(out, f"{name}.{pid}.json"))
with socket.create_connection(("127.0.0.1", port)) as s:
    s.sendall(b"hello")
print(pid)
"""


def _victims(tmp_path):
    victims = {}
    for name in ("victim-tmp", "victim-final"):
        path = tmp_path / name
        path.write_text("keep\n")
        victims[path] = "keep\n"
    return victims


def test_shim_never_writes_through_symlinks_planted_in_the_trace_directory(tmp_path):
    victims = _victims(tmp_path)
    out = tmp_path / "traces"
    out.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-c", PLANTER, str(out), str(port)], env=shim_env(out),
                                 stdout=subprocess.PIPE, text=True)
        conn, _ = server.accept()
        with conn:
            assert conn.recv(16) == b"hello"
        stdout, _ = child.communicate(timeout=30)
    assert child.returncode == 0
    pid = int(stdout)
    for path, content in victims.items():
        assert path.read_text() == content, f"{path} was written through a planted symlink"
    traces = [p for p in out.iterdir() if p.name.endswith(f".{pid}.json")]
    (trace,) = [p for p in traces if not p.name.startswith(".")]
    mode = os.lstat(trace).st_mode
    assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, oct(mode)
    assert pid in load_traces(out)
    # No temporary left behind; the planted temporary name is still just a symlink.
    assert [p.name for p in out.iterdir() if p.name.startswith(".") and not p.is_symlink()] == []


def test_record_never_writes_through_symlinks_planted_in_out_dir(tmp_path, monkeypatch):
    if os.environ.get("TCPADVISE_PRELOAD_FIRST"):
        pytest.skip("record preloads the shim alone; a sanitizer build needs its runtime loaded first")
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))
    victims = _victims(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "victim-tmp", out / "policy.yaml")
    os.symlink(tmp_path / "victim-final", out / "record.json")
    manifest = record(["true"], out, 5.0, warn=lambda _: None, policy="coalesce")
    assert manifest["exit_status"] == 0
    for path, content in victims.items():
        assert path.read_text() == content, f"{path} was written through a planted symlink"
    for name in ("policy.yaml", "record.json"):
        mode = os.lstat(out / name).st_mode
        assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, (name, oct(mode))
    assert "coalesce" in (out / "policy.yaml").read_text()
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
