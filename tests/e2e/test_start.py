"""A process pays at start only for what it uses (issue 16, cheap start): with
the config `tcpadvise record --policy` hands it (policy.resolve_policy: the
compiled form) it never loads yaml-cpp; libunwind is loaded with the first TCP
socket, not before. Checked in the processes' own /proc/self/maps; the
timings are bench/start_cost.py's."""
import json
import sys

import pytest
from tcpadvise.policy.config import resolve_policy
from testlib import run, shim_env, shim_path

# What the shim used to load into every process under a policy (with libstdc++, which a sanitizer
# build's runtime loads anyway), and what it loads only for sockets.
YAML_LIBRARIES = ("libtcpadvise_config.so", "libyaml-cpp")
UNWINDER = "libunwind"

# Opens one TCP connection to itself, writes and reads on it, then saves its maps.
SOCKET_PROGRAM = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
client.sendall(b"ping"); peer.recv(4); peer.sendall(b"pong"); client.recv(4)
open(sys.argv[1], "w").write(open("/proc/self/maps").read())
"""


@pytest.fixture(autouse=True)
def built_shim(monkeypatch):
    if not shim_path().is_file():
        pytest.fail(f"build the shim first: {shim_path()} is missing")
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))


def libraries(maps_text: str) -> set[str]:
    return {line.split()[-1].rsplit("/", 1)[-1] for line in maps_text.splitlines() if "/" in line}


def run_under_cork(tmp_path, command):
    """command under the shim with record's config for --policy cork; its traces' directory."""
    out = tmp_path / "out"
    out.mkdir()
    config = resolve_policy("cork", out)
    assert config.name == "policy.compiled"
    result = run(command, env=shim_env(out, TCPADVISE_CONFIG=str(config)), timeout=60)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    return out


def test_a_process_without_sockets_loads_neither_yaml_nor_the_unwinder(tmp_path):
    maps = tmp_path / "maps"
    run_under_cork(tmp_path, ["sh", "-c", f"cat /proc/self/maps > {maps}"])
    loaded = libraries(maps.read_text())
    assert "libtcpadvise.so" in loaded  # the shim was there: the rest of the test means something
    assert not {name for name in loaded if name.startswith(YAML_LIBRARIES + (UNWINDER,))}, loaded


def test_the_first_socket_loads_the_unwinder_and_the_policy_acts(tmp_path):
    maps = tmp_path / "maps"
    out = run_under_cork(tmp_path, [sys.executable, "-c", SOCKET_PROGRAM, str(maps)])
    loaded = libraries(maps.read_text())
    assert any(name.startswith(UNWINDER) for name in loaded), loaded
    assert not {name for name in loaded if name.startswith(YAML_LIBRARIES)}, loaded
    (trace,) = [json.loads(path.read_text()) for path in out.glob("python*.json")]
    assert trace["call_sites"]["unwinder"] == "libunwind" and trace["call_sites"]["sampled_writes"] > 0
    assert trace["sockets"] and all(socket["policy"]["settings"]["cork"] for socket in trace["sockets"])
