"""`tcpadvise bench`: the seeds' experiments (../shared/seeds) on this machine
and path, run with tcpadvise-loadgen, summarised by bench_stats and written
as the calibration `tcpadvise report --calibration FILE` reads.

The path is loopback, a veth pair between two network namespaces of our own
(--link PROFILE, bench_netns), or a far end the user runs elsewhere with
`tcpadvise bench-server` (--target HOST:PORT). Each suite (bench_suites) lists
its arms; every arm runs `runs` times, arms interleaved run by run so that a
drift of the machine hits them all alike.
"""

import contextlib
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import schemas
from ..errors import BenchError, LoadgenNotFoundError, ShimNotFoundError
from ..policy.config import compiled_every_socket_config
from ..record.shim import find_helper, find_shim, isolated_environment, shim_environment
from ..rules.calibration import CALIBRATION_SCHEMA
from . import leftovers
from .netns import PROFILES, failure_reason, veth_pair
from .servers import ServerArm, dies_with_bench, run_server_arm
from .suites import SUITES, Arm, Settings

LOADGEN_ENV = "TCPADVISE_LOADGEN"
LOADGEN_NAME = "tcpadvise-loadgen"
RESULTS_SCHEMA = schemas.uri("tcpadvise.bench/1")


@dataclass(frozen=True)
class NetworkPath:
    """Where the load generator connects to, the command prefix that runs it, and
    the prefix that pins it to the far end's CPU (empty for a far end elsewhere)."""

    name: str
    description: str
    target: str
    near_prefix: list[str] = field(default_factory=list)
    rate_bit_s: float | None = None
    pin_prefix: list[str] = field(default_factory=list)


@dataclass
class BenchResult:
    """Everything measured: the full results document and the calibration it yields."""

    results: dict
    calibration: dict


class Progress:
    """What run_bench reports while it runs; the CLI draws it (bench_render.ProgressBar)."""

    def start_suite(self, suite: str, title: str, total: int) -> None:
        """A suite begins with `total` loadgen runs to do."""

    def advance(self, suite: str) -> None:
        """One of them is done."""

    def warn(self, message: str) -> None:
        """Something was left out; the run goes on."""

    def note(self, message: str) -> None:
        """Something the user should know that is no fault (what an earlier bench left, cleaned up)."""


def find_loadgen(environ: Mapping[str, str] = os.environ) -> Path:
    """$TCPADVISE_LOADGEN if set, else the load generator of the shim's installation
    (libexec/tcpadvise; <build>/programs in a build tree): shim.helper_locations."""
    return find_helper(LOADGEN_NAME, LOADGEN_ENV, environ, LoadgenNotFoundError)


def run_bench(
    settings: Settings, progress: Progress, target: str | None = None, link: str | None = None
) -> BenchResult:
    """Run the chosen suites over the chosen path; raise BenchError if an experiment fails."""
    if target and link:
        raise BenchError(
            "--target and --link exclude each other: --link builds a path to a far end of its own"
        )
    loadgen = find_loadgen()
    # Looked up once, and only when a suite has arms under a policy.
    shim = functools.cache(lambda: _find_shim_for_policies(progress))
    if line := leftovers.removed_line(leftovers.remove_dead()):
        progress.note(line)
    with (
        _terminate_as_interrupt(),
        network_path(loadgen, target, link) as path,
        tempfile.TemporaryDirectory(prefix=leftovers.prefix(leftovers.SCRATCH)) as scratch,
    ):
        suite_results = {}
        for name in settings.suites:
            suite = SUITES[name]
            for line in suite.tidy(path):
                progress.note(line)
            for reason in suite.left_out(path, settings):
                progress.warn(reason)
            arms = [arm for arm in suite.arms(settings, path) if arm.policy is None or shim()]
            runs = {arm.key: arm.runs or settings.runs for arm in arms}
            progress.start_suite(name, suite.title, sum(runs.values()))
            documents: dict[str, list[dict]] = {arm.key: [] for arm in arms}
            # Round by round, every arm that still has runs to do: arms of more runs go on alone at the end.
            for round_ in range(max(runs.values(), default=0)):
                for arm in (arm for arm in arms if round_ < runs[arm.key]):
                    arm_shim = None if arm.policy is None else shim()
                    if isinstance(arm, ServerArm):
                        document = run_server_arm(arm, arm_shim, Path(scratch))
                    else:
                        document = run_arm(loadgen, path, arm, arm_shim, Path(scratch))
                    documents[arm.key].append(document)
                    progress.advance(name)
            suite_results[name] = suite.analyze(documents, settings, path)
    host = f"{platform.node()}, Linux {platform.release()}, {os.cpu_count()} CPUs, {path.description}"
    measured_ns = time.time_ns()
    calibration = {
        "schema": CALIBRATION_SCHEMA,
        "host": host,
        "measured_unix_ns": measured_ns,
        "measurements": {},
    }
    for name, result in suite_results.items():
        for measurement, fields in SUITES[name].calibration(result).items():
            calibration["measurements"][measurement] = {
                key: _significant(value) for key, value in fields.items()
            }
    results = {
        "schema": RESULTS_SCHEMA,
        "host": host,
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "measured_unix_ns": measured_ns,
        "path": {
            "name": path.name,
            "description": path.description,
            "target": path.target,
            "rate_bit_s": path.rate_bit_s,
            "round_trips_pinned": " ".join(path.pin_prefix) or None,
        },
        "settings": settings.as_dict(),
        "suites": suite_results,
        "calibration": calibration,
    }
    return BenchResult(results, calibration)


