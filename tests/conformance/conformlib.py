"""The conformance harness: runs a case of the `conform` driver against a
fresh `conform_peer`, without the shim (baseline) or under one policy, and
checks that the peer received exactly what the driver's calls accepted, that
the driver saw what it sees without the shim, and that the shim's traces
agree.

CONFORM_SEED fixes the seed (default: a new one per session, shown in the
header and in every failure). Every traced socket to the peer must carry the
configured policy, so that a policy silently not applied cannot pass."""
import json
import os
import random
import threading

import pytest

from testlib import BUILD, assert_no_sanitizer_report, load_traces, policy_env, run, sockets, start_listening

SEED = int(os.environ.get("CONFORM_SEED") or random.SystemRandom().randrange(1, 2**31))

# The policy of each shimmed mode, as the config file's `policy:` value, and
# the settings it must show in a trace.
POLICIES = {
    "observe": ("observe", set()),
    "nodelay": ("nodelay", {"nodelay"}),
    "cork": ("cork", {"cork"}),
    "coalesce": ("coalesce", {"coalesce"}),
    "nodelay+coalesce": ("{nodelay: true, coalesce: {}}", {"nodelay", "coalesce"}),
    # cork and coalesce are adaptive (they act only on multi-write bursts);
    # the fixed forms hold every burst.
    "cork-fixed": ("{cork: {adaptive: false}}", {"cork"}),
    "coalesce-fixed": ("{coalesce: {adaptive: false}}", {"coalesce"}),
}
MODES = ["baseline", *POLICIES]

CASE_TIMEOUT = 30
REPORT_TIMEOUT = 10


def conform_prog(name):
    return str(BUILD / "tests" / "conformance" / name)


def released(mode, counters, cause):
    """How many bursts of a socket were let go by cause, or (adaptive
    policies) never held: their first and only write passed straight through."""
    count = counters["flushes"].get(cause, 0)
    if mode.adaptive:
        adaptive = counters["adaptive"]
        count += adaptive["bursts_passed_single_write"] - adaptive["bursts_held_from_second_write"]
    return count


def held_nothing(counters):
    """Whether a socket's policy never held a byte nor corked it."""
    return counters["bytes_held"] == 0 and counters["corks"] == 0


class Mode:
    """How the driver runs: plainly (baseline) or under the shim with one policy."""

    def __init__(self, name, tmp_path):
        self.name = name
        self.env = None
        self.trace_dir = None
        self.settings = set()
        self.adaptive = name in POLICIES and not name.endswith("-fixed")
        if name in POLICIES:
            policy, self.settings = POLICIES[name]
            self.env, self.trace_dir = policy_env(tmp_path, policy)


class Peer:
    """A conform_peer; a thread collects its per-connection reports by client port."""

    def __init__(self, args):
        self.proc, self.port = start_listening([conform_prog("conform_peer"), *map(str, args)])
        self._reports = {}
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self):
        for line in self.proc.stdout:
            report = json.loads(line)
            with self._arrived:
                self._reports[report["port"]] = report
                self._arrived.notify_all()

    def reports(self, ports):
        """The reports of the connections from `ports`, once each has ended."""
        with self._arrived:
            self._arrived.wait_for(lambda: all(p in self._reports for p in ports), REPORT_TIMEOUT)
            missing = [p for p in ports if p not in self._reports]
            assert not missing, f"connections from ports {missing} never ended (seed {SEED})"
            return {p: self._reports[p] for p in ports}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        assert_no_sanitizer_report(self.proc.stderr.read())


