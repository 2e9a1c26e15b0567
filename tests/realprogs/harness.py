"""Real servers and clients run under each policy: the policies, how a test's
processes run (with or without the shim), servers from scripts/realprogs that
a test starts and always stops, and what their traces must agree on."""
import os
import re
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from testlib import REPO, assert_no_sanitizer_report, load_traces, policy_env, sockets, wait_for

SCRIPTS = REPO / "scripts" / "realprogs"

# Every built-in policy and both combinations the config allows; "baseline"
# runs without the shim, to tell a program's own trouble from the shim's.
POLICIES = {
    "baseline": None,
    "observe": "observe",
    "nodelay": "nodelay",
    "cork": "cork",
    "coalesce": "coalesce",
    "nodelay+cork": "{nodelay: true, cork: {}}",
    "nodelay+coalesce": "{nodelay: true, coalesce: {}}",
}


@dataclass
class Shim:
    """How every process of a test runs: its environment, and the directory
    its traces go to (None for the baseline, which runs without the shim)."""
    env: dict
    traces: Path | None

    @classmethod
    def for_policy(cls, policy, tmp_path):
        if policy is None:
            env = dict(os.environ)
            env.pop("LD_PRELOAD", None)
            return cls(env, None)
        return cls(*policy_env(tmp_path, policy))

    @property
    def active(self):
        return self.traces is not None


def skip_unless_installed(*programs):
    """Skips the calling test module when a program it runs is missing."""
    # nginx.sh finds nginx in /usr/sbin even when PATH lacks it.
    search_path = f"{os.environ.get('PATH', '')}:/usr/sbin"
    missing = [program for program in programs if shutil.which(program, path=search_path) is None]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)} (scripts/install-deps.sh installs them)",
                    allow_module_level=True)


def assert_clean_stderr(stderr):
    assert_no_sanitizer_report(stderr)
    assert "tcpadvise:" not in stderr, stderr


def run_client(cmd, shim, stdin=None, timeout=60):
    """Runs a client to its end under the test's shim; its stderr must hold no word from the shim."""
    result = subprocess.run(cmd, env=shim.env, stdin=stdin, capture_output=True, text=True, timeout=timeout)
    assert_clean_stderr(result.stderr)
    return result


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port):
    """True once a socket listens on 127.0.0.1:port. Read from /proc rather than
    by connecting, so the servers' traces hold only the tests' own clients."""
    local = f"0100007F:{port:04X}"
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(fields[1] == local and fields[3] == "0A" for fields in (line.split() for line in lines))


class ForegroundServer:
    """A server from scripts/realprogs, started as `SCRIPT DIR PORT ARGS...`
    in its own session so that it and its children can always be stopped."""

    def __init__(self, script, args, shim, workdir, log_name=None, bad_log_line=None):
        self.port = free_port()
        self.log = workdir / log_name if log_name else None
        self.bad_log_line = bad_log_line
        workdir.mkdir(parents=True)
        self.stderr = workdir / "stderr"
        with self.stderr.open("w") as stderr:
            self.proc = subprocess.Popen([str(SCRIPTS / script), str(workdir), str(self.port), *map(str, args)],
                                         env=shim.env, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                         start_new_session=True)
        if not wait_for(lambda: self.proc.poll() is not None or listening(self.port), timeout=20) \
                or self.proc.poll() is not None:
            self._kill_session()
            raise AssertionError(f"{script} did not listen on port {self.port}: {self.stderr.read_text()}")

    def owns(self, trace):
        """True for the traces of the server process and of its workers."""
        return self.proc.pid in (trace["pid"], trace["ppid"])

    def stop(self):
        """SIGTERM, then checks the server exited 0 with nothing wrong in its stderr and log. Idempotent."""
        if self.proc.returncode is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        finally:
            stragglers = self._kill_session()
        assert not stragglers, f"processes of {self.proc.args[0]} outlived it"
        output = self.stderr.read_text()
        assert self.proc.returncode == 0, f"exit status {self.proc.returncode}: {output}"
        assert_clean_stderr(output)
        if self.bad_log_line:
            bad = [line for line in self.log.read_text().splitlines() if re.search(self.bad_log_line, line)]
            assert not bad, "\n".join(bad)

    def _kill_session(self):
        """Kills whatever is left of the server's session; True if anything was."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        if self.proc.returncode is None:
            self.proc.wait(timeout=20)
        return True


def split_traces(shim, server):
    """The traces of the server's processes and those of every other process (the clients)."""
    traces = load_traces(shim.traces).values()
    return [t for t in traces if server.owns(t)], [t for t in traces if not server.owns(t)]


def total(traces, role, *field):
    """The sum of one field (a path such as "writes", "bytes") over every socket of a role."""
    result = 0
    for trace in traces:
        for sock in sockets(trace, role):
            value = sock
            for key in field:
                value = value[key]
            result += value
    return result


def assert_server_traces_mirror_clients(shim, server, connections=None, clients_read_everything=True):
    """Stops the server, then checks its traces against its clients': each side
    saw the same connections and read exactly the bytes the other wrote (at
    most, when clients hang up in the middle of a response)."""
    server.stop()
    server_traces, client_traces = split_traces(shim, server)
    assert server_traces, f"no trace from the server in {sorted(p.name for p in shim.traces.iterdir())}"
    assert all(t["final"] for t in server_traces + client_traces)
    assert total(server_traces, "server", "connections") == total(client_traces, "client", "connections")
    if connections is not None:
        assert total(server_traces, "server", "connections") == connections
    assert total(server_traces, "server", "writes", "calls") > 0
    assert total(server_traces, "server", "reads", "bytes") == total(client_traces, "client", "writes", "bytes")
    served = total(server_traces, "server", "writes", "bytes")
    received = total(client_traces, "client", "reads", "bytes")
    assert served == received if clients_read_everything else served >= received
    return server_traces, client_traces
