import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tcpadvise.errors import CommandNotFoundError, ShimNotFoundError
from tcpadvise.model.report import build_report
from tcpadvise.record.record import exit_status, record, summary_line
from tcpadvise.record.shim import shim_environment
from tcpadvise.trace.reader import Manifest, load_file, load_inputs
from testlib import shim_path

from .conftest import make_socket, make_trace, write_trace


def run(command, out_dir, interval=5.0):
    warnings = []
    manifest = record(command, out_dir, interval, warn=warnings.append)
    return manifest, warnings


def test_exit_status_is_passed_through_and_the_manifest_written(tmp_path, fake_shim):
    out_dir = tmp_path / "out" / "nested"
    manifest, warnings = run(["sh", "-c", "exit 3"], out_dir)
    assert manifest["exit_status"] == 3
    assert warnings == []
    on_disk = load_file(out_dir / "record.json")
    assert isinstance(on_disk, Manifest)
    assert on_disk.data == manifest
    assert manifest["command"] == ["sh", "-c", "exit 3"]
    assert manifest["shim"] == str(fake_shim)
    assert manifest["binary"]["static"] is False
    assert manifest["started_unix_ns"] <= manifest["ended_unix_ns"]
    assert [path.name for path in out_dir.iterdir()] == ["record.json"]


def test_death_by_signal_is_128_plus_the_signal(tmp_path, fake_shim):
    manifest, _ = run(["sh", "-c", "kill -TERM $$"], tmp_path)
    assert manifest["exit_status"] == 128 + signal.SIGTERM
    assert exit_status(-9) == 137 and exit_status(0) == 0 and exit_status(2) == 2


def test_child_gets_the_shim_and_its_settings(tmp_path, fake_shim, monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", str(fake_shim))
    seen = tmp_path / "seen"
    script = f'printf "%s\\n" "$LD_PRELOAD" "$TCPADVISE_OUT" "$TCPADVISE_INTERVAL" > {seen}'
    monkeypatch.chdir(tmp_path)
    run(["sh", "-c", script], Path("relative-out"), interval=0.25)
    assert seen.read_text().splitlines() == [
        f"{fake_shim}:{fake_shim}",
        str(tmp_path / "relative-out"),
        "0.25",
    ]


def test_shim_environment_leaves_the_rest_alone(tmp_path):
    environment = shim_environment({"PATH": "/bin"}, Path("/s.so"), tmp_path, 5.0)
    assert environment == {
        "PATH": "/bin",
        "LD_PRELOAD": "/s.so",
        "TCPADVISE_OUT": str(tmp_path),
        "TCPADVISE_INTERVAL": "5",
    }


def test_static_binary_is_warned_about_and_still_run(tmp_path, fake_shim, static_binary):
    manifest, warnings = run([str(static_binary)], tmp_path)
    assert manifest["exit_status"] == 0
    assert manifest["binary"] == {"path": str(static_binary), "static": True, "go": False}
    [warning] = warnings
    assert "statically linked" in warning and "running it anyway" in warning


def test_command_not_found(tmp_path, fake_shim):
    with pytest.raises(CommandNotFoundError) as raised:
        run(["no-such-command-tcpadvise"], tmp_path)
    assert raised.value.exit_code == 127
    assert not (tmp_path / "record.json").exists()


def test_missing_shim_stops_before_running(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(tmp_path / "missing.so"))
    with pytest.raises(ShimNotFoundError):
        run(["sh", "-c", f"touch {tmp_path / 'ran'}"], tmp_path)
    assert not (tmp_path / "ran").exists()


def test_summary_line_counts_processes_connections_and_writes(tmp_path):
    write_trace(
        tmp_path, make_trace(pid=1, sockets=[make_socket(), make_socket(connections=3, kind="group")])
    )
    write_trace(tmp_path, make_trace(pid=2))
    assert summary_line(tmp_path) == (
        f"tcpadvise: traces in {tmp_path}: 2 processes, 5 TCP connections, 12 writes; "
        f"next: tcpadvise report {tmp_path}"
    )


def test_summary_line_survives_an_unreadable_trace(tmp_path):
    (tmp_path / "broken.json").write_text("{")
    line = summary_line(tmp_path)
    assert "cannot be read" in line and "next: tcpadvise report" in line


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_to_the_command(tmp_path, fake_shim, signum):
    started = tmp_path / "started"
    out_dir = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "tcpadvise",
        "record",
        "-o",
        str(out_dir),
        "--",
        "sh",
        "-c",
        f"touch {started}; exec sleep 30",
    ]
    # A session of its own has no terminal, so SIGINT is forwarded, not left to Ctrl-C.
    recorder = subprocess.Popen(command, start_new_session=True, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), "the command did not start"
    recorder.send_signal(signum)
    _, stderr = recorder.communicate(timeout=10)
    assert recorder.returncode == 128 + signum
    assert json.loads((out_dir / "record.json").read_text())["exit_status"] == 128 + signum
    assert "next: tcpadvise report" in stderr


LOOPBACK_ROUND_TRIPS = """
import socket
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
for _ in range(5):
    client.sendall(b"ping")
    peer.recv(16)
    peer.sendall(b"pong")
    client.recv(16)
client.close(); peer.close(); server.close()
"""


@pytest.mark.skipif(
    not shim_path().is_file(), reason=f"the shim is not built ({shim_path()} missing): run cmake --build build"
)
def test_real_shim_records_loopback_traffic(tmp_path, monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))
    python = os.path.realpath(sys.executable)
    manifest, warnings = run([python, "-c", LOOPBACK_ROUND_TRIPS], tmp_path)
    assert manifest["exit_status"] == 0 and warnings == []
    report = build_report(load_inputs([tmp_path]))
    assert report.sockets, report.warnings
    assert sum(item["writes"]["calls"] for item in report.sockets) >= 10
