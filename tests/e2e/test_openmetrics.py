"""Traces as Prometheus metrics, end to end: `tcpadvise export` checked by promtool and read back
by prometheus_client's parser, `serve-metrics` scraped by a real Prometheus server whose turn-time
quantiles per arm match `ab report`'s, `record --metrics-file`, and traces of several hosts."""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import (
    text_string_to_metric_families as text_format_families,
)
from tcpadvise.ab.experiment import experiment_config, parse_arms
from tcpadvise.render.openmetrics import _GRID
from testlib import invoke, load_traces, prog, run, shim_env, shim_path, wait_for


def record_experiment(out, server, seed=11):
    """A real A/B experiment: 20 client connections drawing control (observe) or treat (coalesce),
    each 3 requests of 15 two-byte writes to a burst server (tests/e2e/test_experiments.py)."""
    out.mkdir(exist_ok=True)
    config = out / "policy.yaml"
    config.write_text(experiment_config(parse_arms("control=observe,treat=coalesce"), seed))
    result = run([prog("burst"), "client", "--port", str(server.port), "--threads", "20", "--rounds", "3"],
                 env=shim_env(out, TCPADVISE_CONFIG=str(config)))
    assert result.returncode == 0, result.stderr


def export(*args):
    result = invoke("export", *map(str, args))
    assert result.exit_code == 0, result.output
    return result.output


def families(text):
    return {family.name: family for family in text_string_to_metric_families(text)}


def by_arm(family, suffix):
    return {sample.labels["arm"]: sample.value for sample in family.samples if sample.name.endswith(suffix)}


