"""The labelled corpus: the project's own scenario programs (tests/scenarios,
programs/ and tests/progs), each recorded under the shim during the test run, with the rule
it must trigger, or none for the healthy ones.

A case records into a directory: the program that shows the pattern runs
under `tcpadvise record` (so record.json is there too), and its peer, when it
has one, runs under the shim beside it, so that both ends are judged."""

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import pytest
from testlib import BUILD, REPO, prog, shim_env, start_listening

SCENARIOS = REPO / "tests" / "scenarios"
RPC = [sys.executable, str(SCENARIOS / "rpc.py")]
# Every scenario ends well within this; a hang fails the test instead of stalling the suite.
TIMEOUT = 60


def scenario(name: str) -> str:
    """A compiled scenario program, or a skip when this build has none (stream-static needs a static libc)."""
    path = BUILD / "tests" / "scenarios" / name
    if not path.is_file():
        pytest.skip(f"{path} is not built")
    return str(path)


def record(
    out_dir: Path, *command: str, options: tuple[str, ...] = (), wrapper: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """`tcpadvise record -o out_dir OPTIONS -- command`, run through `wrapper`.

    The shim is $TCPADVISE_SHIM, which conftest points at this build's."""
    result = subprocess.run(
        [*wrapper, sys.executable, "-m", "tcpadvise", "record", "-o", str(out_dir), *options, "--", *command],
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    return result


class Peer:
    """A server program in the background, under the shim when given a trace directory.

    Its first line of output is "listening PORT"; `finish` waits for one
    that exits by itself (a stream receiver) and stops one that does not."""

    def __init__(self, command: list[str], out_dir: Path | None, wrapper: tuple[str, ...] = ()):
        environment = shim_env(out_dir) if out_dir is not None else None
        self.proc, port = start_listening([*wrapper, *command], environment)
        self.port = str(port)

    def finish(self, exits_by_itself: bool) -> None:
        if not exits_by_itself:
            self.proc.terminate()
        _, errors = self.proc.communicate(timeout=TIMEOUT)
        assert self.proc.returncode == 0 or not exits_by_itself, errors


def burst(*client_args: str) -> Callable[[Path], None]:
    """programs/burst: a client sending each request as small writes, and its server."""

    def run(out_dir: Path) -> None:
        server = Peer([prog("burst"), "server", "--port", "0"], out_dir)
        try:
            record(out_dir, prog("burst"), "client", "--port", server.port, "--rounds", "20", *client_args)
        finally:
            server.finish(exits_by_itself=False)

    return run


def stream(*sender_args: str, sender: str = "stream") -> Callable[[Path], None]:
    """tests/scenarios/stream.c: a bulk sender recorded, and its receiver under the shim."""

    def run(out_dir: Path) -> None:
        receiver = Peer([scenario("stream"), "receive", "--port", "0"], out_dir)
        try:
            record(out_dir, scenario(sender), "send", "--port", receiver.port, *sender_args)
        finally:
            receiver.finish(exits_by_itself=True)

    return run


def rpc(*args: str) -> Callable[[Path], None]:
    """tests/scenarios/rpc.py: a Python client and the server it forks, both in the run."""
    return lambda out_dir: record(out_dir, *RPC, *args)


def blind(client: Callable[[Path], list[str]]) -> Callable[[Path], None]:
    """A client the shim cannot see, recorded alone, against a receiver outside the shim.

    client(out_dir) gives its command, to which the receiver's port is appended."""

    def run(out_dir: Path) -> None:
        command = client(out_dir)
        receiver = Peer([scenario("stream"), "receive", "--port", "0"], out_dir=None)
        try:
            record(out_dir, *command, receiver.port)
        finally:
            receiver.finish(exits_by_itself=True)

    return run


def static_sender(_out_dir: Path) -> list[str]:
    return [scenario("stream-static"), "send", "--seconds", "0.05", "--port"]


def go_client(out_dir: Path) -> list[str]:
    if shutil.which("go") is None:
        pytest.skip("go is not installed")
    binary = out_dir.parent / "goclient"
    environment = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "GO111MODULE": "off"}
    built = subprocess.run(
        ["go", "build", "-o", str(binary), str(SCENARIOS / "goclient.go")],
        env=environment,
        check=False,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
    )
    assert built.returncode == 0, built.stderr
    return [str(binary)]


class ShapedPath:
    """Two network namespaces joined by a veth pair whose sending end is a token bucket (tc tbf):
    2 Mbit/s with 30 ms of queue, so that a bulk stream fills the queue, round trips vary and
    packets drop. Needs root; every name carries the test's pid, and leaving deletes both
    namespaces (and the pair with them)."""

    SENDER_ADDR, RECEIVER_ADDR = "169.254.77.1", "169.254.77.2"

    def __init__(self):
        tag = f"tcpa{os.getpid()}"
        self.sender, self.receiver = f"{tag}-send", f"{tag}-recv"
        # Interface names have at most 15 characters: "tcpa" and a pid of up to 7 digits leave room.
        self.sender_link, self.receiver_link = f"{tag}s", f"{tag}r"

    def exec_in(self, namespace: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", namespace)

    def __enter__(self) -> Self:
        if shutil.which("ip") is None or shutil.which("tc") is None:
            pytest.skip("ip and tc (iproute2) are needed for a shaped path")
        if subprocess.run(["ip", "netns", "add", self.sender], check=False, capture_output=True).returncode:
            pytest.skip("cannot create network namespaces here (needs root)")
        try:
            for command in (
                f"ip netns add {self.receiver}",
                (
                    f"ip link add {self.sender_link} netns {self.sender} type veth "
                    f"peer name {self.receiver_link} netns {self.receiver}"
                ),
                f"ip -n {self.sender} addr add {self.SENDER_ADDR}/30 dev {self.sender_link}",
                f"ip -n {self.receiver} addr add {self.RECEIVER_ADDR}/30 dev {self.receiver_link}",
                f"ip -n {self.sender} link set {self.sender_link} up",
                f"ip -n {self.receiver} link set {self.receiver_link} up",
                (
                    f"ip netns exec {self.sender} tc qdisc add dev {self.sender_link} root tbf "
                    "rate 2mbit burst 4kb latency 30ms"
                ),
            ):
                subprocess.run(command.split(), check=True, capture_output=True, timeout=TIMEOUT)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_exc) -> None:
        for namespace in (self.sender, self.receiver):
            subprocess.run(
                ["ip", "netns", "del", namespace], check=False, capture_output=True, timeout=TIMEOUT
            )


def shaped_stream(*sender_args: str) -> Callable[[Path], None]:
    """tests/scenarios/stream.c across a ShapedPath, both ends under the shim."""

    def run(out_dir: Path) -> None:
        with ShapedPath() as path:
            receiver = Peer(
                [scenario("stream"), "receive", "--host", path.RECEIVER_ADDR, "--port", "0"],
                out_dir,
                wrapper=path.exec_in(path.receiver),
            )
            try:
                record(
                    out_dir,
                    scenario("stream"),
                    "send",
                    "--host",
                    path.RECEIVER_ADDR,
                    "--port",
                    receiver.port,
                    *sender_args,
                    wrapper=path.exec_in(path.sender),
                )
            finally:
                receiver.finish(exits_by_itself=True)

    return run


@dataclass(frozen=True)
class Case:
    """A scenario, and the rule it must trigger on the scope of that role (None: healthy)."""

    label: str
    record: Callable[[Path], None]
    rule: str | None = None
    role: str | None = None


CORPUS = [
    # Seed 004's experiment: fifteen 2-byte writes, then a 2-byte reply, Nagle on.
    Case("nagle-delayed-ack", burst("--writes", "15", "--size", "2"), "nagle-delayed-ack", "client"),
    # Seed 002: a body of 8000 bytes then a 4-byte record mark, Nagle on.
    Case("large-write-tail", rpc("--request", "8000,4"), "large-write-tail", "client"),
    # Seed 003: a feed of 64-byte writes with TCP_NODELAY, paced so that each leaves alone.
    Case(
        "small-writes-nodelay",
        stream("--size", "64", "--nodelay", "--gap-us", "10", "--seconds", "0.3"),
        "small-writes-nodelay",
        "client",
    ),
    # Seed 003: SO_SNDBUF=4096 set by the program, and a bulk stream of 64 KiB writes.
    Case("sndbuf-limited", stream("--size", "65536", "--sndbuf", "4096"), "sndbuf-limited", "client"),
    # Seed 003: 200 connections with SO_SNDBUF and SO_RCVBUF of 1 MB set by the program.
    Case(
        "buffer-memory",
        rpc("--connections", "200", "--buffers", "1048576", "--rounds", "1"),
        "buffer-memory",
        "client",
    ),
    # Seed 000: replies 8 bytes over one segment (loopback with an Ethernet-sized MSS).
    Case("extra-segment", rpc("--reply", "mss+8", "--mss", "1460"), "extra-segment", "server"),
    # Seed 001: a path whose queue and losses dominate (a bulk stream through a 2 Mbit/s token bucket).
    Case("rtt-variance", shaped_stream("--size", "16384", "--seconds", "1"), "rtt-variance", "client"),
    Case("shim-blind-static", blind(static_sender), "shim-blind"),
    Case("shim-blind-go", blind(go_client), "shim-blind"),
    # Healthy: one write per request, large streaming writes with Nagle on, default buffers.
    Case("healthy-writev", burst("--writes", "15", "--size", "2", "--single-writev")),
    Case("healthy-stream", stream("--size", "65536")),
    Case("healthy-rpc", rpc("--request", "200", "--reply", "2000")),
]
