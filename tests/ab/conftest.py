"""Fixtures of the production-shape A/B tests: a real redis server (outside
the experiment: only the clients run under the shim)."""
import shutil
import socket
import subprocess

import pytest

from testlib import wait_for


def _answers_ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture
def redis_port(tmp_path):
    """The port of a redis-server started for the test, stopped after it."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/install-deps.sh installs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: _answers_ping(port) or server.poll() is not None), "redis-server did not start"
        assert server.poll() is None, server.stderr.read()
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)
