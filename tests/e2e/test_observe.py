"""The shim under LD_PRELOAD on the project's own programs: the trace says
exactly what the program did, other descriptors stay untracked, and every
call returns what libc returns."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from testlib import REPO, client_json, holds_only, load_traces, prog, run, shim_env, shim_path, sockets, wait_for

ROUNDS, WRITES, SIZE = 20, 15, 2
thread = pytest.mark.thread


def run_client(tmp_path, port, *args, **env_extra):
    cmd = [prog("burst"), "client", "--port", str(port), *args]
    return run(cmd, env=shim_env(tmp_path, **env_extra))


@pytest.mark.parametrize("api", ["write", "writev", "send", "sendto", "sendmsg"])
def test_client_trace_counts_equal_what_the_client_did(tmp_path, server_factory, api):
    server = server_factory("--writes", "4", "--size", "100", "--reply", "3")
    did = client_json(run_client(tmp_path, server.port, "--rounds", str(ROUNDS), "--writes", "4", "--size", "100",
                                 "--reply", "3", "--api", api, "--nodelay"))[0]
    trace = load_traces(tmp_path)[did["pid"]]
    assert trace["final"] is True
    (sock,) = sockets(trace, "client")
    assert sock["connections"] == 1
    assert sock["peer"] == {"addr": "127.0.0.1", "port": server.port}
    assert sock["writes"]["calls"] == did["writes"] == ROUNDS * 4
    assert sock["writes"]["bytes"] == did["bytes"] == ROUNDS * 400
    assert sock["writes"]["by_api"] == {api: ROUNDS * 4}
    assert holds_only(sock["writes"]["size"], 100, ROUNDS * 4)
    assert sock["writes"]["size"]["sum"] == ROUNDS * 400
    assert sock["writes"]["syscall_ns"]["count"] == -(-did["writes"] // 16)  # one write in 16 is timed
    assert sock["bursts"]["count"] == ROUNDS
    assert holds_only(sock["bursts"]["writes"], 4, ROUNDS)
    assert holds_only(sock["bursts"]["bytes"], 400, ROUNDS)
    assert holds_only(sock["writes"]["iovcnt"], 1, ROUNDS * 4)  # one buffer per call, vector API or not
    assert sock["turns"]["count"] == ROUNDS
    assert sock["reads"]["bytes"] == did["reply_bytes"] == ROUNDS * 3
    assert sock["options_set"] == {"TCP_NODELAY": 1}
    assert sock["options"]["nodelay"] is True
    assert sock["errors"] == {}
    assert sock["tcp_info"]["data_segs_out"] >= ROUNDS


def test_single_writev_is_one_write_of_many_iovecs(tmp_path, server_factory):
    server = server_factory()
    did = client_json(run_client(tmp_path, server.port, "--rounds", str(ROUNDS), "--single-writev"))[0]
    (sock,) = sockets(load_traces(tmp_path)[did["pid"]], "client")
    assert sock["writes"]["calls"] == ROUNDS
    assert sock["writes"]["by_api"] == {"writev": ROUNDS}
    assert holds_only(sock["writes"]["iovcnt"], WRITES, ROUNDS)
    assert holds_only(sock["bursts"]["writes"], 1, ROUNDS)


def test_nagle_delayed_ack_shows_in_turn_times(tmp_path, server_factory):
    """The seed's pattern (004): 15 two-byte writes, Nagle on, a 2-byte reply."""
    server = server_factory()
    did = client_json(run_client(tmp_path, server.port, "--rounds", "10"))[0]
    (sock,) = sockets(load_traces(tmp_path)[did["pid"]], "client")
    turns = sock["turns"]["ns"]
    assert turns["count"] == 10
    # The median turn sits near the 40 ms delayed-ACK timer, not at loopback speed.
    assert turns["max"] > 20e6, turns


@thread  # the snapshot thread
def test_server_trace_counts_each_request_and_reply(tmp_path, server_factory):
    server = server_factory(env=shim_env(tmp_path, interval=0.1))
    did = client_json(run([prog("burst"), "client", "--port", str(server.port), "--rounds", str(ROUNDS)]))[0]

    def server_group():
        traces = load_traces(tmp_path)
        trace = traces.get(server.proc.pid)
        # The connection counts once the server has closed it: a snapshot may
        # come between its reading EOF and its close.
        groups = [s for s in sockets(trace, "server") if s["kind"] == "group"] if trace else []
        return groups if groups and groups[0]["reads"]["eof"] == 1 else None

    (group,) = wait_for(server_group)
    assert group["kind"] == "group" and group["connections"] == 1
    assert group["service_port"] == server.port
    assert group["reads"]["bytes"] == did["bytes"]
    assert group["writes"]["calls"] == ROUNDS and group["writes"]["bytes"] == ROUNDS * 2
    assert group["bursts"]["count"] == ROUNDS
    assert group["turns"]["count"] == ROUNDS - 1  # the last reply gets EOF, not a new request


