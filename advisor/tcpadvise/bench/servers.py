"""The real servers of `tcpadvise bench servers` (bench.suites.Servers): how
each is prepared once, started on loopback under a policy, loaded by its usual
client and stopped.

redis-server with redis-benchmark GETs, memcached with memcslap gets, nginx
with wrk (a 4 KiB file, sendfile off: one writev a response) and PostgreSQL
with `pgbench -C -S` (a new connection, and a forked backend, per
transaction). The server runs under the arm's policy, the client without the
shim; a run's figures are the requests (transactions) per second the client
reports, so every arm is measured by the same program the same way, and the
CPU time the server's whole process tree spent while the client ran, read from
a cgroup the server runs in (bench.cgroup), over the requests the client made.
"""

import abc
import contextlib
import csv
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import BenchError
from ..policy.config import compiled_every_socket_config
from ..record.shim import isolated_environment, shim_environment
from ..trace import spool
from . import leftovers
from .cgroup import Hierarchy, cpu_group

_CONNECTIONS = 4
_READY_SECONDS = 30
_STOP_SECONDS = 30
# Where Debian puts nginx and PostgreSQL's programs, outside a user's PATH.
_SBIN = "/usr/sbin"
_POSTGRES_LIBDIR = Path("/usr/lib/postgresql")


@dataclass(frozen=True)
class ServerArm:
    """One run of a real server under a policy (None: no shim) with its load client."""

    key: str
    server: "Server"
    policy: dict | None
    seconds: float
    # Where the server's CPU time is counted; None: it is not.
    cpu: Hierarchy | None = None
    # The CPUs the server and its client may run on (taskset); None: any.
    server_cpus: frozenset[int] | None = None
    client_cpus: frozenset[int] | None = None
    # How many times it runs; None: Settings.runs.
    runs: int | None = None
    # TCPADVISE_* settings given to the shim besides the policy (a bench comparing one shim with call
    # sites on and off, say).
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def timeout_seconds(self) -> float:
        return _READY_SECONDS + self.seconds * 3 + 60


class Server(abc.ABC):
    """A real server and the client that loads it. Subclasses say how to run them."""

    name: str
    title: str
    programs: tuple[str, ...]
    stop_signal = signal.SIGTERM

    def missing(self) -> str | None:
        """Why the server cannot run here, or None."""
        absent = [program for program in self.programs if _which(program) is None]
        return f"not installed: {' '.join(absent)} (scripts/install-deps.sh installs them)" if absent else None

    def prepare(self, directory: Path) -> None:
        """Make once what every run of the server needs in `directory` (it exists)."""

    @abc.abstractmethod
    def command(self, directory: Path, port: int) -> list[str]:
        """The command that runs the server in `directory`, listening on 127.0.0.1:`port`."""

    @abc.abstractmethod
    def client(self, port: int, seconds: float) -> list[str]:
        """The command that loads the server for about `seconds`."""

    @abc.abstractmethod
    def rate(self, output: str) -> float | None:
        """Requests per second as the client printed them, or None."""

    @abc.abstractmethod
    def requests(self, output: str, command: Sequence[str]) -> int | None:
        """Every request the client made (`command`, which printed `output`), or None."""

    def run_as(self) -> list[str]:
        """The command prefix the server runs under (root runs it as itself)."""
        return []

    def warmup(self, port: int) -> list[str] | None:
        """A client command run once the server answers, before the measured window; None: none. What a
        server pays once after its start is no request's: under the shim a fork server's first 16
        children of a service each write a trace and sample their call sites, the later ones one in 16
        and one in 1024."""
        return None

    def ready(self, port: int) -> bool:
        """Whether the server, listening on port, answers its clients yet."""
        return True


class Redis(Server):
    name = "redis"
    title = f"redis-server: redis-benchmark GET, {_CONNECTIONS} connections"
    programs = ("redis-server", "redis-benchmark")

    def command(self, directory, port):
        return ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", str(directory), "--logfile", str(directory / "server.log")]

    def client(self, port, seconds):
        # redis-benchmark counts requests, not seconds: about 40,000 GETs a second here.
        requests = max(1000, round(seconds * 40_000))
        return ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(_CONNECTIONS),
                "-n", str(requests), "-t", "get", "--csv"]

    def rate(self, output):
        rows = [row for row in csv.DictReader(output.splitlines()) if row.get("test") == "GET"]
        return float(rows[-1]["rps"]) if rows else None

    def requests(self, output, command):
        # It makes as many as told, and says only how fast.
        return int(command[command.index("-n") + 1])