def test_export_matches_the_traces_and_passes_promtool(tmp_path, server_factory):
    record_experiment(tmp_path, server_factory())
    (trace,) = load_traces(tmp_path).values()
    found = families(export(tmp_path))
    # Counters add up the trace's sockets, labelled by the arm each drew.
    client = [s for s in trace["sockets"] if s["role"] == "client"]
    writes = found["tcpadvise_writes"]
    assert sum(s.value for s in writes.samples) == sum(s["writes"]["calls"] for s in client)
    assert {s.labels["arm"] for s in writes.samples} == {"control", "treat"}
    assert {s.labels["policy"] for s in writes.samples} == {"observe", "coalesce"}
    assert {s.labels["host"] for s in writes.samples} == {trace["host"]}
    arms = {arm["name"]: arm for arm in trace["experiment"]["arms"]}
    assert by_arm(found["tcpadvise_arm_connections"], "_total") == {
        name: arm["connections"] for name, arm in arms.items()}
    # Cumulative buckets end at the arm's turn count; coalesce released its writes when the client read.
    assert by_arm(found["tcpadvise_arm_turn_seconds"], "_count") == {
        name: sum(b[2] for b in arm["turn_ns"]) for name, arm in arms.items()}
    releases = found["tcpadvise_policy_releases"].samples
    assert releases and {s.labels["cause"] for s in releases} <= {"read", "wait", "limit", "deadline", "close"}
    assert any(s.labels["rule"] == "nagle-delayed-ack" for s in found["tcpadvise_finding"].samples)
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (Debian package prometheus, scripts/install-deps.sh)")
    checked = subprocess.run([promtool, "check", "metrics"], input=export("--format", "prometheus", tmp_path), check=False,
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_turn_quantiles_per_arm_from_a_real_prometheus_match_ab_report(tmp_path, server_factory):
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus not installed (Debian package prometheus, scripts/install-deps.sh)")
    traces = tmp_path / "traces"
    record_experiment(traces, server_factory())
    ab = invoke("ab", "report", "--format", "json", str(traces))
    assert ab.exit_code == 0, ab.output
    expected = {arm["name"]: arm["turn_p50_us"] / 1e6 for arm in json.loads(ab.output)["arms"]}
    metrics_port, prometheus_port = free_port(), free_port()
    serve = subprocess.Popen([sys.executable, "-m", "tcpadvise", "serve-metrics", "--listen",
                              f"127.0.0.1:{metrics_port}", str(traces)], stderr=subprocess.PIPE, text=True)
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: tcpadvise
    static_configs: [{{targets: ["127.0.0.1:{metrics_port}"]}}]
""")
    server = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{prometheus_port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert "serving http://" in serve.stderr.readline()
        query = 'histogram_quantile(0.5, sum by (arm, le) (tcpadvise_arm_turn_seconds_bucket{job="tcpadvise"}))'
        answer = wait_for(lambda: prometheus_query(prometheus_port, query), timeout=20, step=0.5)
        assert answer, "Prometheus returned no quantile within 20 s"
        quantiles = {item["metric"]["arm"]: float(item["value"][1]) for item in answer}
    finally:
        for process in (server, serve):
            process.terminate()
            process.communicate(timeout=10)
    assert quantiles.keys() == expected.keys() == {"control", "treat"}
    for arm, value in quantiles.items():
        # Prometheus interpolates within an le bucket of the grid (4 per power of two), and the
        # export counts a fine bucket straddling an le one step up: the two agree within a step each way.
        assert grid_step_below(expected[arm]) <= value <= grid_step_above(expected[arm]), (arm, value, expected)
    # The experiment is told apart as ab report tells it: control waits for delayed ACKs.
    assert quantiles["treat"] * 4 < quantiles["control"]


def test_record_metrics_file_is_a_textfile_collector_file(tmp_path, server_factory):
    if os.environ.get("TCPADVISE_PRELOAD_FIRST"):
        pytest.skip("record puts the shim first in LD_PRELOAD, where a sanitizer runtime must come first")
    server = server_factory()
    metrics = tmp_path / "tcpadvise.prom"
    # The client's trace is final when it exits; the run goes on a second longer, so the file must
    # show its writes while the run is still going (written at an interval, not only at the end).
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if metrics.exists() and "tcpadvise_writes_total{" in metrics.read_text():
                seen.append(time.time_ns())
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    client = f"{prog('burst')} client --port {server.port} --threads 4 --rounds 3 && sleep 1"
    try:
        result = invoke("record", "-o", str(tmp_path / "out"), "--interval", "0.2", "--metrics-file", str(metrics),
                        "--", "sh", "-c", client, env={"TCPADVISE_SHIM": str(shim_path())})
    finally:
        stop.set()
        watcher.join()
    assert result.exit_code == 0, result.output
    ended = json.loads((tmp_path / "out" / "record.json").read_text())["ended_unix_ns"]
    assert seen and seen[0] < ended
    assert metrics.stat().st_mode & 0o777 == 0o600
    text = metrics.read_text()
    assert "# EOF" not in text  # Prometheus's text format, which the textfile collector reads
    writes = {family.name: family for family in text_format_families(text)}["tcpadvise_writes"]
    (tmp_path / "out" / "record.json").unlink()  # read by the CLI, not a trace
    (trace,) = load_traces(tmp_path / "out").values()
    assert sum(s.value for s in writes.samples) == sum(s["writes"]["calls"] for s in trace["sockets"])
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_traces_of_two_hosts_merge_group_and_filter(tmp_path, server_factory):
    server = server_factory()
    record_experiment(tmp_path / "a", server, seed=1)
    # The second host: the same client in a UTS namespace of its own named tcpadvise-b, else the
    # same traces with the host rewritten.
    other = tmp_path / "b"
    other.mkdir()
    config = other / "policy.yaml"
    config.write_text(experiment_config(parse_arms("control=observe,treat=coalesce"), 1))
    command = [prog("burst"), "client", "--port", str(server.port), "--threads", "20", "--rounds", "3"]
    unshared = run(["unshare", "--uts", "sh", "-c", 'hostname tcpadvise-b && exec "$@"', "sh", *command],
                   env=shim_env(other, TCPADVISE_CONFIG=str(config)))
    if unshared.returncode != 0:
        for path in (tmp_path / "a").glob("*.json"):
            trace = json.loads(path.read_text()) | {"host": "tcpadvise-b"}
            (other / path.name).write_text(json.dumps(trace))
    hosts = {trace["host"] for directory in ("a", "b") for trace in load_traces(tmp_path / directory).values()}
    assert len(hosts) == 2 and "tcpadvise-b" in hosts
    both = families(export(tmp_path / "a", tmp_path / "b"))
    per_host = {}
    for sample in both["tcpadvise_arm_connections"].samples:
        per_host[sample.labels["host"]] = per_host.get(sample.labels["host"], 0) + sample.value
    assert per_host == {host: 20 for host in hosts}
    only_b = families(export("--host", "tcpadvise-b", tmp_path / "a", tmp_path / "b"))
    assert {s.labels["host"] for s in only_b["tcpadvise_writes"].samples} == {"tcpadvise-b"}
    # ab report merges both hosts' connections, and splits them by host when asked.
    merged = json.loads(invoke("ab", "report", "--format", "json", str(tmp_path / "a"), str(tmp_path / "b")).output)
    assert sum(arm["connections"] for arm in merged["arms"]) == 40
    split = invoke("ab", "report", "--format", "json", "--by-host", str(tmp_path / "a"), str(tmp_path / "b"))
    assert split.exit_code == 0, split.output
    reports = json.loads(split.output)
    assert {report["host"] for report in reports} == hosts
    assert all(sum(arm["connections"] for arm in report["arms"]) == 20 for report in reports)
    text = invoke("report", "--by-host", str(tmp_path / "a"), str(tmp_path / "b"))
    assert text.exit_code == 0, text.output
    assert all(f"host {host}" in text.output for host in hosts)


def test_serve_metrics_rereads_the_directory(tmp_path, server_factory):
    traces = tmp_path / "traces"
    record_experiment(traces, server_factory())
    live = tmp_path / "live"
    live.mkdir()
    port = free_port()
    serve = subprocess.Popen([sys.executable, "-m", "tcpadvise", "serve-metrics", "--listen", f"127.0.0.1:{port}",
                              str(live)], stderr=subprocess.PIPE, text=True)
    try:
        assert "serving http://" in serve.stderr.readline()
        assert "tcpadvise_traces 0.0" in scrape(port)  # nothing written yet: still an answer
        for path in traces.glob("*.json"):
            (live / path.name).write_bytes(path.read_bytes())
        # Re-read at most once a second: the new trace shows within two.
        assert wait_for(lambda: "tcpadvise_traces 1.0" in scrape(port), timeout=3, step=0.2)
        assert "tcpadvise_arm_turn_seconds_bucket{" in scrape(port)
    finally:
        serve.terminate()
        serve.communicate(timeout=10)


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def prometheus_query(port, query):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            body = json.loads(response.read())
    except OSError:
        return None  # not up yet
    result = body["data"]["result"]
    return result if len(result) == 2 and all(item["value"][1] not in ("NaN", "+Inf") for item in result) else None


def grid_step_below(value):
    below = [le for le in _GRID if le < value]
    return below[-2] if len(below) >= 2 else 0.0


def grid_step_above(value):
    above = [le for le in _GRID if le >= value]
    return above[1] if len(above) >= 2 else float("inf")
