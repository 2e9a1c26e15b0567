"""What a killed bench left in the temporary directories, removed by the next bench's start: only directories
named exactly as a bench names them, of a process id no process has, a minute old (bench.leftovers). The
removal after a real SIGKILL is in test_bench_servers.py."""

import os
import subprocess
import time

from tcpadvise.bench import leftovers


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def _made(parent, name, age_seconds=120, directory=True):
    path = parent / name
    if directory:
        path.mkdir()
        (path / "trace.json").write_text("{}")
    else:
        path.write_text("")
    past = time.time() - age_seconds
    os.utime(path, (past, past))
    return path


def test_only_a_dead_bench_s_old_directories_named_exactly_are_removed(tmp_path):
    dead, alive = _dead_pid(), os.getpid()
    scratch = _made(tmp_path, f"tcpadvise-bench-{dead}-ab_cd123")
    traces = _made(tmp_path, f"tcpadvise-traces-{dead}-x9y8z7w6")
    kept = [
        _made(tmp_path, f"tcpadvise-bench-{alive}-ab_cd123"),  # its bench runs
        _made(tmp_path, f"tcpadvise-bench-1-ab_cd123"),  # init runs
        _made(tmp_path, f"tcpadvise-traces-{dead}-young123", age_seconds=5),  # a bench under a reused id may have just made it
        _made(tmp_path, f"tcpadvise-bench-{dead}-ab_cd1234"),  # not a name we make
        _made(tmp_path, "tcpadvise-bench-ab_cd123"),  # an older bench's name, without its id
        _made(tmp_path, f"tcpadvise-bench-{dead}-file0000", directory=False),
    ]
    target = _made(tmp_path, "elsewhere")
    link = tmp_path / f"tcpadvise-traces-{dead}-link0000"
    link.symlink_to(target)
    removed = leftovers.remove_dead((tmp_path,))
    assert removed == [scratch, traces]
    assert not scratch.exists() and not traces.exists()
    assert all(path.exists() for path in kept) and link.is_symlink() and (target / "trace.json").exists()
    assert leftovers.removed_line(removed) == f"removed 2 directories a killed bench left: {scratch}, {traces}"
    assert leftovers.removed_line([]) is None


def test_a_bench_names_its_directories_with_its_process_id():
    assert leftovers.prefix(leftovers.SCRATCH) == f"tcpadvise-bench-{os.getpid()}-"
    assert leftovers.prefix(leftovers.TRACES) == f"tcpadvise-traces-{os.getpid()}-"
