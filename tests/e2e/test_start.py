"""A process pays at start only for what it uses (issue 16, cheap start): with
the config `tcpadvise record --policy` hands it (policy.resolve_policy: the
compiled form) it never loads yaml-cpp; libunwind is loaded, and the shim's
private heap (jemalloc) set up, with the first TCP socket, not before (the
heap only for a socket a policy acts on); libm
is not loaded at all; a process that never opens a socket writes no trace
and makes none of the system calls of those. Checked in the processes' own
/proc/self/maps and in strace's record of their system calls; the timings
are bench/start_cost.py's."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys

import pytest
from tcpadvise.policy.config import resolve_policy
from testlib import load_traces, policy_env, prog, run, shim_env, shim_path

# A policy that holds every connection's bytes in buffers from the shim's heap.
HOLDING_POLICY = "{coalesce: {adaptive: false}}"

# What the shim used to load into every process under a policy (with libstdc++, which a sanitizer
# build's runtime loads anyway), and what it loads only for sockets.
YAML_LIBRARIES = ("libtcpadvise_config.so", "libyaml-cpp")
UNWINDER = "libunwind"

# Opens one TCP connection to itself, writes and reads on it, then saves its maps (argv[2]: another
# file of /proc/self).
SOCKET_PROGRAM = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
client = socket.create_connection(server.getsockname())
peer, _ = server.accept()
client.sendall(b"ping"); peer.recv(4); peer.sendall(b"pong"); client.recv(4)
open(sys.argv[1], "w").write(open("/proc/self/" + (sys.argv[2] if len(sys.argv) > 2 else "maps")).read())
"""


@pytest.fixture(autouse=True)
def built_shim(monkeypatch):
    if not shim_path().is_file():
        pytest.fail(f"build the shim first: {shim_path()} is missing")
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))


def libraries(maps_text: str) -> set[str]:
    return {line.split()[-1].rsplit("/", 1)[-1] for line in maps_text.splitlines() if "/" in line}


def run_under_cork(tmp_path, command):
    """command under the shim with record's config for --policy cork; its traces' directory."""
    out = tmp_path / "out"
    out.mkdir()
    config = resolve_policy("cork", out)
    assert config.name == "policy.compiled"
    result = run(command, env=shim_env(out, TCPADVISE_CONFIG=str(config)), timeout=60)
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    return out


def test_a_process_without_sockets_loads_neither_yaml_nor_the_unwinder(tmp_path):
    maps = tmp_path / "maps"
    run_under_cork(tmp_path, ["sh", "-c", f"cat /proc/self/maps > {maps}"])
    loaded = libraries(maps.read_text())
    assert "libtcpadvise.so" in loaded  # the shim was there: the rest of the test means something
    assert not {name for name in loaded if name.startswith(YAML_LIBRARIES + (UNWINDER,))}, loaded
    if not os.environ.get("TCPADVISE_PRELOAD_FIRST"):  # a sanitizer's runtime loads libm itself
        assert not {name for name in loaded if name.startswith("libm.so")}, loaded


def test_the_shim_needs_no_library_but_libc():
    # Every library the shim names is loaded into every process it is preloaded into.
    dynamic = subprocess.run(["readelf", "-d", str(shim_path())], capture_output=True, text=True, check=True).stdout
    needed = {line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line}
    assert "libc.so.6" in needed and "libm.so.6" not in needed, needed


# What setting up the private heap (jemalloc), writing a trace and loading
# the unwinder do: none of it belongs in a process that opens no socket.
DEFERRED_CALLS = {
    "jemalloc's settings": "/etc/malloc.conf",
    "jemalloc's look at overcommit": "overcommit_memory",
    "jemalloc's look at huge pages": "transparent_hugepage",
    "jemalloc's CPU count": "sched_getaffinity(",
    "a trace's temporary name": "getrandom(",
    "a trace's host name": "uname(",
    "a trace put in place": "rename(",
    "libm": "libm.so",
    "libunwind": "libunwind",
}