def test_probe_returns_what_libc_returns(tmp_path):
    plain = run([prog("probe")])
    traced = run([prog("probe")], env=shim_env(tmp_path))
    assert plain.returncode == traced.returncode == 0
    assert traced.stdout == plain.stdout
    assert "tcpadvise" not in traced.stderr


def sum_groups(groups):
    """The counts test_probe_tracks_only_tcp_sockets checks, summed over groups."""
    def add(into, counts):
        for key, n in counts.items():
            into[key] = into.get(key, 0) + n
    total = {"connections": 0, "writes": {"bytes": 0, "by_api": {}}, "reads": {"bytes": 0, "by_api": {}},
             "errors": {}, "options_set": {}}
    for g in groups:
        total["connections"] += g["connections"]
        for side in ("writes", "reads"):
            total[side]["bytes"] += g[side]["bytes"]
            add(total[side]["by_api"], g[side]["by_api"])
        add(total["errors"], g["errors"])
        total["options_set"].update(g["options_set"])
    return total


def test_probe_tracks_only_tcp_sockets(tmp_path):
    run([prog("probe")], env=shim_env(tmp_path))
    (trace,) = load_traces(tmp_path).values()
    assert sorted({s["role"] for s in trace["sockets"]}) == ["client", "server", "unknown"]
    assert all(s["family"] == "ipv4" and s["kind"] == "group" for s in trace["sockets"])
    # Connections of one role fall into groups by shape (an unused one apart): sum them.
    by_role = {role: sum_groups(sockets(trace, role)) for role in ("client", "server", "unknown")}
    # Files, pipes, UDP and Unix sockets wrote 1026 bytes more; none is counted.
    assert by_role["client"]["writes"]["bytes"] == 1242
    assert by_role["server"]["reads"]["bytes"] == 1242
    assert by_role["client"]["connections"] == 3 and by_role["server"]["connections"] == 3
    assert by_role["client"]["writes"]["by_api"] == {
        "write": 5, "writev": 2, "send": 3, "sendto": 1, "sendmsg": 1, "sendmmsg": 1, "sendfile": 1}
    assert by_role["server"]["reads"]["by_api"] == {
        "read": 3, "readv": 1, "recv": 5, "recvfrom": 1, "recvmsg": 1, "recvmmsg": 1}
    assert by_role["client"]["errors"] == {"EFAULT": 1, "EINVAL": 1, "EPIPE": 3}
    assert by_role["server"]["errors"] == {"EAGAIN": 2}
    assert by_role["unknown"]["errors"] == {"EPIPE": 1, "ENOTCONN": 1}
    assert by_role["client"]["options_set"] == {"TCP_NODELAY": 1, "SO_SNDBUF": 1}


@thread
def test_threads_each_get_their_own_exact_counts(tmp_path, server_factory):
    server = server_factory()
    did = client_json(run_client(tmp_path, server.port, "--threads", "4", "--rounds", "30", "--writes", "5",
                                 "--size", "10", "--nodelay", interval=0.01))[0]
    (group,) = sockets(load_traces(tmp_path)[did["pid"]], "client")
    assert group["connections"] == 4
    assert group["writes"]["calls"] == did["writes"] == 4 * 30 * 5
    assert group["bursts"]["count"] == 4 * 30
    assert group["turns"]["count"] == 4 * 30


@thread
def test_fork_child_and_parent_count_their_own_calls(tmp_path, server_factory):
    server = server_factory()
    result = run_client(tmp_path, server.port, "--rounds", "20", "--fork-rounds", "6", "--nodelay")
    child, parent = client_json(result)
    traces = load_traces(tmp_path)
    (parent_sock,) = sockets(traces[parent["pid"]], "client")
    assert parent_sock["writes"]["calls"] == parent["writes"] == 20 * WRITES
    assert parent_sock["bursts"]["count"] == 20
    child_trace = traces[child["child_pid"]]
    assert child_trace["ppid"] == parent["pid"]
    (child_sock,) = sockets(child_trace, "client")
    assert child_sock["kind"] == "socket" and child_sock["open"] is True  # still open when the child exited
    assert child_sock["writes"]["calls"] == child["child_writes"] == 6 * WRITES
    assert child_sock["bursts"]["count"] == 6


def test_program_that_closes_every_fd_keeps_working(tmp_path, server_factory):
    server = server_factory()
    did = client_json(run_client(tmp_path, server.port, "--close-all", "--rounds", "5", "--nodelay"))[0]
    (sock,) = sockets(load_traces(tmp_path)[did["pid"]], "client")
    assert sock["writes"]["calls"] == 5 * WRITES


