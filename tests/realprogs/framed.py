"""A request/reply protocol spoken the ways real Python programs speak it, run
as its own python3 process so that the shim is preloaded into it.

A request is a 16-byte header, b"REQ %011d\\n" with the body's length, then
the body; the reply is 16 bytes, b"OK %012d\\n" with the bytes the server has
received on that connection so far.

    framed.py server
        Listens on 127.0.0.1 (a free port), prints "listening PORT", serves
        each connection in a thread until it closes. Exits 0 on SIGINT.
    framed.py sink
        Listens as the server does and reads each connection to its end,
        discarding what it reads, without writing anything.
    framed.py stream PORT BYTES WRITE_BYTES [--nodelay] [--sndbuf N] [--open]
        One connection that only sends: BYTES in writes of WRITE_BYTES (each
        one send() call; a partial send is followed by another for the rest),
        with TCP_NODELAY and SO_SNDBUF=N if given. Then closes the connection,
        or with --open exits with it still open (a sender whose stream never
        finished).
    framed.py header-body PORT REQUESTS BODY_BYTES
        One connection, Nagle on: each request as two writes, the header then
        the body (an HTTP client sending headers then a POST body).
    framed.py pool PORT CONNECTIONS ROUNDS [--idle]
        A connection pool: every connection opened at the start and never
        closed. Each round sends one request on each connection as two small
        writes (header, then a 100-byte body) with Nagle on. Then prints "done"
        and exits with the connections still open, or with --idle stays idle
        (sleeping, no call to the shim) until killed.

The clients print one JSON line: {"pid", "requests", "writes", "sent",
"received"}, counted from the return values of their own calls.
"""
import ctypes
import json
import os
import socket
import sys
import threading
import time

HEADER = 16
POOL_BODY = 100


def read_exactly(conn, count):
    data = bytearray()
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def serve_connection(conn):
    received = 0
    with conn:
        while True:
            header = read_exactly(conn, HEADER)
            if header is None:
                return
            body = read_exactly(conn, int(header[4:]))
            if body is None:
                return
            received += HEADER + len(body)
            conn.sendall(b"OK %012d\n" % received)


def sink_connection(conn):
    with conn:
        while conn.recv(65536):
            pass


def server(serve=serve_connection):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening {listener.getsockname()[1]}", flush=True)
    try:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()
    except KeyboardInterrupt:
        sys.exit(0)


class Counts:
    def __init__(self):
        self.requests = self.writes = self.sent = self.received = 0

    def send(self, conn, data):
        while data:
            sent = conn.send(data)
            self.writes += 1
            self.sent += sent
            data = data[sent:]

    def request(self, conn, body):
        self.send(conn, b"REQ %011d\n" % len(body))
        self.send(conn, body)
        reply = read_exactly(conn, HEADER)
        assert reply is not None and reply.startswith(b"OK "), reply
        self.received += len(reply)
        self.requests += 1

    def print(self):
        print(json.dumps({"pid": os.getpid(), "requests": self.requests, "writes": self.writes,
                          "sent": self.sent, "received": self.received}), flush=True)


def header_body(port, requests, body_bytes):
    counts = Counts()
    body = os.urandom(body_bytes)
    with socket.create_connection(("127.0.0.1", port)) as conn:
        for _ in range(requests):
            counts.request(conn, body)
    counts.print()


def stream(port, total, write_bytes, options):
    counts = Counts()
    conn = socket.socket()
    if "--nodelay" in options:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if "--sndbuf" in options:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(options[options.index("--sndbuf") + 1]))
    conn.connect(("127.0.0.1", port))
    chunk = os.urandom(write_bytes)
    while counts.sent < total:
        counts.send(conn, chunk[: total - counts.sent])
    counts.print()
    if "--open" in options:
        ctypes.CDLL(None).exit(0)
    conn.close()


def pool(port, connections, rounds, idle):
    counts = Counts()
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    body = b"x" * POOL_BODY
    for _ in range(rounds):
        for conn in conns:
            counts.request(conn, body)
    counts.print()
    print("done", flush=True)
    if idle:
        while True:
            time.sleep(3600)
    # Exit as a C program does, with every connection still open: libc's exit(), which runs the
    # exit handlers (the shim's among them) but not Python's shutdown, which would close them first.
    ctypes.CDLL(None).exit(0)


def main(argv):
    mode = argv[1]
    if mode == "server":
        server()
    elif mode == "sink":
        server(sink_connection)
    elif mode == "stream":
        stream(int(argv[2]), int(argv[3]), int(argv[4]), argv[5:])
    elif mode == "header-body":
        header_body(int(argv[2]), int(argv[3]), int(argv[4]))
    elif mode == "pool":
        pool(int(argv[2]), int(argv[3]), int(argv[4]), "--idle" in argv[5:])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
