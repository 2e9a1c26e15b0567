"""bench.cgroup on this machine's own cgroup file systems: a group counts the CPU
time of everything started in it (children that exit too), v1's cpuacct and
v2's cpu.stat agree, a group is removed however its block ends and with what
was left in it killed, and where no group can be made the reason is said."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tcpadvise.bench import cgroup
from tcpadvise.errors import BenchError

MOUNTINFO = Path("/proc/self/mountinfo").read_text()
OWN = Path("/proc/self/cgroup").read_text()
FOUND = {hierarchy.version: hierarchy for hierarchy in cgroup.hierarchies(MOUNTINFO, OWN)}
# A process that spins for BUSY_S of CPU time (not wall time: a busy machine stretches it), then exits.
BUSY_S = 0.3
SPIN = f"import time\nend = time.process_time() + {BUSY_S}\nwhile time.process_time() < end: pass\n"


def usable_hierarchy(version: int) -> cgroup.Hierarchy:
    hierarchy = FOUND.get(version)
    if hierarchy is None:
        pytest.skip(f"no cgroup v{version} hierarchy that counts CPU time is mounted here")
    if os.geteuid() != 0 or (reason := cgroup.usable(hierarchy)) is not None:
        pytest.skip(f"cgroup v{version} is not usable here: {reason if os.geteuid() == 0 else 'not root'}")
    return hierarchy


def without(version: int) -> str:
    """This machine's mountinfo without the mounts of one cgroup version (a machine that has only the other)."""
    fstype = "cgroup2" if version == 2 else "cgroup"
    return "\n".join(line for line in MOUNTINFO.splitlines() if line.partition(" - ")[2].split(" ")[0] != fstype)


@pytest.mark.parametrize("version", [1, 2])
def test_a_group_counts_its_processes_and_the_children_that_exited(version):
    hierarchy = usable_hierarchy(version)
    with cgroup.cpu_group(hierarchy) as group:
        assert group.usage_ns() == 0
        # Three children spin and exit; their parent, the shell, waits for them.
        script = f'for i in 1 2 3; do {sys.executable} -c "$1"; done'
        subprocess.run([*group.launcher, "sh", "-c", script, "sh", SPIN], check=True, timeout=60)
        assert group.pids() == []
        spent_s = group.usage_ns() / 1e9
    assert 3 * BUSY_S <= spent_s < 3 * BUSY_S + 1, spent_s
    assert not group.path.exists()


def test_v1_and_v2_count_the_same_process_alike():
    groups = usable_hierarchy(1), usable_hierarchy(2)
    with cgroup.cpu_group(groups[0]) as v1, cgroup.cpu_group(groups[1]) as v2:
        # It starts, joins both groups, and only then spins.
        spinner = subprocess.Popen([sys.executable, "-c", f"input()\n{SPIN}"], stdin=subprocess.PIPE, text=True)
        v1.add(spinner.pid)
        v2.add(spinner.pid)
        spinner.communicate("go\n", timeout=60)
        one, two = v1.usage_ns(), v2.usage_ns()
    assert one >= BUSY_S * 1e9 and two >= BUSY_S * 1e9
    assert abs(one - two) <= 0.02 * max(one, two) + 1e6, (one, two)


@pytest.mark.parametrize("version", [1, 2])
def test_a_group_is_removed_with_what_is_left_in_it_killed(version):
    hierarchy = usable_hierarchy(version)
    with pytest.raises(RuntimeError, match="the run failed"):
        with cgroup.cpu_group(hierarchy) as group:
            sleeper = subprocess.Popen([*group.launcher, "sleep", "60"])
            deadline = time.monotonic() + 10
            while sleeper.pid not in group.pids() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert group.pids() == [sleeper.pid]
            raise RuntimeError("the run failed")
    assert sleeper.wait(10) == -9
    assert not group.path.exists()
    assert [path.name for path in hierarchy.directory.iterdir() if path.name == group.path.name] == []


def test_names_are_unpredictable_and_new():
    hierarchy = usable_hierarchy(max(FOUND, default=2))
    with cgroup.cpu_group(hierarchy) as first, cgroup.cpu_group(hierarchy) as second:
        names = first.path.name, second.path.name
    assert names[0] != names[1]
    for name in names:
        assert name.startswith("tcpadvise-bench-") and len(name.removeprefix("tcpadvise-bench-")) == 16
        int(name.removeprefix("tcpadvise-bench-"), 16)


def test_cpu_stat_is_read_in_nanoseconds():
    if 2 in FOUND:
        text = (FOUND[2].directory / "cpu.stat").read_text()
        usec = next(int(line.split()[1]) for line in text.splitlines() if line.startswith("usage_usec "))
        # The live counter only grows.
        assert cgroup.parse_cpu_stat(text) == usec * 1000
    # The form the kernel writes (cgroup v2 without the cpu controller enabled: the core's counters).
    assert cgroup.parse_cpu_stat("usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n") == 1_234_567_000
    with pytest.raises(ValueError, match="usage_usec"):
        cgroup.parse_cpu_stat("user_usec 1\n")


def test_v2_comes_first_and_v1_is_the_fallback():
    if not FOUND:
        pytest.skip("no cgroup hierarchy that counts CPU time is mounted here")
    assert list(FOUND) == sorted(FOUND, reverse=True)
    if 1 in FOUND:
        only_v1 = cgroup.hierarchies(without(2), OWN)
        assert [hierarchy.version for hierarchy in only_v1] == [1]
        if os.geteuid() == 0:
            found = cgroup.find_accounting(without(2), OWN)
            assert isinstance(found, cgroup.Hierarchy) and found.version == 1
            assert found.source.startswith("cgroup v1 cpuacct.usage, in ")


