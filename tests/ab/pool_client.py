"""A connection pool as production clients keep one: N connections to a
redis server opened at start and never closed, each used by its own thread
for PING requests written the Nagle-prone way (the RESP command in three
small writes, then a read of the reply). Runs until SIGINT (then prints a
JSON summary and exits 0, the sockets still open) or until each connection
made --requests requests.

usage: pool_client.py --port P [--connections N] [--think-ms T] [--gap-ms G]
                      [--requests R] [--more N --after S]

--gap-ms pauses between a request's writes; --more opens N more connections
--after S seconds (they join the pool)."""
import argparse
import json
import socket
import sys
import threading
import time

PARTS = (b"*1\r\n", b"$4\r\n", b"PING\r\n")
REPLY = b"+PONG\r\n"


def worker(sock, args, counts, index, done):
    for _ in range(args.requests or sys.maxsize):
        for number, part in enumerate(PARTS):
            if number and args.gap_ms:
                time.sleep(args.gap_ms / 1000)
            sock.sendall(part)
        reply = b""
        while len(reply) < len(REPLY):
            chunk = sock.recv(64)
            if not chunk:
                raise SystemExit("the server closed the connection")
            reply += chunk
        counts[index] += 1
        if args.think_ms:
            time.sleep(args.think_ms / 1000)
    done.release()


def open_connections(n, args, pool, counts, done):
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", args.port))
        pool.append(sock)
        counts.append(0)
        threading.Thread(target=worker, args=(sock, args, counts, len(pool) - 1, done), daemon=True).start()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--think-ms", type=float, default=5)
    parser.add_argument("--gap-ms", type=float, default=0)
    parser.add_argument("--requests", type=int, default=0)
    parser.add_argument("--more", type=int, default=0)
    parser.add_argument("--after", type=float, default=1)
    args = parser.parse_args()
    pool, counts, done = [], [], threading.Semaphore(0)
    open_connections(args.connections, args, pool, counts, done)
    print("ready", flush=True)
    try:
        started = time.monotonic()
        if args.more:
            time.sleep(max(0.0, args.after - (time.monotonic() - started)))
            open_connections(args.more, args, pool, counts, done)
            print("more", flush=True)
        for _ in pool:
            done.acquire()  # for ever without --requests: until SIGINT
    except KeyboardInterrupt:
        pass
    print(json.dumps({"connections": len(pool), "requests": sum(counts)}), flush=True)


if __name__ == "__main__":
    main()