class Memcached(Server):
    name = "memcached"
    title = f"memcached: memcslap get, {_CONNECTIONS} threads"
    programs = ("memcached", "memcslap")
    _GOT = re.compile(r"Time to get\s+(\d+) keys by\s+\d+ threads:\s+([0-9.]+) seconds")
    _SET = re.compile(r"Time to set\s+(\d+) keys")

    def command(self, directory, port):
        # memcached refuses root unless told which user to be.
        user = ["-u", "root"] if os.geteuid() == 0 else []
        return ["memcached", *user, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "64", "-t", "2"]

    def client(self, port, seconds):
        # Each thread gets every key once: about 15,000 gets a thread a second here.
        keys = max(1000, round(seconds * 15_000))
        return ["memcslap", f"--servers=127.0.0.1:{port}", f"--concurrency={_CONNECTIONS}",
                f"--execute-number={keys}", "--test=get"]

    def rate(self, output):
        found = self._GOT.search(output)
        if not found or float(found[2]) <= 0:
            return None
        return int(found[1]) / float(found[2])

    def requests(self, output, command):
        # It sets each key once, then gets them: the sets are the server's work too.
        got, sets = self._GOT.search(output), self._SET.search(output)
        return int(got[1]) + (int(sets[1]) if sets else 0) if got else None


class Nginx(Server):
    name = "nginx"
    title = f"nginx: wrk, 4 KiB, sendfile off, {_CONNECTIONS} connections"
    programs = ("nginx", "wrk")
    _RATE = re.compile(r"Requests/sec:\s+([0-9.]+)")
    _REQUESTS = re.compile(r"(\d+) requests in ")

    def prepare(self, directory):
        (directory / "docroot").mkdir()
        (directory / "docroot" / "index.html").write_bytes(b"w" * 4096)

    def command(self, directory, port):
        user = "user root root;" if os.geteuid() == 0 else ""
        (directory / "nginx.conf").write_text(
            f"{user}\nworker_processes 1;\ndaemon off;\npid {directory}/nginx.pid;\n"
            f"error_log {directory}/server.log notice;\nevents {{ worker_connections 256; }}\n"
            f"http {{\n  access_log off;\n  client_body_temp_path {directory}/body;\n"
            f"  proxy_temp_path {directory}/proxy;\n  fastcgi_temp_path {directory}/fastcgi;\n"
            f"  uwsgi_temp_path {directory}/uwsgi;\n  scgi_temp_path {directory}/scgi;\n"
            f"  sendfile off;\n  server {{ listen 127.0.0.1:{port}; root {directory}/docroot; }}\n}}\n"
        )
        return [_which("nginx"), "-e", str(directory / "server.log"), "-p", str(directory),
                "-c", str(directory / "nginx.conf")]

    def client(self, port, seconds):
        return ["wrk", "-t1", f"-c{_CONNECTIONS}", f"-d{max(1, round(seconds))}s",
                f"http://127.0.0.1:{port}/index.html"]

    def rate(self, output):
        if "Socket errors" in output or "Non-2xx" in output:
            return None
        found = self._RATE.search(output)
        return float(found[1]) if found else None

    def requests(self, output, command):
        found = self._REQUESTS.search(output)
        return int(found[1]) if found else None