def system_calls(tmp_path, command, env):
    """The system calls of command and its children, as strace -f records them."""
    record = tmp_path / "strace"
    result = subprocess.run(["strace", "-f", "-qq", "-o", str(record), *command], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return record.read_text()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer's runtime makes system calls of its own at start")
@pytest.mark.parametrize("arm", ["observe", "policy"])
def test_a_process_without_sockets_makes_none_of_the_deferred_system_calls(tmp_path, arm):
    out = tmp_path / "out"
    out.mkdir()
    config = resolve_policy("cork", out)
    env = shim_env(out, **({"TCPADVISE_CONFIG": str(config)} if arm == "policy" else {}))
    calls = system_calls(tmp_path, ["/bin/true"], env)
    assert "libtcpadvise.so" in calls  # the shim was loaded, and under a policy read its config
    assert arm == "observe" or str(config) in calls
    made = {what: needle for what, needle in DEFERRED_CALLS.items() if needle in calls}
    assert not made, made
    assert not list(out.glob("*.json")) and not list(out.glob(".*.tmp"))  # no trace


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer's runtime makes system calls of its own at start")
@pytest.mark.parametrize("arm", ["no config", "observe", "nodelay", "cork"])
def test_the_first_socket_a_policy_acts_on_sets_the_heap_up_and_the_trace_is_written(tmp_path, arm):
    """Observed, or under a rule that only sets options, the heap is never set up: the socket table's
    slots, entries, their statistics' tables and a rule's counters come from an arena of their own (a
    fork server's parent then writes none of jemalloc's pages, which every fork would copy). A holding
    policy's state per socket comes from the heap."""
    out = tmp_path / "out"
    out.mkdir()
    env = shim_env(out, **({"TCPADVISE_CONFIG": str(resolve_policy(arm, out))} if arm != "no config" else {}))
    calls = system_calls(tmp_path, [sys.executable, "-c", SOCKET_PROGRAM, str(tmp_path / "maps")], env)
    first_socket = calls.index("socket(AF_INET")
    if arm != "cork":
        assert "/etc/malloc.conf" not in calls
    else:
        assert calls.index("/etc/malloc.conf") > first_socket  # the heap was set up, after the first socket
    assert "rename(" in calls and list(out.glob("python*.json"))


# GCC 12's AddressSanitizer does not hold its allocator's lock across fork: a child of this
# two-thread program can inherit it held, and the child's first thread start (the shim's
# snapshot thread) then waits in ASan's own free() forever (seen 2 in 800 runs under load).
@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer's allocator is not fork-safe in a multithreaded process")
def test_a_fork_while_the_first_socket_sets_the_heap_up_does_not_hang(tmp_path):
    # A thread forks while another opens the process's first socket, when the
    # heap sets itself up: neither may wait for the other (the build of main
    # hung about once in 60 such runs, on jemalloc's fork handler and the
    # socket table's lock taken in opposite orders). Under a policy that
    # holds: observed, a socket needs nothing of the heap (the table's arena).
    env, out = policy_env(tmp_path, HOLDING_POLICY)
    for attempt in range(60):
        try:
            result = subprocess.run([prog("forkfirst")], env=env, capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"run {attempt} hung")
        assert result.returncode == 0 and result.stdout == "ok\n", result.stderr
        for trace in out.iterdir():
            trace.unlink()


def test_the_first_socket_loads_the_unwinder_and_the_policy_acts(tmp_path):
    maps = tmp_path / "maps"
    out = run_under_cork(tmp_path, [sys.executable, "-c", SOCKET_PROGRAM, str(maps)])
    loaded = libraries(maps.read_text())
    assert any(name.startswith(UNWINDER) for name in loaded), loaded
    assert not {name for name in loaded if name.startswith(YAML_LIBRARIES)}, loaded
    (trace,) = [json.loads(path.read_text()) for path in out.glob("python*.json")]
    assert trace["call_sites"]["unwinder"] == "libunwind" and trace["call_sites"]["sampled_writes"] > 0
    assert trace["sockets"] and all(socket["policy"]["settings"]["cork"] for socket in trace["sockets"])


def anonymous_mappings(smaps_text: str):
    """(start, end, VmFlags) of each anonymous mapping in a /proc/PID/smaps, and the end of the shim's
    last mapping of its file."""
    mappings, shim_end, current = [], 0, None
    for line in smaps_text.splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
            start, end = (int(x, 16) for x in fields[0].split("-"))
            current = (start, end) if len(fields) == 5 else None
            if len(fields) > 5 and fields[5].endswith("libtcpadvise.so"):
                shim_end = end
        elif fields[0] == "VmFlags:" and current is not None:
            mappings.append((*current, set(fields[1:])))
    return mappings, shim_end


@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer build lays its zeroed data out without child_layout.ld's marks")
@pytest.mark.parametrize("arm", ["observe", "cork"])
def test_the_shims_memory_asks_for_no_transparent_huge_pages(tmp_path, arm):
    """Where the kernel makes huge pages of any large anonymous mapping (transparent_hugepage "always"),
    the table's arena, the shim's zeroed data (the heap's 2 MiB radix tree there) and the heap's own
    extents took 2 MiB each, zeroed, in every process (RSS 4 -> 6 MB under observe, 4 -> 15 MB under
    cork): each is marked MADV_NOHUGEPAGE (VmFlags "nh")."""
    out = tmp_path / "out"
    out.mkdir()
    env = shim_env(out, TCPADVISE_CONFIG=str(resolve_policy(arm, out)))
    smaps = tmp_path / "smaps"
    result = run([sys.executable, "-c", SOCKET_PROGRAM, str(smaps), "smaps"], env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    mappings, shim_end = anonymous_mappings(smaps.read_text())
    zeroed = [flags for start, end, flags in mappings if start == shim_end]
    assert zeroed and "nh" in zeroed[0], (hex(shim_end), mappings)
    # The arena (8 MiB and the slots) and, under cork, the heap's extents: nothing of Python's is as large.
    large = [(hex(start), end - start, flags) for start, end, flags in mappings if end - start >= 4 << 20]
    assert large and all("nh" in flags for _, _, flags in large), large


@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer's allocator is not fork-safe in a multithreaded process")
def test_forks_while_threads_use_the_heap_do_not_hang(tmp_path):
    # A fork skips jemalloc's fork handlers while the forking thread is the
    # heap's only one (20 forks), and runs them once two more threads
    # allocate and free in it as the forks come (40 forks): no child may
    # inherit a heap lock held, and each writes its whole trace. Under a
    # policy that holds, whose buffers each connection takes from the heap
    # and gives back at its close.
    env, out = policy_env(tmp_path, HOLDING_POLICY)
    for attempt in range(5):
        with subprocess.Popen([prog("forkheap")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as process:
            try:
                stdout, stderr = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # the hung children too
                pytest.fail(f"run {attempt} hung")
        assert process.returncode == 0 and stdout == "ok\n", stderr
        traces = list(load_traces(out).values())
        children = [t for t in traces if t["ppid"] != os.getpid()]
        assert len(children) == 60, len(traces)
        for trace in children:
            # The child's own exchange: 40 writes each way, none of the parent's.
            written = sum(s["writes"]["calls"] for s in trace["sockets"] if not s["inherited"])
            assert written == 80, trace["sockets"]
        for trace in out.iterdir():
            trace.unlink()


def test_hooks_called_before_the_shims_constructor_bind_libc_first(tmp_path):
    """Another library's constructor that runs first calls write, read and socketpair through the
    shim before it has bound libc (real_libc.h: the hot slots hold BindFirst, g_real is constant-
    initialized): each call binds and is made, in order."""
    env = shim_env(tmp_path / "traces")
    early = pathlib.Path(prog("early")).parent / "libearly.so"
    env["LD_PRELOAD"] += f" {early}"  # preloaded after the shim: its constructor runs first
    result = run(["/bin/echo", "main"], env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "first\nearly\nmain\n"
