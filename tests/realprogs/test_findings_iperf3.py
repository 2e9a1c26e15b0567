"""iperf3 streams, seed 003's own experiment on loopback: 128-byte writes with
TCP_NODELAY (-l 128 -N) must get small-writes-nodelay, a 4 KB SO_SNDBUF
(-w 4K) sndbuf-limited; the data connection is told apart from the control
connection, its bytes are exactly those iperf3 says it sent, and loopback
round trips raise no rtt-variance."""
import json
import subprocess

from findings import assert_no_alarm_above_info, findings, items, observe, report
from harness import assert_clean_stderr, free_port, listening, skip_unless_installed
from testlib import wait_for

skip_unless_installed("iperf3")


def run_iperf3(tmp_path, *client_options):
    """One iperf3 test of a second, server and client under the shim; iperf3's JSON and the report."""
    shim = observe(tmp_path)
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)], env=shim.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(lambda: listening(port), timeout=20), "iperf3 -s did not listen"
        client = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "1", "-J", *client_options],
                                env=shim.env, capture_output=True, text=True, timeout=60, check=False)
        assert client.returncode == 0, client.stdout + client.stderr
        assert_clean_stderr(client.stderr)
        _, stderr = server.communicate(timeout=20)
        assert server.returncode == 0, stderr
        assert_clean_stderr(stderr)
    finally:
        server.kill()
        server.wait(timeout=10)
    return json.loads(client.stdout), report(shim.traces), server.pid


def data_stream(document, server_pid):
    """The client's data connection (writes only, nothing read) and the server's end of it."""
    (sent,) = [item for item in items(document, program="iperf3", role="client") if item["reads"]["bytes"] == 0]
    (received,) = [item for item in items(document, role="server", pid=server_pid) if item["writes"]["bytes"] == 0]
    assert sent["connections"] == received["connections"] == 1
    return sent, received


# iperf3 opens each data connection with its 37-byte cookie (COOKIE_SIZE), which no total counts.
COOKIE = 37


def check_stream(result, document, server_pid):
    sent, received = data_stream(document, server_pid)
    end = result["end"]
    assert sent["writes"]["bytes"] == COOKIE + end["sum_sent"]["bytes"]
    # The server stops reading when the test's time is up: what it read is what it counted.
    assert received["reads"]["bytes"] == COOKIE + end["sum_received"]["bytes"]
    assert received["reads"]["bytes"] <= sent["writes"]["bytes"]
    # The control connection is its own item: a conversation, not part of the stream.
    control = [item for item in items(document, program="iperf3", role="client") if item["reads"]["bytes"] > 0]
    assert sum(item["connections"] for item in control) == 1
    assert not findings(document, "rtt-variance")
    return sent


def test_small_writes_with_nodelay(tmp_path):
    result, document, server_pid = run_iperf3(tmp_path, "-l", "128", "-N")
    sent = check_stream(result, document, server_pid)
    assert sent["nodelay_set_by"] == "app"
    (finding,) = findings(document, "small-writes-nodelay")
    assert finding["scope"]["role"] == "client" and finding["scope"]["affected_connections"] == 1
    assert_no_alarm_above_info(document, expected={"small-writes-nodelay"})
    # Every write but the cookie is 128 bytes: the median is exact, not a bucket's midpoint.
    assert sent["writes"]["size_p50"] == 128


def test_small_send_buffer(tmp_path):
    result, document, server_pid = run_iperf3(tmp_path, "-w", "4K")
    sent = check_stream(result, document, server_pid)
    assert sent["options_set"]["SO_SNDBUF"] == 4096
    (finding,) = findings(document, "sndbuf-limited")
    assert finding["severity"] == "high"
    assert finding["scope"]["role"] == "client" and finding["scope"]["affected_connections"] == 1
    # The server's receive side set the same small buffer; only the sender can be limited by SO_SNDBUF.
    assert_no_alarm_above_info(document, expected={"sndbuf-limited"})
