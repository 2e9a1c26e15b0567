"""The trace spool under LD_PRELOAD: a forking process's children write their final traces to the
spool it mapped before its first fork, with no file of their own; the parent's trace is a file; a
child that wrote a snapshot file ends in that file; a spool that cannot be made leaves the children
writing files, with one warning."""
import json
import os
import sys

import pytest

from testlib import invoke, load_traces, run, shim_env, sockets

# FORKER: a server that forks a child per connection it makes to itself; each child writes, reads the
# reply and exits. argv: children, seconds each child waits before it exits, then "kill" to end the
# parent with SIGKILL (no exit handler), "limit" to cap its address space before the first fork, or
# "daemon" to serve from a child of the first process, which listened (as a daemon does), and waits.
FORKER = r"""
import os, resource, signal, socket, sys, time
children, linger, how = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
if how == "daemon":
    daemon = os.fork()
    if daemon != 0:
        os.waitpid(daemon, 0)
        sys.exit(0)
port = listener.getsockname()[1]
if how == "limit":  # room for the program, not for a 64 MiB mapping
    size = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (size + (24 << 20), resource.RLIM_INFINITY))
pids = []
for i in range(children):
    pid = os.fork()
    if pid == 0:
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"x" * (i + 1))
        conn.recv(16)
        time.sleep(linger)
        conn.close()
        os._exit(0)
    pids.append(pid)
    served, _ = listener.accept()
    served.recv(64)
    served.sendall(b"ok")
    served.close()
for pid in pids:
    os.waitpid(pid, 0)
print(os.getpid(), flush=True)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def forker(out, children, linger=0.0, how="exit", **env):
    """FORKER's run and its pid; every child writes its trace unless env says otherwise (these tests
    are about where each child's trace goes, not which children write one)."""
    env.setdefault("TCPADVISE_CHILD_TRACES_EVERY", "1")
    result = run([sys.executable, "-c", FORKER, str(children), str(linger), how], env=shim_env(out, **env))
    return result, int(result.stdout.split()[0])


def test_a_services_children_of_one_connection_write_a_sample_that_stands_for_the_rest(tmp_path):
    """50 children of one connection each (client sockets to the parent's port: one service), the
    defaults: the first 16 write their traces, then the last of every 16 (the 32nd and the 48th),
    which stand for 16 each; the last 2 wrote none and are counted by the spool's header, and the
    report adds them to the last trace of their service. It counts every child, their connections
    and writes; the parent writes in full."""
    out = tmp_path / "out"
    out.mkdir()
    result, parent = forker(out, 50, TCPADVISE_CHILD_TRACES_EVERY="")
    assert result.returncode == 0 and "tcpadvise: warning" not in result.stderr, result.stderr
    traces = load_traces(out)
    children = sorted((t for t in traces.values() if t["ppid"] == parent), key=lambda t: t["start_unix_ns"])
    assert len(children) == 18 and len(traces) == 19
    # A child's start is worked out from its tick count when its trace is written (no clock_gettime in
    # its fork handler): after its parent's, before its own trace.
    (parent_trace,) = (t for t in traces.values() if t["pid"] == parent)
    assert all(parent_trace["start_unix_ns"] < t["start_unix_ns"] <= t["written_unix_ns"] for t in children)
    assert [t.get("represents", 1) for t in children] == [1] * 16 + [16, 16]
    # Each wrote the bytes of its own index: the sampled ones are the 32nd and the 48th.
    sent = [sum(s["writes"]["bytes"] for s in sockets(t, "client")) for t in children]
    assert sent == list(range(1, 17)) + [32, 48]
    report = invoke("report", "--format", "json", out)
    assert report.exit_code == 0, report.output
    document = json.loads(report.stdout)
    assert not [w for w in document["warnings"] if "fork child" in w], document["warnings"]
    clients = [item for item in document["sockets"] if item["role"] == "client"]
    assert sum(item["connections"] for item in clients) == 50
    assert sum(item["writes"]["bytes"] for item in clients) == sum(range(1, 17)) + 16 * 32 + 18 * 48
    assert sorted(item.get("represents", 1) for item in clients)[-2:] == [16, 18]
    text = invoke("report", out)
    assert text.stdout.startswith("tcpadvise report: 19 trace(s), 51 process(es)"), text.stdout
    # Every child writes with TCPADVISE_CHILD_TRACES_EVERY=1.
    every = tmp_path / "every"
    every.mkdir()
    result, parent = forker(every, 20)
    assert result.returncode == 0, result.stderr
    assert len(load_traces(every)) == 21 and all("represents" not in t for t in load_traces(every).values())