def test_without_a_cgroup_mount_the_reason_is_said():
    reason = cgroup.find_accounting("", OWN)
    assert reason == "no cgroup hierarchy that counts CPU time is mounted (cgroup v2, or v1 with cpuacct)"
    stripped = "\n".join(line for line in MOUNTINFO.splitlines() if " - cgroup" not in line)
    assert cgroup.find_accounting(stripped, OWN) == reason


def test_a_user_who_cannot_make_cgroups_is_told_why():
    if not FOUND:
        pytest.skip("no cgroup hierarchy that counts CPU time is mounted here")
    if os.geteuid() != 0:
        reason = cgroup.cpu_accounting()
    else:
        advisor = Path(cgroup.__file__).resolve().parents[2]
        finished = subprocess.run(
            ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--", sys.executable, "-c",
             "from tcpadvise.bench.cgroup import cpu_accounting; print(cpu_accounting())"],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(advisor)}, timeout=60,
        )
        if finished.returncode != 0:
            pytest.skip(f"cannot run Python as nobody here: {finished.stderr.strip()}")
        reason = finished.stdout.strip()
        if "usable" in reason or "Hierarchy(" in reason:
            pytest.skip("nobody may make cgroups here (a delegated hierarchy)")
    assert reason.startswith("cannot make a cgroup to count the servers' CPU time: ")
    assert "Permission denied" in reason and "needs root" in reason


def test_a_container_mount_of_a_subtree_leads_to_the_own_cgroup():
    line = "40 30 0:35 /{root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"
    own = "0::/machine/app\n"
    assert cgroup.hierarchies(line.format(root="machine"), own)[0].directory == Path("/sys/fs/cgroup/app")
    assert cgroup.hierarchies(line.format(root=""), own)[0].directory == Path("/sys/fs/cgroup/machine/app")
    # A process outside the mounted subtree makes its groups at the mount's root.
    assert cgroup.hierarchies(line.format(root="other"), own)[0].directory == Path("/sys/fs/cgroup")
    v1 = "41 30 0:36 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
    assert cgroup.hierarchies(v1, "3:cpu,cpuacct:/bench\n") == [
        cgroup.Hierarchy(1, Path("/sys/fs/cgroup/cpu,cpuacct/bench"))
    ]
    # A hierarchy without cpuacct counts no CPU time.
    assert cgroup.hierarchies(v1.replace("cpu,cpuacct", "memory"), "4:memory:/\n") == []


def test_removing_a_group_that_cannot_go_is_an_error_naming_it(tmp_path):
    # A directory that is no cgroup: rmdir fails (not empty), as a group with a process that would not die.
    hierarchy = cgroup.Hierarchy(2, tmp_path)
    group = cgroup.CpuGroup(hierarchy)
    (group.path / "kept").write_text("")
    with pytest.raises(BenchError, match=f"{group.path}: cannot remove the bench's cgroup"):
        group.remove()


def aged(path: Path) -> Path:
    """A group made two hours ago, as a killed bench's (a cgroup's directory keeps the time it was made)."""
    past = time.time() - 7200
    os.utime(path, (past, past))
    return path


@pytest.mark.parametrize("version", [1, 2])
def test_a_killed_bench_s_empty_groups_are_removed_and_no_other(version):
    hierarchy = usable_hierarchy(version)
    directory = hierarchy.directory
    made = []

    def group(name: str) -> Path:
        path = directory / name
        path.mkdir()
        made.append(path)
        return path

    hexes = iter(os.urandom(8).hex() for _ in range(8))
    sleeper = None
    try:
        stale = aged(group(f"tcpadvise-bench-{next(hexes)}"))
        # Ours by name and old, but a process is still in it (a server a killed bench left running).
        busy = aged(group(f"tcpadvise-bench-{next(hexes)}"))
        sleeper = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec sleep 60', str(busy / "cgroup.procs")])
        deadline = time.monotonic() + 10
        while str(sleeper.pid) not in (busy / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.01)
        # Ours by name, empty, but just made: another bench's, between its mkdir and its server's start.
        fresh = group(f"tcpadvise-bench-{next(hexes)}")
        # Ours by name, old, no process, but a group inside: the kernel will not remove it.
        parent = aged(group(f"tcpadvise-bench-{next(hexes)}"))
        child = group(f"{parent.name}/inner")
        # Empty and old, but not named as ours.
        foreign = [aged(group(name)) for name in (f"tcpadvise-bench-{next(hexes)}0", f"tcpadvise-bench-{'x' * 16}",
                                                   f"other-{next(hexes)}", f"tcpadvise-bench-{next(hexes).upper()}")]
        removed = cgroup.remove_stale(hierarchy)
        assert stale.name in removed and not stale.exists()
        for kept in (busy, fresh, parent, child, *foreign):
            assert kept.name not in removed and kept.is_dir(), kept
        assert sleeper.poll() is None and (busy / "cgroup.procs").read_text().split() == [str(sleeper.pid)]
        # Nothing of ours left to remove: a second pass removes nothing.
        assert [name for name in cgroup.remove_stale(hierarchy) if directory / name in made] == []
    finally:
        if sleeper is not None:
            sleeper.kill()
            sleeper.wait()
        for path in reversed(made):
            deadline = time.monotonic() + 5
            while path.exists():
                try:
                    path.rmdir()
                except OSError:
                    # EBUSY while the killed sleeper leaves its group.
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
