"""Shared by the test suites: the built shim, the project's own programs,
a way to run them under the shim (and a policy) and read back their traces,
and the tcpadvise command line run in-process.

TCPADVISE_BUILD names the build directory (default: build/ at the repo
root); TCPADVISE_PRELOAD_FIRST names a runtime to preload ahead of the shim
(libasan for the sanitizer job)."""
import json
import os
import pathlib
import subprocess
import time

import jsonschema
from click.testing import CliRunner

from tcpadvise import schemas
from tcpadvise.model import hist as histograms
from tcpadvise.cli.main import cli

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("TCPADVISE_BUILD", REPO / "build")).resolve()  # tests run programs in other directories
SCHEMA = json.loads((REPO / "advisor/tcpadvise/schemas/trace-1.schema.json").read_text())


def shim_path():
    return BUILD / "preload" / "libtcpadvise.so"


# Built in programs/ (installed with tcpadvise as helpers); the others in tests/progs.
HELPER_PROGRAMS = {"burst"}


def prog(name):
    return str(BUILD / ("programs" if name in HELPER_PROGRAMS else "tests/progs") / name)


def shim_env(out_dir, interval=None, **extra):
    env = dict(os.environ)
    preload = [str(shim_path())]
    if os.environ.get("TCPADVISE_PRELOAD_FIRST"):
        preload.insert(0, os.environ["TCPADVISE_PRELOAD_FIRST"])
    env["LD_PRELOAD"] = " ".join(preload)
    env["TCPADVISE_OUT"] = str(out_dir)
    if interval is not None:
        env["TCPADVISE_INTERVAL"] = str(interval)
    env.update(extra)
    return env


def policy_env(tmp_path, policy, rule=None):
    """The shim's environment under a policy config, and tmp_path/traces, where
    its traces go. policy: a config file (a Path, used as it is) or the
    `policy:` value of one rule for every socket (a built-in name or a flow
    mapping such as "{nodelay: true, coalesce: {}}"), named rule if given,
    written to tmp_path/policy.yaml."""
    if not isinstance(policy, pathlib.Path):
        config = tmp_path / "policy.yaml"
        name = f"name: {rule}\n    " if rule else ""
        config.write_text(f"version: 1\nrules:\n  - {name}policy: {policy}\n")
        policy = config
    traces = tmp_path / "traces"
    traces.mkdir(exist_ok=True)
    return shim_env(traces, TCPADVISE_CONFIG=str(policy)), traces


def invoke(*args, env=None):
    """Runs the tcpadvise command line in-process (arguments may be paths); JSON it prints
    that names a schema is validated against it (plain jsonschema over the package's registry)."""
    result = CliRunner().invoke(cli, [str(arg) for arg in args], env=env)
    validate_output(result.stdout)
    return result


def validate_output(text):
    """If `text` is a JSON document naming a tcpadvise schema, assert it is valid against it."""
    try:
        document = json.loads(text)
    except ValueError:
        return
    if isinstance(document, dict) and isinstance(document.get("schema"), str) and schemas.known(document["schema"]):
        uri = schemas.uri(document["schema"])
        assert document["schema"] == uri, f"output names the old schema name {document['schema']}, not {uri}"
        jsonschema.validate(document, schemas.REGISTRY.contents(uri), registry=schemas.REGISTRY)


def assert_one_line_error(result, exit_code, fragment, stdout_empty=True):
    """A CliRunner result that failed as the CLI promises: one `tcpadvise: error:`
    line naming fragment, exit_code, and no exception let through (a traceback)."""
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert not stdout_empty or result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tcpadvise: error: ") and fragment in lines[0], lines[0]
    assert "Traceback" not in result.output


def assert_no_sanitizer_report(stderr):
    assert not any(report in stderr for report in ("AddressSanitizer", "ThreadSanitizer", "runtime error:")), stderr


def run(cmd, env=None, timeout=120, cwd=None):
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert_no_sanitizer_report(result.stderr)
    return result


def load_traces(out_dir):
    """Every trace in out_dir, validated against the schema, by pid: the files, and the records of
    the spools a forking process's children wrote their final traces to."""
    from tcpadvise.trace import spool

    traces = {}
    texts = [path.read_text() for path in sorted(pathlib.Path(out_dir).glob("*.json"))]
    for path in sorted(pathlib.Path(out_dir).glob("*.spool")):
        texts += [record.data.decode() for record in spool.read(path).records]
    for text in texts:
        trace = json.loads(text)
        jsonschema.validate(trace, SCHEMA)
        assert trace["pid"] not in traces, f"two traces of pid {trace['pid']}"
        traces[trace["pid"]] = trace
    return traces


