"""Run a command under the shim and write record.json beside its traces."""

import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import schemas
from ..errors import CommandNotExecutableError, RecordError, TcpadviseError
from ..policy.config import resolve_policy, write_policy_file
from ..safefile import write_atomically
from ..symbols.elfinfo import blind_spot, inspect_executable, resolve_command
from ..trace import represents
from ..trace.reader import RECORD_FILE, RECORD_SCHEMA, load_inputs
from . import DEFAULT_INTERVAL
from .shim import find_shim, shim_environment

_FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def record(
    command: Sequence[str],
    out_dir: Path,
    interval: float,
    warn: Callable[[str], None],
    policy: str | None = None,
    experiment: str | None = None,
    call_sites: str = "sample",
    metrics_file: Path | None = None,
) -> dict:
    """Run `command` with the shim preloaded, wait for it, write and return the record manifest.

    `warn` gets one sentence before the run if the shim cannot see the binary.
    `policy` is a built-in policy name or a config file (docs/policy-config.md).
    `experiment`, instead of `policy`, is the text of a config (ab.experiment_config)
    to save as OUT_DIR/policy.yaml and apply.
    `call_sites` (off, sample, all) is which writes have their call stack taken.
    `metrics_file`, if given, is rewritten with the traces' metrics every `interval` and at the end
    (metrics_file.py).
    The manifest's exit_status is the command's (128+N when killed by signal N).
    """
    shim = find_shim()
    executable = resolve_command(command[0])
    binary = inspect_executable(executable)
    reason = blind_spot(binary)
    if reason:
        warn(f"{reason}: tcpadvise cannot record its TCP calls (running it anyway)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RecordError(f"{out_dir}: cannot create the output directory ({error.strerror})") from None
    environment = shim_environment(os.environ, shim, out_dir.resolve(), interval)
    environment["TCPADVISE_CALL_SITES"] = call_sites
    if experiment is not None:
        # Written only now, so that a command not found leaves no policy.yaml behind.
        policy = str(write_policy_file(out_dir, experiment))
    if policy is not None:
        environment["TCPADVISE_CONFIG"] = str(resolve_policy(policy, out_dir))
    started = time.time_ns()
    tick = None
    if metrics_file is not None:
        from .metrics_file import MetricsFile

        tick = MetricsFile(metrics_file, out_dir, warn).write
    pid, status = run_forwarding_signals(command, executable, environment, tick, interval)
    manifest = {
        "schema": schemas.uri(RECORD_SCHEMA),
        "command": list(command),
        "pid": pid,
        "exit_status": status,
        "started_unix_ns": started,
        "ended_unix_ns": time.time_ns(),
        "shim": str(shim),
        "binary": {"path": binary.path, "static": binary.static, "go": binary.go},
    }
    if policy is not None:
        manifest["policy"] = policy
    write_json_atomically(out_dir / RECORD_FILE, manifest)
    if tick is not None:
        tick()
    return manifest


def run_forwarding_signals(
    command: Sequence[str],
    executable: Path,
    environment: dict[str, str],
    tick: Callable[[], None] | None = None,
    interval: float = DEFAULT_INTERVAL,
) -> tuple[int, int]:
    """Run the command to its end, passing SIGINT and SIGTERM on; return (pid, exit status).

    `tick`, if given, is called every `interval` seconds while the command runs."""
    child: subprocess.Popen | None = None
    pending: list[int] = []

    def forward(signum: int, _frame) -> None:
        if signum == signal.SIGINT and _terminal_interrupted_child():
            return
        if child is None:
            pending.append(signum)
        else:
            child.send_signal(signum)

    # Handlers go in before the child starts so that no signal in between kills tcpadvise alone.
    previous = {signum: signal.signal(signum, forward) for signum in _FORWARDED_SIGNALS}
    try:
        try:
            child = subprocess.Popen(list(command), executable=executable, env=environment)
        except OSError as error:
            raise CommandNotExecutableError(f"{command[0]}: cannot run it ({error.strerror})") from None
        for signum in pending:
            child.send_signal(signum)
        returncode = None
        while returncode is None:
            try:
                returncode = child.wait(timeout=interval if tick is not None else None)
            except subprocess.TimeoutExpired:
                tick()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return child.pid, exit_status(returncode)


def exit_status(returncode: int) -> int:
    """A shell's exit status for a Popen returncode: 128+N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def summary_line(out_dir: Path) -> str:
    """One line after a run: where the traces are, what they hold, what to run next."""
    next_step = f"next: tcpadvise report {shlex.quote(str(out_dir))}"
    try:
        inputs = load_inputs([out_dir])
    except TcpadviseError as error:
        return f"tcpadvise: the traces in {out_dir} cannot be read ({error}); {next_step}"
    sockets = [socket for trace in inputs.traces for socket in trace.data["sockets"]]
    processes = _count(represents.processes(inputs.traces), "process", "processes")
    connections = _count(
        sum(socket["connections"] for socket in sockets), "TCP connection", "TCP connections"
    )
    writes = _count(sum(socket["writes"]["calls"] for socket in sockets), "write", "writes")
    return f"tcpadvise: traces in {out_dir}: {processes}, {connections}, {writes}; {next_step}"


def write_json_atomically(path: Path, data: dict) -> None:
    """Write a new file, 0600, and rename it into place, as the shim does: no reader sees half a
    file, and a symlink planted in OUT_DIR never sends the write elsewhere (safefile)."""
    try:
        write_atomically(path, json.dumps(data, indent=2) + "\n")
    except OSError as error:
        raise RecordError(f"{path}: cannot write ({error.strerror})") from None


def _terminal_interrupted_child() -> bool:
    """Whether a Ctrl-C came from our terminal, which signals the child (same process group) itself.

    Sending it again would make the child see two interrupts, which many
    programs take as "stop now, skip the clean-up".
    """
    try:
        with open("/dev/tty", "rb", buffering=0) as terminal:
            return os.tcgetpgrp(terminal.fileno()) == os.getpgrp()
    except OSError:
        return False


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number} {singular if number == 1 else plural}"
