"""What `tcpadvise report` says about real programs recorded without a policy,
as a new user would run them: the findings a program's shape must produce,
none above info that it must not, and counts that match what the programs
themselves say they did."""
import json
import signal
import subprocess
import sys
from pathlib import Path

from harness import Shim, assert_clean_stderr
from testlib import invoke, load_traces, shim_env, start_listening

HERE = Path(__file__).resolve().parent
FRAMED = HERE / "framed.py"


def observe(tmp_path, interval=None):
    """The shim without a policy (what `tcpadvise record` does), traces in tmp_path/traces."""
    traces = tmp_path / "traces"
    traces.mkdir(exist_ok=True)
    return Shim(shim_env(traces, interval=interval), traces)


def report(*directories):
    """`tcpadvise report --format json` on the directories, as a dict."""
    result = invoke("report", "--format", "json", *directories)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def findings(document, rule):
    return [finding for finding in document["findings"] if finding["rule"] == rule]


def assert_no_alarm_above_info(document, expected=()):
    """No finding above info but those of the rules in `expected`, and no rtt-variance (info): every
    case runs on loopback, whose round trips say nothing about a network path."""
    alarms = [f"{f['rule']} ({f['severity']}) on {f['scope']['program']} {f['scope']['role']}: {f['why']}"
              for f in document["findings"]
              if (f["severity"] != "info" or f["rule"] == "rtt-variance") and f["rule"] not in expected]
    assert not alarms, "\n".join(alarms)


def items(document, program=None, role=None, pid=None):
    """The report's socket items of a program, a role and a process (None: any)."""
    return [item for item in document["sockets"]
            if program in (None, item["program"]) and role in (None, item["role"])
            and (pid is None or pid in item["pids"])]


def total(socket_items, *field):
    result = 0
    for item in socket_items:
        value = item
        for key in field:
            value = value[key]
        result += value
    return result


def traces_of(shim, pid):
    return [trace for trace in load_traces(shim.traces).values() if trace["pid"] == pid]


class FramedServer:
    """framed.py server under the shim; stop(signum) sends the signal and waits for its end."""

    def __init__(self, shim):
        self.proc, self.port = start_listening([sys.executable, str(FRAMED), "server"], env=shim.env)

    def stop(self, signum=signal.SIGTERM):
        if self.proc.returncode is None:
            self.proc.send_signal(signum)
            _, stderr = self.proc.communicate(timeout=20)
            assert_clean_stderr(stderr)
        return self.proc.returncode


def framed_client(shim, *args, timeout=60):
    """Runs a framed.py client mode to its end; its JSON line as a dict."""
    result = subprocess.run([sys.executable, str(FRAMED), *map(str, args)], env=shim.env, capture_output=True,
                            text=True, timeout=timeout, check=False)
    assert result.returncode == 0, result.stderr
    assert_clean_stderr(result.stderr)
    return json.loads(result.stdout.splitlines()[0])