def test_unwritable_output_dir_warns_once_and_the_program_runs(tmp_path, server_factory):
    server = server_factory()
    result = run_client(tmp_path / "missing" / "dir", server.port, "--rounds", "5", "--nodelay", interval=0.01)
    assert client_json(result)[0]["rounds"] == 5
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tcpadvise: warning:")]
    assert len(warnings) == 1, result.stderr
    assert "missing" in warnings[0]


def test_bad_setting_warns_and_falls_back(tmp_path, server_factory):
    server = server_factory()
    result = run_client(tmp_path, server.port, "--rounds", "3", "--nodelay", TCPADVISE_INTERVAL="soon")
    assert client_json(result)[0]["rounds"] == 3
    assert result.stderr.count("tcpadvise: warning: TCPADVISE_INTERVAL") == 1
    assert load_traces(tmp_path)


def test_turn_sampling_keeps_counts_exact_and_weighs_the_sampled_turns(tmp_path, server_factory):
    # 8 turns in full, then one in 4: 200 turns record 8 + 48, each of the 48 standing for 4.
    server = server_factory("--writes", "4", "--size", "100", "--reply", "3")
    did = client_json(run_client(tmp_path, server.port, "--rounds", "200", "--writes", "4", "--size", "100",
                                 "--reply", "3", "--nodelay", TCPADVISE_TURNS_FIRST="8",
                                 TCPADVISE_TURNS_EVERY="4"))[0]
    trace = load_traces(tmp_path)[did["pid"]]
    assert trace["turn_sampling"] == {"first": 8, "every": 4}
    (sock,) = sockets(trace, "client")
    assert sock["writes"]["calls"] == did["writes"] == 800
    assert sock["writes"]["bytes"] == did["bytes"] == 80000
    assert sock["writes"]["by_api"] == {"write": 800}
    assert sock["reads"]["bytes"] == did["reply_bytes"] == 600
    assert sock["turns"]["count"] == 200
    assert sock["turns"]["sampled"] == {"recorded": 56}
    # Whole blocks: the weighted counts are the true ones.
    assert holds_only(sock["writes"]["size"], 100, 800)
    assert sock["bursts"]["count"] == 200
    assert holds_only(sock["bursts"]["writes"], 4, 200)
    assert holds_only(sock["bursts"]["bytes"], 400, 200)
    assert sock["turns"]["ns"]["count"] == 200
    assert holds_only(sock["reads"]["size"], 3, 200)


def test_a_bad_turn_sampling_setting_warns_and_keeps_the_default(tmp_path, server_factory):
    server = server_factory()
    result = run_client(tmp_path, server.port, "--rounds", "3", "--nodelay", TCPADVISE_TURNS_EVERY="3")
    assert client_json(result)[0]["rounds"] == 3
    assert result.stderr.count("tcpadvise: warning: TCPADVISE_TURNS_EVERY must be a power of two") == 1
    (trace,) = load_traces(tmp_path).values()
    assert trace["turn_sampling"] == {"first": 64, "every": 64}


@thread  # the snapshot thread
def test_snapshots_are_replaced_atomically(tmp_path, server_factory):
    """A reader polling the trace while snapshots are rewritten every 10 ms
    always sees a whole document, and no temp file is left behind."""
    server = server_factory()
    proc = subprocess.Popen([prog("burst"), "client", "--port", str(server.port), "--rounds", "3000", "--nodelay"],
                            env=shim_env(tmp_path, interval=0.01), stdout=subprocess.PIPE, text=True)
    path = tmp_path / f"burst.{proc.pid}.json"
    parsed = []
    while proc.poll() is None:
        if path.exists():
            parsed.append(json.loads(path.read_text()))
    proc.communicate()
    assert any(not t["final"] for t in parsed), "no snapshot seen while the program ran"
    assert json.loads(path.read_text())["final"] is True
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_program_without_tcp_writes_no_trace(tmp_path):
    result = run(["sh", "-c", "echo hi | cat > /dev/null"], env=shim_env(tmp_path))
    assert result.returncode == 0 and result.stderr == ""
    assert list(tmp_path.iterdir()) == []


def can_preload_into_setuid_programs():
    """/etc/ld.so.preload is the one way the loader preloads into a setuid
    program; the test puts it in an overlay of /etc seen only by its own
    mount namespace, which takes root."""
    return os.geteuid() == 0 and shutil.which("unshare") and shutil.which("setpriv") and \
        "overlay" in pathlib.Path("/proc/filesystems").read_text()


