"""The CPU time a server's whole process tree spends, read from a cgroup of its
own (`tcpadvise bench servers`' CPU per request).

A cgroup counts the CPU time of every process and thread in it, including the
processes that exit while it runs (a PostgreSQL backend per connection) and
everything they fork: one number for the whole server, read twice to bound a
window. cgroup v2 says it in cpu.stat (usage_usec, kept for every cgroup
whatever controllers are enabled); v1 in cpuacct.usage (ns) of the cpuacct
hierarchy. A group is made in this process's own cgroup of the hierarchy,
under an unpredictable name, and removed however its run ends: what is still
in it is killed (only the server's processes can be), what will not die is
moved to the parent. A bench killed by SIGKILL removes nothing: a reaper, a
shell outside the group, kills what is in the group when the bench is gone.
"""

import contextlib
import errno
import functools
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import BenchError

_PREFIX = "tcpadvise-bench-"
# The names CpuGroup makes: what remove_stale may remove, and nothing else.
_OURS = re.compile(re.escape(_PREFIX) + "[0-9a-f]{16}")
_REMOVE_SECONDS = 5
# A live bench's group is empty only between its mkdir and its server's start, and between the server's exit
# and its rmdir (moments): an empty group older than this is a killed bench's (SIGKILL skips every cleanup).
_STALE_SECONDS = 60
# The shell that puts itself into the group, then becomes the server: every process the server forks is
# born in the group, and the shell's own start is over before any window opens.
_ENTER = 'echo $$ > "$0" && exec "$@"'
# The shell that waits for its input to close, which happens when the bench removes the group or dies, however
# it dies, then kills what is in the group ($0: its cgroup.procs) until it is empty (a process may fork as it
# goes): the server's processes do not outlive a bench killed by SIGKILL, nor do the ones the parent-death
# signal does not reach (servers.dies_with_bench: nginx's worker outlives its master).
_REAP = ('read _; for _ in 1 2 3 4 5 6 7 8 9 10; do pids=$(cat "$0" 2>/dev/null); [ -n "$pids" ] || exit 0; '
         'kill -KILL $pids 2>/dev/null; sleep 0.05; done')


@dataclass(frozen=True)
class Hierarchy:
    """A cgroup hierarchy that accounts CPU time, and this process's own cgroup in it (where groups are made)."""

    version: int
    directory: Path

    @property
    def source(self) -> str:
        """Which file the CPU time comes from, for a person."""
        counter = "cpu.stat usage_usec" if self.version == 2 else "cpuacct.usage"
        return f"cgroup v{self.version} {counter}, in {self.directory}"


def hierarchies(mountinfo: str, own_cgroups: str) -> list[Hierarchy]:
    """The hierarchies that account CPU time, v2 first, from the text of /proc/self/mountinfo and of
    /proc/self/cgroup (`ID:CONTROLLERS:PATH` lines; v2's is `0::PATH`)."""
    own = {}
    for line in own_cgroups.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            own[2] = path
        elif "cpuacct" in controllers.split(","):
            own[1] = path
    found = {}
    for line in mountinfo.splitlines():
        # ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
        mount, _, filesystem = line.partition(" - ")
        fields, described = mount.split(), filesystem.split()
        if len(fields) < 5 or len(described) < 3:
            continue
        root, mountpoint = _unescaped(fields[3]), _unescaped(fields[4])
        fstype, options = described[0], described[2]
        if fstype == "cgroup2":
            version = 2
        elif fstype == "cgroup" and "cpuacct" in options.split(","):
            version = 1
        else:
            continue
        if version in found or version not in own:
            continue
        found[version] = Hierarchy(version, _own_directory(Path(mountpoint), root, own[version]))
    return [found[version] for version in (2, 1) if version in found]