def load_represented(out_dir):
    """Every trace in out_dir by pid as the advisor reads it: a sampled fork child's ("represents")
    as the children it stands for, its counts scaled (advisor/tcpadvise/trace/represents.py)."""
    from tcpadvise.trace.reader import load_inputs

    return {trace.data["pid"]: trace.data for trace in load_inputs([pathlib.Path(out_dir)]).traces}


def assert_split_is_the_draws(report, traces):
    """An A/B report's split, checked against the draws its traces (trace dicts) hold, whatever chance made of them (the
    kernel picks the client's ports, so how a live run's connections split is chance's; whether the draw follows
    the weights is tested on a fixed population, tests/advisor/test_ab.py). Every connection drew the arm its
    4-tuple and the seed draw (drawn_arm, the shim's definition) and took it (a shim that draws otherwise, or
    puts every connection in one arm, fails here); the report counts those draws, and calls the split off, with
    its one warning, exactly when their chi-square p-value is under SRM_ALPHA (an arm that drew none has its own
    warning); no other warning. Returns the draws per arm, in the arms' order."""
    from scipy import stats

    from tcpadvise.ab.experiment import SRM_ALPHA, drawn_arm

    blocks = [trace["experiment"] for trace in traces]
    weights = [arm["weight"] for arm in blocks[0]["arms"]]
    rows = []
    for block in blocks:
        assert block["seed"] == report["seed"]
        for values in block["connections"]:
            row = dict(zip(block["connection_fields"], values))
            assert row["drawn"] == drawn_arm(report["seed"], weights, (row["local_addr"], row["local_port"]),
                                             (row["peer_addr"], row["peer_port"])), row
            # A connection takes the arm it drew, or control's once a guardrail stopped that arm in its process.
            assert row["arm"] == row["drawn"] or (row["arm"] == 0 and block["arms"][row["drawn"]]["stopped"]), row
            rows.append(row)
    assert rows
    drawn = [sum(row["drawn"] == index for row in rows) for index in range(len(weights))]
    split = report["split"]
    assert list(split["drawn"].values()) == drawn, (split, drawn)
    p_value = float(stats.chisquare(drawn, [len(rows) * w / sum(weights) for w in weights]).pvalue)
    assert split["p_value"] == round(p_value, 6) and split["ok"] == (p_value >= SRM_ALPHA and min(drawn) > 0), split
    mismatch = [w for w in report["warnings"] if w.startswith("sample ratio mismatch")]
    empty = [w for w in report["warnings"] if "drew no connection" in w]
    assert len(mismatch) == (p_value < SRM_ALPHA) and len(empty) == (min(drawn) == 0), report["warnings"]
    assert len(report["warnings"]) == len(mismatch) + len(empty), report["warnings"]
    return drawn


def _turn_means_by_arm(traces):
    """Each arm's connections' mean turn times (those with a turn), from the traces' connection rows."""
    blocks = [trace["experiment"] for trace in traces]
    names = [arm["name"] for arm in blocks[0]["arms"]]
    means = {name: [] for name in names}
    for block in blocks:
        for values in block["connections"]:
            row = dict(zip(block["connection_fields"], values))
            if row["turns"] > 0 and row["turn_mean_ns"] > 0:
                means[names[row["arm"]]].append(row["turn_mean_ns"])
    return means