class Postgres(Server):
    name = "postgres"
    title = "PostgreSQL: pgbench -C -S, 2 clients"
    programs = ("pgbench",)
    # SIGINT is PostgreSQL's fast shutdown; SIGTERM waits for its clients.
    stop_signal = signal.SIGINT
    _TPS = re.compile(r"tps = ([0-9.]+)")
    _PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")

    def missing(self):
        if self._bin() is None:
            return "not installed: postgresql (scripts/install-deps.sh installs it)"
        if os.geteuid() == 0 and self._account() is None:
            return "no 'postgres' user to run PostgreSQL as (root cannot): install Debian's postgresql"
        return super().missing()

    @staticmethod
    def _bin() -> Path | None:
        versions = sorted(_POSTGRES_LIBDIR.glob("*/bin/postgres"), key=lambda path: int(path.parts[-3]))
        if versions:
            return versions[-1].parent
        found = shutil.which("postgres")
        return Path(found).resolve().parent if found else None

    @staticmethod
    def _account() -> pwd.struct_passwd | None:
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            return None

    def run_as(self):
        if os.geteuid() != 0:
            return []
        # A change of user clears the parent-death signal (dies_with_bench): set it again after it.
        return ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups", "--pdeathsig", "KILL", "--"]

    def prepare(self, directory):
        account = self._account() if os.geteuid() == 0 else None
        if account:
            os.chown(directory, account.pw_uid, account.pw_gid)
        _run_checked([*self.run_as(), str(self._bin() / "initdb"), "-D", str(directory / "data"), "-A", "trust",
                      "-U", "postgres", "--no-sync"], "initdb", 120)
        with running(self, directory, None, None) as port:
            _run_checked(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-i", "-s", "1",
                          "-q", "postgres"], "pgbench -i", 120)

    def command(self, directory, port):
        return [*self.run_as(), str(self._bin() / "postgres"), "-D", str(directory / "data"), "-h", "127.0.0.1",
                "-p", str(port), "-k", str(directory), "-c", "fsync=off", "-c", "synchronous_commit=off",
                "-c", "full_page_writes=off", "-c", "logging_collector=off"]

    def ready(self, port):
        # PostgreSQL listens before it accepts sessions ("the database system is starting up"), the
        # longer on a busy machine: pgbench's first connection would fail.
        checked = subprocess.run([str(self._bin() / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)],
                                 capture_output=True, env=isolated_environment(), timeout=_READY_SECONDS,
                                 check=False)
        return checked.returncode == 0

    def client(self, port, seconds):
        return ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n", "-c", "2",
                "-T", str(max(1, round(seconds))), "postgres"]

    def warmup(self, port):
        # 40 connections, a backend each: past the first 16 a service's children sample.
        return ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n", "-c", "2",
                "-t", "20", "postgres"]

    def rate(self, output):
        found = self._TPS.search(output)
        return float(found[1]) if found else None

    def requests(self, output, command):
        # A transaction is a connection, its backend and one SELECT.
        found = self._PROCESSED.search(output)
        return int(found[1]) if found else None


SERVERS: tuple[Server, ...] = (Redis(), Memcached(), Nginx(), Postgres())


