"""Node.js (libuv closes its sockets with syscall(SYS_close) and reuses the
numbers for files) with an http server and client both under coalesce, and
without the shim: every request is answered, every body arrives intact
(SHA-256 both ways), the server's log files (written right after
sockets closed, on their numbers) hold exactly what was written, and the
policy really held bytes."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from testlib import load_traces, policy_env, start_listening

NODE = shutil.which("node") or shutil.which("nodejs")
HERE = Path(__file__).with_name("node")
REQUESTS = 300

pytestmark = pytest.mark.skipif(NODE is None,
                                reason="node is not installed (scripts/install-deps.sh installs nodejs)")


@pytest.mark.parametrize("policy", [None, "coalesce", "cork", "{coalesce: {adaptive: false}}",
                                    "{cork: {adaptive: false}}"])
def test_node_http_server_and_client_keep_every_byte(tmp_path, policy):
    if policy is None:
        env, traces = None, None
    else:
        env, traces = policy_env(tmp_path, policy)
    log = tmp_path / "server.log"
    server, port = start_listening([NODE, str(HERE / "server.js"), str(log)], env=env)
    try:
        client_log = tmp_path / "client.log"
        cmd = [NODE, str(HERE / "client.js"), str(port), str(REQUESTS), "7", str(client_log)]
        client = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert client.returncode == 0, client.stderr
    assert "tcpadvise: warning" not in client.stderr + server.stderr.read()
    result = json.loads(client.stdout.splitlines()[-1])
    destroyed = len(range(0, REQUESTS, 3))
    assert result == {"requests": REQUESTS, "answered": REQUESTS, "bad_request_hash": 0, "bad_reply": 0,
                      "errors": [], "destroyed": destroyed}, result
    expected = sorted(f"destroyed {i}" for i in range(0, REQUESTS, 3))
    assert sorted(client_log.read_text().splitlines()) == expected
    closed = log.with_name(log.name + ".connections").read_text().splitlines()
    connections = int(log.with_name(log.name + ".count").read_text())
    assert connections >= REQUESTS // 3
    assert closed == ["closed"] * connections, (len(closed), connections, set(closed))
    lines = log.read_text().splitlines()
    paths = sorted(line.split()[0].split("?")[0] for line in lines)
    assert paths == sorted(f"/r{i}" for i in range(REQUESTS))
    if traces is not None:
        loaded = load_traces(traces)
        assert len(loaded) == 2  # the server and the client
        counters = [s["policy"]["counters"] for t in loaded.values() for s in t["sockets"]
                    if "policy" in s]
        assert counters, "no socket carried the policy"
        if "adaptive" not in policy:
            # Node writes each message once: adaptive bursts pass straight through.
            assert sum(c["adaptive"]["bursts_passed_single_write"] for c in counters) > 0, counters
        elif "coalesce" in policy:
            assert sum(c["bytes_held"] for c in counters) > 0
        else:
            assert sum(c["corks"] for c in counters) > 0
        assert all(not c.get("deferred_errors") for c in counters), counters
