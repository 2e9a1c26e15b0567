"""A server socket that changes shape mid-life under the adaptive policies:
its replies alternate between one write and several, in runs long enough to
switch the socket active and passive again. The client must receive every
byte in order, each reply whole, and the trace must show the switches."""
import socket
import subprocess
import sys

import pytest

from testlib import load_traces, policy_env, sockets

# Writes per reply, request by request: passive, active, alternating, passive, active.
SHAPES = [1] * 6 + [3] * 5 + [1, 4] * 5 + [1] * 6 + [2] * 4 + [1] * 2
PIECE = 37  # bytes per write

SERVER = r"""
import socket, sys
shapes = [int(n) for n in sys.argv[1].split(",")]
piece = int(sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
print("listening", listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
sent = 0
for writes in shapes:
    if conn.recv(1) != b"?":
        sys.exit("bad request")
    for _ in range(writes):
        conn.sendall(bytes((sent + i) % 251 for i in range(piece)))
        sent += piece
conn.recv(1)
conn.close()
"""


@pytest.mark.parametrize("policy", ["cork", "coalesce", "{nodelay: true, coalesce: {enter_bursts: 1, leave_bursts: 1}}"])
def test_alternating_reply_shapes_deliver_every_byte_in_order(tmp_path, policy):
    env, traces = policy_env(tmp_path, policy)
    server = subprocess.Popen([sys.executable, "-c", SERVER, ",".join(map(str, SHAPES)), str(PIECE)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline().split()[1])
        received = 0
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            for writes in SHAPES:
                client.sendall(b"?")
                want = writes * PIECE
                reply = b""
                while len(reply) < want:
                    chunk = client.recv(want - len(reply))
                    assert chunk, "the server closed early"
                    reply += chunk
                assert reply == bytes((received + i) % 251 for i in range(want))
                received += want
            client.sendall(b".")
            assert client.recv(1) == b"", "bytes beyond the last reply"
        _, err = server.communicate(timeout=10)
        assert server.returncode == 0, err
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    counters = [s["policy"]["counters"] for t in load_traces(traces).values() for s in sockets(t, "server")
                if "policy" in s]
    assert len(counters) == 1, counters
    adaptive = counters[0]["adaptive"]
    assert adaptive["switches"] >= 2, adaptive
    assert adaptive["bursts_passed_single_write"] >= 6 and adaptive["bursts_held_multi_write"] >= 1, adaptive