def _significant(value: float) -> float:
    """Measured figures to four significant digits (the results file keeps them all); counts and sizes exact."""
    return value if isinstance(value, int) else float(f"{value:.4g}")


def _find_shim_for_policies(progress: Progress) -> Path | None:
    """The shim for the arms that run under a policy; without one those arms are left out."""
    try:
        return find_shim()
    except ShimNotFoundError as error:
        progress.warn(f"the shim's policy arms are left out: {error}")
        return None


@contextlib.contextmanager
def network_path(loadgen: Path, target: str | None, link: str | None) -> Iterator[NetworkPath]:
    """The path to measure, with a far end of our own unless --target names the user's."""
    if target:
        yield NetworkPath("target", f"to the bench-server at {target}", target)
        return
    pin = _pin_prefix()
    if link:
        profile = PROFILES[link]
        with veth_pair(profile) as pair, far_end(loadgen, pair.far_prefix + pin, pair.far_addr) as far:
            yield NetworkPath(
                f"link-{link}", profile.description, far, pair.near_prefix, profile.rate_bit_s, pin
            )
    else:
        with far_end(loadgen, pin, "127.0.0.1") as far:
            yield NetworkPath("loopback", "loopback", far, pin_prefix=pin)


def _pin_prefix() -> list[str]:
    """taskset to the first CPU we may use. With both ends of a round trip on one CPU, a
    wake-up never crosses CPUs: unpinned, where the scheduler puts the two processes
    swings a small round trip several-fold (5 against 50 us in a 2-vCPU VM)."""
    if shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", str(min(os.sched_getaffinity(0)))]


@contextlib.contextmanager
def far_end(loadgen: Path, prefix: list[str], host: str) -> Iterator[str]:
    """A `tcpadvise-loadgen serve` on host, port chosen by the kernel; yields HOST:PORT."""
    with _loadgen_server([*prefix, str(loadgen), "serve", "--host", host, "--port", "0"]) as server:
        yield f"{host}:{_listening_port(server)}"


@contextlib.contextmanager
def _loadgen_server(command: list[str]) -> Iterator[subprocess.Popen]:
    """The load generator's server, stopped however the block is left (errors and Ctrl-C too)."""
    server = subprocess.Popen(
        [*dies_with_bench(), *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=isolated_environment(),
    )
    try:
        yield server
    finally:
        server.terminate()
        server.wait()
        server.stdout.close()
        server.stderr.close()


def _listening_port(server: subprocess.Popen) -> int:
    line = server.stdout.readline()
    if not line.startswith("listening "):
        server.kill()
        raise BenchError(f"the far end did not start: {_last_error(server.stderr.read(), server.wait())}")
    return int(line.split()[1])


def _last_error(stderr: str, returncode: int) -> str:
    """The load generator's own last word on a failure, without its name."""
    return failure_reason(stderr, returncode).removeprefix(f"{LOADGEN_NAME}: ")


def serve(host: str, port: int, announce: Callable[[int], None]) -> None:
    """Run the far end in the foreground (`tcpadvise bench-server`) until interrupted."""
    with (
        _loadgen_server([str(find_loadgen()), "serve", "--host", host, "--port", str(port)]) as server,
        _terminate_as_interrupt(),
    ):
        announce(_listening_port(server))
        server.wait()


def run_arm(loadgen: Path, path: NetworkPath, arm: Arm, shim: Path | None, scratch: Path) -> dict:
    """One run of one arm: the load generator's JSON document."""
    environment = isolated_environment()
    if arm.policy is not None:
        config = compiled_every_socket_config(scratch, arm.key, arm.policy, shim)
        traces = scratch / "traces"
        traces.mkdir(exist_ok=True)
        # Interval 0: the shim writes its trace at exit only, nothing in the measured time.
        environment = shim_environment(environment, shim, traces, 0)
        environment["TCPADVISE_CONFIG"] = str(config)
    pin = path.pin_prefix if arm.pinned else []
    command = [*path.near_prefix, *pin, str(loadgen), arm.mode, "--target", path.target, *arm.args]
    try:
        finished = subprocess.run(
            command, capture_output=True, text=True, timeout=arm.timeout_seconds, env=environment, check=False
        )
    except subprocess.TimeoutExpired:
        raise BenchError(
            f"{arm.key}: the load generator did not finish in {arm.timeout_seconds:.0f} s"
        ) from None
    if finished.returncode != 0:
        raise BenchError(f"{arm.key}: {_last_error(finished.stderr, finished.returncode)}")
    try:
        return json.loads(finished.stdout.splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise BenchError(f"{arm.key}: the load generator printed no result") from None


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the namespaces and the far end are removed either way."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def prepare_plot_directory(directory: Path) -> None:
    """Create --plot DIR and check that it takes files: before the bench, not after minutes of it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BenchError(f"{directory}: cannot create the plot directory ({error.strerror})") from None
    if not os.access(directory, os.W_OK):
        raise BenchError(f"{directory}: cannot write the plots there (no write permission)")


def write_outputs(result: BenchResult, calibration_path: Path) -> Path:
    """Write the calibration and, beside it, the full results (NAME.results.json); return the latter."""
    results_path = calibration_path.with_name(calibration_path.stem + ".results.json")
    try:
        calibration_path.parent.mkdir(parents=True, exist_ok=True)
        calibration_path.write_text(json.dumps(result.calibration, indent=2) + "\n")
        results_path.write_text(json.dumps(result.results, indent=1) + "\n")
    except OSError as error:
        raise BenchError(f"{error.filename}: cannot write ({error.strerror})") from None
    return results_path
