"""redis-server and three real clients (redis-benchmark, redis-cli --pipe and
a Python RESP client), all under each policy: every command succeeds, every
value reads back byte for byte, and the server's trace mirrors its clients'."""
import json
import re
import sys
from pathlib import Path

import pytest

from harness import assert_server_traces_mirror_clients, run_client, skip_unless_installed
from resp_client import dataset, resp_pieces

skip_unless_installed("redis-server", "redis-benchmark", "redis-cli")

RESP_CLIENT = Path(__file__).with_name("resp_client.py")
SEED = 4004
# redis-benchmark's default tests, named so that each can be checked off.
BENCHMARK_TESTS = ["ping", "set", "get", "incr", "lpush", "rpush", "lpop", "rpop", "sadd", "hset", "spop", "zadd",
                   "zpopmin", "lrange", "mset"]


@pytest.fixture
def redis(start_server):
    return start_server("redis-server.sh")


@pytest.mark.parametrize("pipeline", [1, 16])
def test_redis_benchmark_runs_every_test_without_errors(redis, shim, pipeline):
    result = run_client(["redis-benchmark", "-h", "127.0.0.1", "-p", str(redis.port), "-q", "-n", "2000", "-c", "4",
                         "-P", str(pipeline), "-t", ",".join(BENCHMARK_TESTS)], shim, timeout=90)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # redis-benchmark exits at the first error reply; say so if it printed any other.
    assert "error" not in output.lower(), output
    reported = [line.strip() for line in output.replace("\r", "\n").splitlines() if "requests per second" in line]
    for test in BENCHMARK_TESTS:
        assert any(line.startswith(test.upper()) for line in reported), f"{test} not reported:\n{output}"
    if shim.active:
        assert_server_traces_mirror_clients(shim, redis)


def resp_client(redis, shim, mode, which):
    result = run_client([sys.executable, str(RESP_CLIENT), str(redis.port), str(SEED), mode, which], shim)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_every_value_reads_back_byte_for_byte(redis, shim, tmp_path):
    """Half the values are SET by the Python client, half by redis-cli --pipe;
    the Python client GETs them all back."""
    items = dataset(SEED)
    setter = resp_client(redis, shim, "set", "even")
    assert setter["wrong"] == [] and setter["commands"] == len(items[0::2])

    mass_insert = tmp_path / "odd.resp"
    mass_insert.write_bytes(b"".join(piece for key, value in items[1::2] for piece in resp_pieces(b"SET", key, value)))
    with mass_insert.open("rb") as stdin:
        piped = run_client(["redis-cli", "-h", "127.0.0.1", "-p", str(redis.port), "--pipe"], shim, stdin=stdin)
    assert piped.returncode == 0, piped.stdout + piped.stderr
    assert re.search(rf"errors: 0, replies: {len(items[1::2])}\b", piped.stdout), piped.stdout

    getter = resp_client(redis, shim, "get", "all")
    assert getter["commands"] == len(items)
    assert getter["wrong"] == [], f"{len(getter['wrong'])} values differ from what was SET"

    if shim.active:
        _, client_traces = assert_server_traces_mirror_clients(shim, redis, connections=3)
        by_pid = {trace["pid"]: trace for trace in client_traces}
        for python_client in (setter, getter):
            (sock,) = by_pid[python_client["pid"]]["sockets"]
            assert sock["writes"]["bytes"] == python_client["sent"]
            assert sock["reads"]["bytes"] == python_client["received"]
