"""Small programs with the connection shapes of real servers and clients, run
under the shim by test_live.py and test_signals.py (they know nothing of
tcpadvise). Each prints what it did, so that a test compares the trace with
the program's own counts.

    shapes.py server [--prefork] [--sigint-handler]
        an epoll echo server on 127.0.0.1 (port printed as "listening PORT"),
        stopped by a signal; --prefork accepts in the parent and serves each
        connection in a forked child that ends with os._exit.
    shapes.py stream PORT WRITES SIZE [--nodelay] [--end exit|close]
        a write-only client: WRITES writes of SIZE bytes, then os._exit with
        the connection open (exit) or after closing it (close).
    shapes.py flood PORT SNDBUF SECONDS
        a non-blocking write-only client with SO_SNDBUF SNDBUF writing 64 KiB
        buffers to a peer that reads nothing; prints its writes, partial
        writes and EAGAIN refusals as JSON, then os._exit with it open.
"""
import json
import os
import selectors
import signal
import socket
import sys
import time


def serve(conn):
    """Echoes until the peer closes."""
    while True:
        data = conn.recv(65536)
        if not data:
            return
        conn.sendall(data)


def server(args):
    if "--sigint-handler" in args:
        signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    print("listening", listener.getsockname()[1], flush=True)
    if "--prefork" in args:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
        while True:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                serve(conn)
                conn.close()
                os._exit(0)
            conn.close()
    sel = selectors.EpollSelector()
    sel.register(listener, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                sel.register(conn, selectors.EVENT_READ)
                continue
            data = key.fileobj.recv(65536)
            if data:
                key.fileobj.sendall(data)
            else:
                sel.unregister(key.fileobj)
                key.fileobj.close()


def stream(args):
    port, writes, size = int(args[0]), int(args[1]), int(args[2])
    conn = socket.create_connection(("127.0.0.1", port))
    if "--nodelay" in args:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = b"s" * size
    for _ in range(writes):
        conn.sendall(buffer)
    if args[-1] == "close":
        conn.close()
    print(json.dumps({"pid": os.getpid()}), flush=True)
    os._exit(0)


def flood(args):
    port, sndbuf, seconds = int(args[0]), int(args[1]), float(args[2])
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    conn.connect(("127.0.0.1", port))
    conn.setblocking(False)
    buffer = b"f" * 65536
    counts = {"pid": os.getpid(), "calls": 0, "bytes": 0, "partial": 0, "eagain": 0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        counts["calls"] += 1
        try:
            sent = conn.send(buffer)
        except BlockingIOError:
            counts["eagain"] += 1
            time.sleep(0.001)
            continue
        counts["bytes"] += sent
        counts["partial"] += sent < len(buffer)
    print(json.dumps(counts), flush=True)
    os._exit(0)


if __name__ == "__main__":
    {"server": server, "stream": stream, "flood": flood}[sys.argv[1]](sys.argv[2:])