def run_server_arm(arm: ServerArm, shim: Path | None, scratch: Path) -> dict:
    """One run of a server arm: start the server under the arm's policy, load it, stop it. The document
    holds the client's requests per second, every request it made, the CPU time the server's processes
    spent while it ran (ns; None when arm.cpu is None) and how many traces they wrote (none without the
    shim; at least one under it: proof that the policy ran)."""
    directory = _prepared(arm.server, scratch)
    # Outside the scratch directory (on tmpfs), so removed here however the run ends.
    traces = Path(tempfile.mkdtemp(prefix=leftovers.prefix(leftovers.TRACES), dir=_traces_parent(directory)))
    try:
        with contextlib.ExitStack() as stack:
            # Left last: the server has stopped, what is left of its processes is killed with the group.
            group = stack.enter_context(cpu_group(arm.cpu)) if arm.cpu else None
            port = stack.enter_context(running(arm.server, directory, arm.policy, shim, traces,
                                               [*(group.launcher if group else ()), *pinned(arm.server_cpus)],
                                               arm.settings))
            command = arm.server.client(port, arm.seconds)
            if warmup := arm.server.warmup(port):
                _warm_up(arm, warmup)
            # The window is the client's run: the server's own start (and the shim's), and its warm-up,
            # are before it.
            before = group.usage_ns() if group else 0
            try:
                finished = subprocess.run([*dies_with_bench(), *pinned(arm.client_cpus), *command],
                                          capture_output=True, text=True,
                                          timeout=arm.timeout_seconds, env=isolated_environment(), check=False)
            except subprocess.TimeoutExpired:
                limit = f"{arm.timeout_seconds:.0f} s"
                raise BenchError(f"{arm.key}: {command[0]} did not finish in {limit}") from None
            cpu_ns = group.usage_ns() - before if group else None
        written = sum(1 for _ in traces.glob("*.json")) + spool.records_in(traces)
    finally:
        shutil.rmtree(traces, ignore_errors=True)
    rate = arm.server.rate(finished.stdout) if finished.returncode == 0 else None
    requests = arm.server.requests(finished.stdout, command) if rate is not None else None
    if rate is None or not requests:
        last = (finished.stderr.strip() or finished.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise BenchError(f"{arm.key}: {command[0]} measured nothing (exit {finished.returncode}: {last[0]})")
    return {"requests_per_s": rate, "requests": requests, "cpu_ns": cpu_ns, "traces": written}


def _warm_up(arm: ServerArm, command: Sequence[str]) -> None:
    """Runs the server's warm-up client where the arm's client runs; a BenchError if it fails."""
    try:
        warmed = subprocess.run([*dies_with_bench(), *pinned(arm.client_cpus), *command],
                                capture_output=True, text=True, timeout=arm.timeout_seconds,
                                env=isolated_environment(), check=False)
    except subprocess.TimeoutExpired:
        limit = f"{arm.timeout_seconds:.0f} s"
        raise BenchError(f"{arm.key}: the warm-up {command[0]} did not finish in {limit}") from None
    if warmed.returncode != 0:
        last = (warmed.stderr.strip() or warmed.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise BenchError(f"{arm.key}: the warm-up {command[0]} failed (exit {warmed.returncode}: {last[0]})")


def _traces_parent(directory: Path) -> Path:
    """Where a run's traces go: tmpfs (/dev/shm) when the machine has it. Each process writes a trace
    file, and a fork-per-connection server (PostgreSQL) has a process per connection: on a disk file
    system the file's creation is the file system's cost, not the shim's (ext4 without a journal, here,
    searches past every recently deleted inode: 0.16-0.43 ms a file after the bench's own deletions)."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else directory


def _prepared(server: Server, scratch: Path) -> Path:
    """The server's directory in the bench's scratch, made and prepared by its first run."""
    directory = scratch / server.name
    if not directory.exists():
        # Traversable by a server that runs as another user (PostgreSQL as postgres), never listable.
        scratch.chmod(0o711)
        directory.mkdir(mode=0o700)
        server.prepare(directory)
    return directory


@contextlib.contextmanager
def running(server: Server, directory: Path, policy: dict | None, shim: Path | None,
            traces: Path | None = None, launcher: Sequence[str] = (),
            settings: Sequence[tuple[str, str]] = ()) -> Iterator[int]:
    """The server listening on a free loopback port, under `policy` with its traces in `traces` (policy
    None: without the shim) and the shim's other `settings` (environment), started through `launcher` if
    any (a profiler's command); yields the port, and stops the server however the block is left."""
    environment = isolated_environment()
    if policy is not None:
        config = compiled_every_socket_config(directory, "bench", policy, shim)
        _give_to_owner_of(directory, traces, config)
        # Interval 0: the shim writes its trace at exit only, nothing in the measured time.
        environment = shim_environment(environment, shim, traces, 0)
        environment["TCPADVISE_CONFIG"] = str(config)
        environment.update(settings)
    for attempt in range(_START_ATTEMPTS):
        port = _free_port()
        (directory / "server.log").unlink(missing_ok=True)  # an earlier attempt's bind error
        with (directory / "start.log").open("w") as log:
            process = subprocess.Popen([*dies_with_bench(), *launcher, *server.command(directory, port)], stdout=log,
                                       stderr=subprocess.STDOUT, env=environment, cwd=directory)
        try:
            _wait_listening(server, process, port, directory)
        except _PortTaken:
            if attempt + 1 == _START_ATTEMPTS:
                raise BenchError(f"{server.name} found its port taken {_START_ATTEMPTS} times: {_log_tail(directory)}")
            continue
        except BaseException:
            _stop(server, process)
            raise
        break
    try:
        yield port
    finally:
        _stop(server, process)


class _PortTaken(Exception):
    """The server could not bind the port it was given: another program took it after the probe."""


# _START_ATTEMPTS: a port taken between the probe and the server's bind (by another listener) is rare.
_START_ATTEMPTS = 3
_PORT_TAKEN = re.compile(r"address already in use|could not bind|bind\(\)", re.IGNORECASE)


def _wait_listening(server: Server, process: subprocess.Popen, port: int, directory: Path) -> None:
    deadline = time.monotonic() + _READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if _PORT_TAKEN.search("\n".join(_log_lines(directory))):
                raise _PortTaken
            raise BenchError(f"{server.name} exited with status {process.returncode} before listening: "
                             f"{_log_tail(directory)}")
        with socket.socket() as probe:
            listening = probe.connect_ex(("127.0.0.1", port)) == 0
        if listening and server.ready(port):
            return
        time.sleep(0.02)
    raise BenchError(f"{server.name} did not listen on port {port} within {_READY_SECONDS} s: {_log_tail(directory)}")


def _stop(server: Server, process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(server.stop_signal)
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _log_lines(directory: Path) -> list[str]:
    lines = []
    for name in _LOGS:
        with contextlib.suppress(OSError):
            lines += (directory / name).read_text(errors="replace").strip().splitlines()
    return lines


def _log_tail(directory: Path) -> str:
    lines = _log_lines(directory)
    return lines[-1] if lines else "no output"


def _give_to_owner_of(directory: Path, *paths: Path) -> None:
    """A server running as the directory's owner writes its traces and reads its config."""
    owner = directory.stat()
    if os.geteuid() == 0 and owner.st_uid != 0:
        for path in paths:
            os.chown(path, owner.st_uid, owner.st_gid)


def _run_checked(command: list[str], what: str, timeout: float) -> None:
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=isolated_environment(), check=False)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what} did not finish in {timeout:.0f} s") from None
    if finished.returncode != 0:
        last = (finished.stderr.strip() or finished.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise BenchError(f"{what} failed (exit {finished.returncode}): {last[0]}")


def _free_port() -> int:
    """A free loopback port below the ephemeral range where one fits: the kernel gives the clients'
    outgoing connections (thousands under pgbench -C, here or in another bench) their local ports from
    that range, and one may take a port between this probe and the server's bind."""
    low = _ephemeral_low()
    for _ in range(100 if low > _LOWEST_PORT + 1000 else 0):
        port = random.randrange(_LOWEST_PORT, low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


_LOWEST_PORT = 10_000
# The servers' start-up output, and their own log where they keep one.
_LOGS = ("start.log", "server.log")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _LOWEST_PORT


def dies_with_bench() -> list[str]:
    """The command prefix that has the kernel SIGKILL a program when the bench, its parent, dies, however it
    dies (SIGKILL skips every cleanup): setpriv --pdeathsig, which survives exec but not a change of user
    (Postgres.run_as sets it again). Only the program itself gets it, not what it forks: PostgreSQL's backends
    exit when the postmaster is gone, nginx's worker outlives its master (the reaper of the server's cgroup
    kills it: bench.cgroup; without a cgroup, nothing does). Without setpriv (util-linux), nothing."""
    return ["setpriv", "--pdeathsig", "KILL", "--"] if _which("setpriv") else []


# Where a server and its load client run (`bench servers --pin`, bench/cpu_per_request.py --pin): anywhere the
# scheduler puts them; the server on the first CPU this process may use, the client on the next; both on the first.
PINS = ("none", "split", "same")


def placement(pin: str) -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """(the server's CPUs, its client's CPUs) for a PINS mode; None: any. With one CPU, split is same."""
    cpus = sorted(os.sched_getaffinity(0))
    if pin == "none":
        return None, None
    if pin == "same" or len(cpus) < 2:
        return frozenset(cpus[:1]), frozenset(cpus[:1])
    return frozenset(cpus[:1]), frozenset(cpus[1:2])


def pinned(cpus: frozenset[int] | None) -> list[str]:
    """The command prefix that runs a program on `cpus` only (taskset), or nothing."""
    return ["taskset", "-c", ",".join(str(cpu) for cpu in sorted(cpus))] if cpus else []


def _which(program: str) -> str | None:
    return shutil.which(program, path=f"{os.environ.get('PATH', '')}:{_SBIN}")
