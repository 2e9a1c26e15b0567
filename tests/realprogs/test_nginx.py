"""nginx and two real clients (curl, wrk), all under each policy: every file
nginx serves arrives byte for byte, with sendfile (nginx's default) and
without, and nginx's traces mirror its clients'."""
import hashlib
import random
import re
from pathlib import Path

import pytest

from harness import POLICIES, assert_server_traces_mirror_clients, run_client, skip_unless_installed
from testlib import sockets

skip_unless_installed("nginx", "curl", "wrk")

# Sizes all differ: verify_bodies.lua tells the files apart by length.
FILE_SIZES = {"empty.bin": 0, "one.bin": 1, "1k.bin": 1024, "100k.bin": 100 * 1024, "5m.bin": 5 * 1024 * 1024}
VERIFY_BODIES = Path(__file__).with_name("verify_bodies.lua")


@pytest.fixture(scope="module")
def docroot(tmp_path_factory):
    root = tmp_path_factory.mktemp("docroot")
    rng = random.Random(8080)
    for name, size in FILE_SIZES.items():
        (root / name).write_bytes(rng.randbytes(size))
    return root


@pytest.fixture
def start_nginx(start_server, docroot):
    """start_nginx(*nginx.sh options); nginx must log nothing at level error or worse."""
    return lambda *options: start_server("nginx.sh", docroot, *options, log_name="error.log",
                                         bad_log_line=r"\[(error|crit|alert|emerg)\]")


def url(server, name):
    return f"http://127.0.0.1:{server.port}/{name}"


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def curl(server, shim, names, downloads):
    """One curl process fetching names in turn into downloads/; returns how many connections it opened."""
    downloads.mkdir()
    targets = []
    for index, name in enumerate(names):
        targets += [url(server, name), "-o", str(downloads / f"{index}.{name}")]
    result = run_client(["curl", "-sS", "--fail", "--noproxy", "*", "--max-time", "30",
                         "-w", "%{num_connects}\n", *targets], shim)
    assert result.returncode == 0, result.stderr
    return sum(int(count) for count in result.stdout.split())


def fetch_every_file_with_curl(server, shim, docroot, tmp_path):
    """Each file by its own curl, then each file twice by one curl over one
    keep-alive connection; every download must equal its original. Returns the
    number of connections made."""
    connections = sum(curl(server, shim, [name], tmp_path / f"alone-{name}") for name in FILE_SIZES)
    keep_alive = curl(server, shim, [*FILE_SIZES, *FILE_SIZES], tmp_path / "keep-alive")
    assert keep_alive == 1
    downloads = sorted(tmp_path.glob("alone-*/*")) + sorted((tmp_path / "keep-alive").iterdir())
    assert len(downloads) == 3 * len(FILE_SIZES)
    for download in downloads:
        original = docroot / download.name.split(".", 1)[1]
        assert sha256(download) == sha256(original), f"{download} differs from {original.name}"
    return connections + keep_alive


def server_write_apis(server_traces):
    return {api for trace in server_traces for sock in sockets(trace, "server") for api in sock["writes"]["by_api"]}


def test_curl_gets_every_file_intact(start_nginx, shim, docroot, tmp_path):
    nginx = start_nginx()
    connections = fetch_every_file_with_curl(nginx, shim, docroot, tmp_path)
    if shim.active:
        server_traces, _ = assert_server_traces_mirror_clients(shim, nginx, connections)
        assert "sendfile" in server_write_apis(server_traces)


# Once, under the policy that holds bytes in the process: nginx then writes
# file bodies with writev from its own buffers.
@pytest.mark.parametrize("shim", [POLICIES["coalesce"]], ids=["coalesce"], indirect=True)
def test_curl_gets_every_file_intact_without_sendfile(start_nginx, shim, docroot, tmp_path):
    nginx = start_nginx("--sendfile", "off")
    connections = fetch_every_file_with_curl(nginx, shim, docroot, tmp_path)
    server_traces, _ = assert_server_traces_mirror_clients(shim, nginx, connections)
    assert "sendfile" not in server_write_apis(server_traces)


def test_wrk_gets_every_file_intact(start_nginx, shim, docroot):
    nginx = start_nginx()
    result = run_client(["wrk", "-t1", "-c4", "-d2s", "-s", str(VERIFY_BODIES), url(nginx, ""),
                         "--", str(docroot), *FILE_SIZES], shim, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Socket errors" not in result.stdout and "Non-2xx" not in result.stdout, result.stdout
    verified, mismatched = map(int, re.search(r"verified (\d+) mismatched (\d+)", result.stdout).groups())
    assert verified >= len(FILE_SIZES) and mismatched == 0, result.stdout
    if shim.active:
        # wrk hangs up in the middle of the responses in flight when its time is up.
        assert_server_traces_mirror_clients(shim, nginx, clients_read_everything=False)
