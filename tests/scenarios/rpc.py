#!/usr/bin/env python3
"""rpc: request/response over TCP, a client and the server it forks.

The client sends each request as the writes --request lists (one write per
size), then reads the whole reply; the server reads whole requests and answers
each with one write of --reply bytes. What the shim should find depends on
the options:

  --request 8000,4                  large-write-tail (seed 002: record mark after the body, Nagle on)
  --reply mss+8 --mss 1460          extra-segment (seed 000: replies 8 bytes over one segment)
  --connections 200 --buffers 1048576
                                    buffer-memory (seed 003: fixed 1 MB buffers on many connections)
  --request 200                     healthy: one write per request, default buffers

--mss sets TCP_MAXSEG on both ends, so that loopback has the stable,
Ethernet-sized segment of a real path (loopback's own varies with the
window); --reply mss+N, which needs it, is sized from the snd_mss tcp_info
reports, the same at both ends. Prints one JSON line of what it did.
"""

import argparse
import json
import os
import selectors
import signal
import socket
import struct
import sys

# Either process gives up after this long, so a test never hangs on it.
WATCHDOG_SECONDS = 30
# struct tcp_info (linux/tcp.h): eight one-byte fields, then rto, ato, snd_mss as u32.
TCP_INFO_SND_MSS = struct.Struct("8xIII")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=20, help="requests per connection")
    parser.add_argument("--request", default="200", help="sizes of the writes of one request, e.g. 8000,4")
    parser.add_argument("--reply", default="64", help="reply bytes, or mss+N")
    parser.add_argument("--mss", type=int, default=0, help="TCP_MAXSEG for both ends (0: the kernel's)")
    parser.add_argument("--buffers", type=int, default=0, help="SO_SNDBUF and SO_RCVBUF the client sets")
    args = parser.parse_args(argv)
    args.request = [int(size) for size in args.request.split(",")]
    if args.connections < 1 or args.rounds < 1 or min(args.request) < 1:
        parser.error("connections, rounds and request sizes must be positive")
    if args.reply.startswith("mss+") and not args.mss:
        parser.error("--reply mss+N needs --mss, so that both ends see the same segment size")
    return args


def snd_mss(sock):
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_SND_MSS.size)
    return TCP_INFO_SND_MSS.unpack(info)[2]


def reply_size(spec, sock):
    if spec.startswith("mss+"):
        return snd_mss(sock) + int(spec[4:])
    return int(spec)


def receive_exactly(sock, count):
    chunks = []
    while count > 0:
        chunk = sock.recv(min(count, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def serve(listener, args):
    """Answer every request of every connection, then exit when all have closed."""
    request_bytes = sum(args.request)
    selector = selectors.DefaultSelector()
    for _ in range(args.connections):
        connection, _ = listener.accept()
        selector.register(connection, selectors.EVENT_READ, reply_size(args.reply, connection))
    listener.close()
    open_connections = args.connections
    while open_connections:
        for key, _ in selector.select():
            connection, reply = key.fileobj, key.data
            if receive_exactly(connection, request_bytes) is None:
                selector.unregister(connection)
                connection.close()
                open_connections -= 1
            else:
                connection.sendall(b"r" * reply)
    return 0


def connect(port, args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if args.buffers:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.buffers)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.buffers)
    if args.mss:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, args.mss)
    sock.connect(("127.0.0.1", port))
    return sock


def run_client(port, args):
    connections = [connect(port, args) for _ in range(args.connections)]
    # Both ends see the same segment size once --mss clamps it; the client learns the reply size from its own.
    reply = reply_size(args.reply, connections[0])
    pieces = [b"q" * size for size in args.request]
    writes = 0
    for _ in range(args.rounds):
        for sock in connections:
            for piece in pieces:
                sock.sendall(piece)
                writes += 1
            if receive_exactly(sock, reply) is None:
                sys.exit("rpc: the server closed the connection early")
    for sock in connections:
        sock.close()
    return {"connections": args.connections, "writes": writes, "reply": reply, "pid": os.getpid()}


def main(argv):
    args = parse_args(argv)
    signal.alarm(WATCHDOG_SECONDS)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if args.mss:
        listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, args.mss)
    listener.bind(("127.0.0.1", 0))
    listener.listen(args.connections)
    port = listener.getsockname()[1]
    server = os.fork()
    if server == 0:
        # A normal exit, not os._exit: the shim writes the server's trace at exit.
        sys.exit(serve(listener, args))
    listener.close()
    did = run_client(port, args)
    _, status = os.waitpid(server, 0)
    did["server_status"] = os.waitstatus_to_exitcode(status)
    print(json.dumps(did))
    return 0 if did["server_status"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
