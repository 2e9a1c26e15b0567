"""What a bench killed by SIGKILL leaves behind in the temporary directories, and its removal by the next
bench's start (bench.cgroup.remove_stale does the same for its cgroups).

A bench's scratch directory (tempfile's, `tcpadvise-bench-PID-XXXXXXXX`) and each server run's traces
(`/dev/shm/tcpadvise-traces-PID-XXXXXXXX`) carry the bench's process id: a directory named exactly so
whose bench is gone (no process of that id) and that was last changed over a minute ago is a killed
bench's. Its servers died with it (servers.dies_with_bench).
"""

import contextlib
import os
import pwd
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

SCRATCH = "tcpadvise-bench-"
TRACES = "tcpadvise-traces-"
# tempfile's eight random characters after our prefix and the bench's process id: nothing else is ours.
_OURS = re.compile(f"(?:{re.escape(SCRATCH)}|{re.escape(TRACES)})([0-9]+)-[a-z0-9_]{{8}}")
# A live bench's directories carry a live process id; the minute guards against a bench that has just
# started under an id the kernel reused.
_STALE_SECONDS = 60
_SHM = Path("/dev/shm")


def prefix(kind: str) -> str:
    """The mkdtemp prefix of this bench's directories of `kind` (SCRATCH or TRACES)."""
    return f"{kind}{os.getpid()}-"


def remove_dead(parents: tuple[Path, ...] | None = None) -> list[Path]:
    """Remove the directories a dead bench left in `parents` (the temporary directory and /dev/shm); return
    them. Only a directory (not a link) named as ours, of a process id no process has, changed over
    _STALE_SECONDS ago and owned by us (or, for root, by the 'postgres' account a server runs as) goes."""
    removed = []
    for parent in parents or (Path(tempfile.gettempdir()), _SHM):
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(parent), key=lambda entry: entry.name):
                found = _OURS.fullmatch(entry.name)
                if not found or _alive(int(found[1])):
                    continue
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (not stat.S_ISDIR(status.st_mode) or status.st_uid not in _owners()
                        or time.time() - status.st_mtime < _STALE_SECONDS):
                    continue
                # rmtree follows no link (it walks by descriptor).
                shutil.rmtree(entry.path, ignore_errors=True)
                if not os.path.lexists(entry.path):
                    removed.append(Path(entry.path))
    return removed


def removed_line(removed: list[Path]) -> str | None:
    """What remove_dead removed, in one line for the user; None if nothing."""
    if not removed:
        return None
    shown = ", ".join(str(path) for path in removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
    return f"removed {len(removed)} director{'ies' if len(removed) > 1 else 'y'} a killed bench left: {shown}"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        # Another user's process: alive.
        return True
    return True


def _owners() -> set[int]:
    owners = {os.geteuid()}
    if os.geteuid() == 0:
        with contextlib.suppress(KeyError):
            owners.add(pwd.getpwnam("postgres").pw_uid)
    return owners