def test_children_write_to_the_parents_spool_which_outlives_its_sigkill(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result, parent = forker(out, 30, how="kill")
    assert result.returncode == -9 and "tcpadvise: warning" not in result.stderr, result.stderr
    (spool,) = out.glob("*.spool")
    assert spool.name.startswith(f"python3.{parent}.") or spool.name.startswith(f"python.{parent}.")
    assert spool.stat().st_mode & 0o777 == 0o600
    # No file a child, and the parent, killed, wrote no final trace; its children's are all there.
    assert [path.name for path in out.glob("*.json")] == []
    traces = load_traces(out)
    assert len(traces) == 30 and all(t["ppid"] == parent and t["final"] for t in traces.values())
    assert sorted(sum(s["writes"]["bytes"] for s in sockets(t, "client")) for t in traces.values()) == list(
        range(1, 31))
    report = invoke("report", "--format", "json", out)
    assert report.exit_code == 0, report.output
    document = json.loads(report.stdout)
    assert len(document["traces"]) == 30 and all(f"{spool}#" in name for name in document["traces"])


def test_the_parent_writes_a_file_and_a_child_that_wrote_a_snapshot_ends_in_it(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # Each child lingers past two snapshot intervals: it writes a snapshot file, and its final trace
    # replaces that file (no stale snapshot beside a record).
    result, parent = forker(out, 3, linger=0.6, interval=0.2)
    assert result.returncode == 0, result.stderr
    files = {int(path.name.split(".")[-2]) for path in out.glob("*.json")}
    traces = load_traces(out)
    assert parent in files and files == set(traces)
    assert all(t["final"] for t in traces.values()) and len(traces) == 4
    # Quick children go to the spool.
    quick = tmp_path / "quick"
    quick.mkdir()
    result, parent = forker(quick, 3)
    assert result.returncode == 0, result.stderr
    assert {int(path.name.split(".")[-2]) for path in quick.glob("*.json")} == {parent}
    assert len(load_traces(quick)) == 4


@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer's runtime reserves more address space than the limit leaves")
def test_a_spool_that_cannot_be_mapped_leaves_the_children_writing_files_with_one_warning(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    result, parent = forker(out, 5, how="limit")
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tcpadvise: warning:")]
    assert len(warnings) == 1 and "trace spool" in warnings[0], result.stderr
    assert list(out.glob("*.spool")) == [] and not [p for p in out.iterdir() if p.name.startswith(".")]
    traces = load_traces(out)
    assert len(traces) == 6 and len(list(out.glob("*.json"))) == 6
    line = "the shim could not create its trace spool; fork children wrote trace files"
    assert all(line in t["shim_warnings"] for t in traces.values())


def test_a_daemons_children_all_fit_in_the_spool_its_first_parent_made(tmp_path):
    """The first process makes the spool at its first fork, the daemon's; the daemon forks the
    children, whose traces outgrow the spool's first reservation (256 KiB: some 60 pages): the
    daemon reserves more as the owner would, so no child falls back to a file of its own."""
    out = tmp_path / "out"
    out.mkdir()
    result, daemon = forker(out, 120, how="daemon")
    assert result.returncode == 0 and "tcpadvise: warning" not in result.stderr, result.stderr
    (spool,) = out.glob("*.spool")
    # No file: the daemon's trace and its children's are records of the spool (the first process,
    # which only listened, has nothing to trace).
    assert [path.name for path in out.glob("*.json")] == []
    traces = load_traces(out)
    children = [t for t in traces.values() if t["ppid"] == daemon]
    assert len(traces) == 121 and len(children) == 120
    assert traces[daemon]["ppid"] == int(spool.name.split(".")[1])