@pytest.mark.skipif(not can_preload_into_setuid_programs(), reason="needs root, unshare, setpriv and overlayfs")
def test_setuid_program_leaves_the_shim_inert(server_factory):
    """Run by an unprivileged user, a setuid-root copy of the client (AT_SECURE)
    maps the shim, runs its rounds and leaves no trace, although TCPADVISE_OUT
    is set; the same copy without the setuid bit, run the same way, is traced."""
    server = server_factory("--writes", "1", "--size", "8", "--reply", "8")
    # A world-readable folder: the unprivileged user must reach every file.
    with tempfile.TemporaryDirectory() as folder:
        root = pathlib.Path(folder)
        root.chmod(0o755)
        shim = root / "libtcpadvise.so"
        shutil.copy(shim_path(), shim)
        preload = [os.environ["TCPADVISE_PRELOAD_FIRST"]] if os.environ.get("TCPADVISE_PRELOAD_FIRST") else []
        (root / "upper").mkdir()
        (root / "work").mkdir()
        (root / "upper" / "ld.so.preload").write_text(" ".join([*preload, str(shim)]) + "\n")
        as_nobody = ("mount -t overlay overlay -o lowerdir=/etc,upperdir=$0/upper,workdir=$0/work /etc && "
                     "exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"")

        def run_as_nobody(name, mode, *cmd):
            copy = root / name
            shutil.copy(cmd[0], copy)
            copy.chmod(mode)
            out = root / f"out-{name}"
            out.mkdir(mode=0o777)
            out.chmod(0o777)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_PRELOAD", "TCPADVISE_"))}
            # The folder is also the working directory, where a shim that
            # ignored AT_SECURE would write (secure_getenv hides TCPADVISE_OUT).
            result = run(["unshare", "--mount", "sh", "-c", as_nobody, str(root), "env", f"TCPADVISE_OUT={out}",
                          str(copy), *cmd[1:]], env=env, cwd=out)
            return result, sorted(p.name for p in out.iterdir())

        maps, _ = run_as_nobody("cat-setuid", 0o4755, shutil.which("cat"), "/proc/self/status", "/proc/self/maps")
        assert maps.returncode == 0, maps.stderr
        assert re.search(r"^Uid:\s+65534\s+0\s", maps.stdout, re.M), maps.stdout  # real nobody, effective root
        assert str(shim) in maps.stdout

        client = [prog("burst"), "client", "--port", str(server.port), "--rounds", "3", "--writes", "1", "--size", "8",
                  "--reply", "8", "--nodelay"]
        secure, secure_traces = run_as_nobody("burst-setuid", 0o4755, *client)
        assert client_json(secure)[0]["rounds"] == 3
        assert secure_traces == []
        assert "tcpadvise" not in secure.stderr

        plain, plain_traces = run_as_nobody("burst-plain", 0o755, *client)
        assert client_json(plain)[0]["rounds"] == 3
        assert len(plain_traces) == 1
        (sock,) = sockets(load_traces(root / "out-burst-plain")[client_json(plain)[0]["pid"]], "client")
        assert sock["writes"]["calls"] == 3


def test_shim_exports_only_the_wrapped_libc_names():
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(shim_path())], capture_output=True, text=True,
                             check=True).stdout.split()
    exported = set(symbols[2::3])
    version_script = (REPO / "preload" / "exports.map").read_text()
    listed = set(re.findall(r"\b([A-Za-z_][A-Za-z_0-9]*);", version_script.split("local:")[0]))
    assert exported == listed
    assert "mallocx" not in exported and "malloc" not in exported  # jemalloc stays private
    assert {"write", "read", "__read_chk", "epoll_pwait", "sendfile64", "close_range", "execve", "_exit"} <= exported
    needed = subprocess.run(["readelf", "-d", str(shim_path())], capture_output=True, text=True,
                            check=True).stdout
    if "libasan" not in needed:  # the sanitizer runtimes bring libstdc++ themselves
        assert "libstdc++" not in needed


@thread
def test_signal_handler_opening_and_closing_sockets_never_deadlocks(tmp_path):
    """The handler interrupts the shim at random, also while it holds its
    socket table's lock; close and socket are async-signal-safe, so the
    program must run to its end."""
    result = run([prog("sigclose")], env=shim_env(tmp_path, interval=0.01), timeout=60)
    assert result.returncode == 0, result.stderr
    rounds, signals = (int(word) for word in result.stdout.split()[1::2])
    assert rounds > 100 and signals > 100, result.stdout
    # A socket the handler opened inside the table's lock is not tracked, and the trace says why
    # (it once said the shim had run out of memory).
    (trace,) = load_traces(tmp_path).values()
    assert set(trace["shim_warnings"]) <= {
        "some sockets a signal handler opened while it interrupted the shim were not tracked"}