def _unescaped(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are octal escapes there."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), field)


def _own_directory(mountpoint: Path, root: str, own: str) -> Path:
    """This process's cgroup under the mount, whose root is `root` in the hierarchy (a container mounts
    its own subtree); the mount itself when the process's cgroup lies outside it."""
    relative = os.path.relpath(own, root)
    return mountpoint if relative == "." or relative.split("/")[0] == ".." else mountpoint / relative


def read_usage_ns(group: Path, version: int) -> int:
    """The CPU time the group's processes have spent since it was made, in nanoseconds."""
    if version == 1:
        return int((group / "cpuacct.usage").read_text())
    return parse_cpu_stat((group / "cpu.stat").read_text())


def parse_cpu_stat(text: str) -> int:
    """usage_usec of a cgroup v2 cpu.stat, in nanoseconds."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) * 1000
    raise ValueError("cpu.stat has no usage_usec")


class CpuGroup:
    """A cgroup of its own for one server run: started through `launcher`, read with `usage_ns`."""

    def __init__(self, hierarchy: Hierarchy):
        self.hierarchy = hierarchy
        for _ in range(8):
            path = hierarchy.directory / f"{_PREFIX}{secrets.token_hex(8)}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise BenchError(f"{hierarchy.directory}: cannot make a cgroup of a new name")
        self.path = path

    @property
    def launcher(self) -> list[str]:
        """The command prefix that runs a program inside the group from its first instruction."""
        return ["/bin/sh", "-c", _ENTER, str(self.path / "cgroup.procs")]

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def usage_ns(self) -> int:
        return read_usage_ns(self.path, self.hierarchy.version)

    def pids(self) -> list[int]:
        with contextlib.suppress(FileNotFoundError):
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        return []

    def remove(self) -> None:
        """Kill what is left in the group (the server's processes only), move out what will not die, remove it."""
        deadline = time.monotonic() + _REMOVE_SECONDS
        while True:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as error:
                # EBUSY while a killed process is still on its way out.
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    break
            time.sleep(0.02)
        for pid in self.pids():
            with contextlib.suppress(OSError):
                (self.hierarchy.directory / "cgroup.procs").write_text(f"{pid}\n")
        try:
            self.path.rmdir()
        except FileNotFoundError:
            pass
        except OSError as error:
            raise BenchError(f"{self.path}: cannot remove the bench's cgroup ({error.strerror})") from None


def remove_stale(hierarchy: Hierarchy) -> list[str]:
    """Remove the groups a killed bench left in the hierarchy's directory; return their names. Only a group
    named as CpuGroup names them, that holds no process and was made over _STALE_SECONDS ago (another
    bench running now may have just made its own) goes; the kernel's rmdir refuses a group that has gained a
    process or a group meanwhile, and that one stays too."""
    removed = []
    with contextlib.suppress(OSError):
        for path in sorted(hierarchy.directory.iterdir()):
            if not _OURS.fullmatch(path.name):
                continue
            try:
                if (path / "cgroup.procs").read_text().strip():
                    continue
                if time.time() - path.stat().st_mtime < _STALE_SECONDS:
                    continue
                path.rmdir()
            except OSError:
                # Gone already (its bench removed it), or busy again: not ours to remove now.
                continue
            removed.append(path.name)
    return removed


@contextlib.contextmanager
def cpu_group(hierarchy: Hierarchy) -> Iterator[CpuGroup]:
    """A new group in `hierarchy`, removed however the block is left (a failure to remove it is an error only
    when nothing else went wrong: it never hides the run's own)."""
    group = CpuGroup(hierarchy)
    # Its input is a pipe only this process holds (not inherited by the servers it starts).
    reaper = subprocess.Popen(["/bin/sh", "-c", _REAP, str(group.path / "cgroup.procs")], stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        try:
            yield group
        except BaseException:
            with contextlib.suppress(BenchError):
                group.remove()
            raise
        group.remove()
    finally:
        reaper.stdin.close()
        reaper.wait()


def usable(hierarchy: Hierarchy) -> str | None:
    """None if a group can be made in `hierarchy`, a process put into it and its CPU time read; else why not."""
    try:
        with cpu_group(hierarchy) as group:
            # A shell that waits for its input: the launcher's own program, nothing else looked up.
            waiting = subprocess.Popen(["/bin/sh", "-c", "read _"], stdin=subprocess.PIPE)
            try:
                group.add(waiting.pid)
                group.usage_ns()
            finally:
                waiting.kill()
                waiting.communicate()
    except OSError as error:
        return f"{error.filename or hierarchy.directory}: {error.strerror}"
    except (BenchError, ValueError) as error:
        return str(error)
    return None


def find_accounting(mountinfo: str, own_cgroups: str) -> Hierarchy | str:
    """The first hierarchy that accounts CPU time and is usable here, else why there is none."""
    found = hierarchies(mountinfo, own_cgroups)
    if not found:
        return "no cgroup hierarchy that counts CPU time is mounted (cgroup v2, or v1 with cpuacct)"
    reasons = []
    for hierarchy in found:
        reason = usable(hierarchy)
        if reason is None:
            return hierarchy
        reasons.append(f"cgroup v{hierarchy.version}: {reason}")
    hint = "" if os.geteuid() == 0 else " (making cgroups needs root, or a delegated cgroup)"
    return "cannot make a cgroup to count the servers' CPU time: " + "; ".join(reasons) + hint


@functools.cache
def cpu_accounting() -> Hierarchy | str:
    """This machine's CPU accounting for the servers' runs (looked up once), or why there is none."""
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError as error:
        return f"cannot read {error.filename} ({error.strerror})"
    return find_accounting(mountinfo, own)