def run_case(mode, case, args, peer_args, prog="conform"):
    """Runs one case of the driver prog in mode; checks every connection's bytes; returns the report."""
    cmd = [conform_prog(prog), case, "--seed", str(SEED), *map(str, args)]
    where = f"{mode.name}: {' '.join(cmd)}"
    peer = Peer(peer_args)
    try:
        result = run([*cmd, "--port", str(peer.port)], env=mode.env, timeout=CASE_TIMEOUT)
        assert result.returncode == 0, f"{where} exited {result.returncode}: {result.stderr}"
        # A missing or bad policy file is one warning, and the shim only observes.
        assert "tcpadvise: warning" not in result.stderr, f"{where}: {result.stderr}"
        out = json.loads(result.stdout.splitlines()[-1])
        received = peer.reports([conn["port"] for conn in out["connections"]])
    finally:
        peer.stop()
    for conn in out["connections"]:
        got = received[conn["port"]]
        assert "read_error" not in got and got.get("bad_records", 0) == 0, f"{where}: the peer got {got}"
        assert {key: got.get(key) for key in conn} == conn, \
            f"{where}: the program sent {conn}, the peer received {got}"
    out["peer_port"] = peer.port
    return out


class Conformance:
    """Runs cases in one mode and compares them with the baseline run of the
    same case (made once per session, on first need)."""

    def __init__(self, mode, tmp_path_factory, baselines):
        self.mode = mode
        self._tmp_path_factory = tmp_path_factory
        self._baselines = baselines

    def check(self, case, *args, peer=(), tracked=True, trace_bytes=False, prog="conform"):
        """Runs the case and returns the driver's report. tracked: the
        driver's own trace must show its connection (not after _exit or
        execve, which write none); trace_bytes: its write bytes must equal the
        bytes the driver sent (single-process cases whose every write succeeds);
        prog: the driver's build (conform, conform_fortified, conform_tls)."""
        out = run_case(self.mode, case, args, peer, prog)
        key = (case, args, peer, prog)
        if self.mode.name == "baseline":
            self._baselines.setdefault(key, out["results"])
            return out
        if key not in self._baselines:
            plain = Mode("baseline", self._tmp_path_factory.mktemp("baseline"))
            self._baselines[key] = run_case(plain, case, args, peer, prog)["results"]
        baseline = self._baselines[key]
        assert out["results"] == baseline, \
            f"seed {SEED}, {self.mode.name}: {case} {args} saw {out['results']}, without the shim {baseline}"
        if tracked:
            out["policy_counters"] = self._check_traces(out, trace_bytes)
        return out

    def _check_traces(self, out, trace_bytes):
        """Checks the traces; returns the policy counters of the driver's connections."""
        traces = load_traces(self.mode.trace_dir)
        assert out["pid"] in traces, f"{self.mode.name}: no trace of the driver"
        to_peer = [s for s in sockets(traces[out["pid"]], "client") if s["peer"]["port"] == out["peer_port"]]
        assert to_peer, f"{self.mode.name}: the shim did not track the driver's connection"
        if trace_bytes:
            assert sum(s["writes"]["bytes"] for s in to_peer) == sum(c["bytes"] for c in out["connections"])
        for trace in traces.values():
            for sock in sockets(trace, "client"):
                if sock["peer"]["port"] == out["peer_port"]:
                    self._check_policy(sock)
        return [s["policy"]["counters"] for s in to_peer]  # never empty: to_peer is not, and each has its policy

    def _check_policy(self, sock):
        assert "policy" in sock, f"{self.mode.name}: a socket without its policy: {sock}"
        settings = sock["policy"]["settings"]
        applied = {name for name in ("nodelay", "cork", "coalesce") if settings.get(name) not in (None, False)}
        assert applied == self.mode.settings, f"{self.mode.name}: the trace shows the policy {settings}"


# The fixtures every suite on this driver uses (conformance, faults): each
# test runs once per mode, beside the results of its case without the shim.
@pytest.fixture(scope="session")
def baselines():
    """The results of each case without the shim, by case and arguments."""
    return {}


@pytest.fixture(params=MODES)
def conform(request, tmp_path, tmp_path_factory, baselines):
    return Conformance(Mode(request.param, tmp_path), tmp_path_factory, baselines)