def assert_verdict_is_the_data(report, traces):
    """An A/B report's comparisons and verdict, recomputed from the connection rows of its traces (trace dicts):
    each arm's ratio of geometric means to control's and its 95% confidence sequence (the report's method:
    mean log turn times, their variances floored, the normal mixture's half-width), equal to the report's but for
    its rounding; each comparison significant exactly when its sequence leaves out 1 by at least min_effect; the
    winner the lowest geometric mean among those, or none. Deterministic: it holds whatever chance made of the
    turns, and fails on a report that compares other rows, computes otherwise, or names a winner the data do not
    show. Returns the comparisons by arm."""
    import math

    import numpy as np

    from tcpadvise.ab.experiment import LOG_VARIANCE_FLOOR, MIN_PER_ARM, half_width

    means = {name: np.log(np.array(values, dtype=float)) for name, values in _turn_means_by_arm(traces).items()}
    control, *others = means
    comparisons = {c["arm"]: c for c in report["comparisons"]}
    assert report["control"] == control and set(comparisons) <= set(others), (control, list(comparisons))
    winners = []
    for arm in others:
        a, c = means[arm], means[control]
        if min(a.size, c.size) < MIN_PER_ARM:
            assert arm not in comparisons, comparisons[arm]
            continue
        mine = comparisons[arm]
        assert mine["connections"] == [c.size, a.size], (mine["connections"], c.size, a.size)
        variance = max(a.var(ddof=1), LOG_VARIANCE_FLOOR) / a.size + max(c.var(ddof=1), LOG_VARIANCE_FLOOR) / c.size
        diff, width = float(a.mean() - c.mean()), half_width(1 / variance)
        expected = [math.exp(diff), math.exp(diff - width), math.exp(diff + width)]
        got = [mine["ratio"], *mine["ratio_cs"]]
        # The report rounds to 4 decimals (and may sum the rows in another order).
        assert all(abs(g - e) <= 1.5e-4 * max(1.0, e) for g, e in zip(got, expected)), (got, expected)
        significant = not (got[1] <= 1 <= got[2]) and abs(got[0] - 1) >= report["min_effect"]
        assert mine["significant"] == significant, mine
        if significant:
            winners.append((float(np.exp(a.mean())), arm) if got[0] < 1 else (float(np.exp(c.mean())), control))
    assert report["verdict"]["winner"] == (min(winners)[1] if winners else None), (report["verdict"], winners)
    return comparisons


def assert_arms_do_not_differ(traces, alpha=1e-8):
    """An A/A experiment's arms, whose connections the shim treats alike, give their connections' mean turn times
    one distribution: each arm's against control's, an exact two-sided Mann-Whitney test (the pooled ranks' every
    split among the arms as likely: the key is random, so a connection's arm is a draw apart from its turns) gets
    a p-value of alpha or more, which by chance fails with probability at most alpha (times in ns do not tie),
    whatever the turn times' distribution and however the machine's load moves them. Arms that differ (another policy,
    another metric in one arm) separate their connections' ranks: 20 of 40 apart give 1.5e-11, and any split with
    9 or more in each arm can go below 1e-8 (2/C(40, 9) = 7.3e-9). Returns the p-values by arm."""
    from scipy import stats

    means = _turn_means_by_arm(traces)
    control, *others = means
    p_values = {arm: float(stats.mannwhitneyu(means[arm], means[control], alternative="two-sided",
                                              method="exact").pvalue) for arm in others}
    assert all(p >= alpha for p in p_values.values()), (p_values, means)
    return p_values


def holds_only(hist, value, count):
    """True when every recorded value of hist fell in the one bucket holding value."""
    buckets = histograms.ranges(hist)
    return hist["count"] == count and [b[2] for b in buckets] == [count] and buckets[0][0] <= value < buckets[0][1]


def sockets(trace, role=None):
    return [s for s in trace["sockets"] if role is None or s["role"] == role]


# _listening holds every server start_listening started: a test that fails
# before it stops its server (a timeout) must not leave it running after the
# run (kill_leftover_servers, at the session's end).
_listening = []


def start_listening(cmd, env=None, preexec_fn=None):
    """Starts a server that prints "listening PORT" first (burst, conform_peer,
    the scenarios); returns the process, its stdout open for the rest, and the port."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=preexec_fn)
    _listening.append(proc)
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        proc.kill()  # reading its stderr to the end must not wait for a server that hangs
        raise AssertionError(line + proc.communicate(timeout=10)[1])
    return proc, int(line.split()[1])


def kill_leftover_servers():
    """Kills the servers start_listening started that still run; returns their commands."""
    leftovers = [proc for proc in _listening if proc.poll() is None]
    for proc in leftovers:
        proc.kill()
        proc.wait()
    _listening.clear()
    return [proc.args for proc in leftovers]


class Server:
    """A burst server process; the port it listens on is read from its stdout."""

    def __init__(self, args, env=None):
        self.proc, self.port = start_listening([prog("burst"), "server", "--port", "0", *args], env)

    def stop(self):
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=10)
        assert_no_sanitizer_report(err)


def burst_server_factory():
    servers = []

    def start(*args, env=None):
        server = Server(args, env)
        servers.append(server)
        return server

    return start, lambda: [s.stop() for s in servers]


def client_json(result):
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def wait_for(predicate, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()
