"""A small Redis client speaking RESP over a plain blocking socket, run as its
own python3 process so that the shim is preloaded into it.

It SETs or GETs part of a seeded dataset of random values (1 B to 512 KB),
sending commands the ways real clients do: one command or a pipeline of up to
16, as one buffer or as one piece per RESP token (many small writes), through
send, sendmsg or write, and reading replies with recv or read. It prints what
it did as one JSON line:

    resp_client.py PORT SEED set|get even|odd|all
"""
import json
import math
import os
import random
import socket
import sys

# Sizes around the loopback MSS and the 64 KB boundaries, then random ones.
EDGE_SIZES = [1, 2, 3, 100, 1447, 1448, 1449, 4096, 65535, 65536, 65537, 512 * 1024]
RANDOM_SIZES = 120
MAX_SIZE = 512 * 1024
PIPELINE_DEPTHS = [1, 1, 2, 4, 16]


def dataset(seed):
    """[(key, value)]: the same for the same seed in every process."""
    rng = random.Random(seed)
    sizes = EDGE_SIZES + [int(math.exp(rng.uniform(0, math.log(MAX_SIZE)))) for _ in range(RANDOM_SIZES)]
    return [(b"key:%d:%d" % (seed, i), rng.randbytes(size)) for i, size in enumerate(sizes)]


def resp_pieces(*args):
    """A RESP command as its tokens: "*N\\r\\n", then "$LEN\\r\\n", the argument and "\\r\\n" for each."""
    pieces = [b"*%d\r\n" % len(args)]
    for arg in args:
        pieces += [b"$%d\r\n" % len(arg), arg, b"\r\n"]
    return pieces


def send_buffers(sock, api, buffers):
    """Sends every buffer in order: one call per buffer with send or write, all
    of them in one call with sendmsg (as many calls as partial sends need)."""
    if api == "sendmsg":
        pending = [memoryview(b) for b in buffers]
        while pending:
            sent = sock.sendmsg(pending)
            while pending and sent >= len(pending[0]):
                sent -= len(pending.pop(0))
            if sent:
                pending[0] = pending[0][sent:]
        return
    for buffer in buffers:
        view = memoryview(buffer)
        while view:
            sent = sock.send(view) if api == "send" else os.write(sock.fileno(), view)
            view = view[sent:]


class ReplyReader:
    """Parses the replies the client needs (simple strings, errors, bulk strings)."""

    def __init__(self, sock, rng):
        self.sock, self.rng = sock, rng
        self.buffer, self.pos, self.received = bytearray(), 0, 0

    def _fill(self):
        if self.rng.random() < 0.5:
            chunk = self.sock.recv(65536)
        else:
            chunk = os.read(self.sock.fileno(), 65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.received += len(chunk)
        del self.buffer[:self.pos]
        self.pos = 0
        self.buffer += chunk

    def _take(self, count):
        while len(self.buffer) - self.pos < count:
            self._fill()
        data = bytes(self.buffer[self.pos:self.pos + count])
        self.pos += count
        return data

    def _line(self):
        while (end := self.buffer.find(b"\r\n", self.pos)) < 0:
            self._fill()
        line = bytes(self.buffer[self.pos:end])
        self.pos = end + 2
        return line

    def reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"$":
            length = int(rest)
            if length < 0:
                return None
            value = self._take(length)
            if self._take(2) != b"\r\n":
                raise ValueError("bulk string not followed by CRLF")
            return value
        raise ValueError(f"unexpected reply {line[:200]!r}")


def run_commands(sock, reader, commands, rng):
    """Sends the commands in pipelines of random depth, in random ways; returns their replies in order."""
    replies = []
    start = 0
    while start < len(commands):
        batch = commands[start:start + rng.choice(PIPELINE_DEPTHS)]
        start += len(batch)
        pieces = [piece for command in batch for piece in resp_pieces(*command)]
        buffers = pieces if rng.random() < 0.5 else [b"".join(pieces)]
        send_buffers(sock, rng.choice(["send", "sendmsg", "write"]), buffers)
        replies += [reader.reply() for _ in batch]
    return replies


def main(port, seed, mode, which):
    items = dataset(seed)
    items = {"even": items[0::2], "odd": items[1::2], "all": items}[which]
    rng = random.Random(f"{seed} {mode} {which}")
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = ReplyReader(sock, rng)
        if mode == "set":
            commands = [(b"SET", key, value) for key, value in items]
            replies = run_commands(sock, reader, commands, rng)
            wrong = [key for (key, _), reply in zip(items, replies) if reply != b"OK"]
        else:
            commands = [(b"GET", key) for key, _ in items]
            replies = run_commands(sock, reader, commands, rng)
            wrong = [key for (key, value), reply in zip(items, replies) if reply != value]
        sent = sum(len(piece) for command in commands for piece in resp_pieces(*command))
    print(json.dumps({"pid": os.getpid(), "commands": len(commands), "sent": sent, "received": reader.received,
                      "wrong": [key.decode() for key in wrong]}))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
