"""tcpadvise bench and bench-server as a user meets them: help, mistakes, a real
loopback run of every suite and the calibration it writes."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from tcpadvise import schemas
from tcpadvise.bench import netns as bench_netns
from tcpadvise.bench.run import find_loadgen
from tcpadvise.errors import LoadgenNotFoundError
from tcpadvise.rules.calibration import load_calibration
from testlib import assert_one_line_error, invoke, shim_path, wait_for

from .conftest import LOADGEN, TINY


@pytest.mark.parametrize("command", ["bench", "bench-server"])
def test_help_teaches_with_an_example(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.stdout and "--target" in result.stdout


def test_bench_help_names_every_suite_and_profile():
    text = invoke("bench", "--help").stdout
    for word in ("pingpong", "nagle", "stream", "rpc", "1gbit", "100mbit", "10mbit", "1mbit", "calibration"):
        assert word in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [(["--suite", "ping"], "'--suite'"), (["--link", "56k"], "'--link'"), (["--runs", "0"], "'--runs'")],
)
def test_bad_options_exit_2(args, fragment):
    result = invoke("bench", *args)
    assert result.exit_code == 2
    assert fragment in result.stderr


def test_link_without_root_is_one_line_and_exit_2(built, monkeypatch):
    monkeypatch.setattr(bench_netns.os, "geteuid", lambda: 1000)
    assert_one_line_error(
        invoke("bench", "--link", "1gbit", "--suite", "nagle", env=built), 2, "--link needs root"
    )


def test_target_and_link_exclude_each_other(built):
    result = invoke("bench", "--target", "127.0.0.1:9", "--link", "1gbit", env=built)
    assert_one_line_error(result, 1, "exclude each other")


def test_a_far_end_that_is_not_a_bench_server_names_the_arm(built, server_factory):
    server = server_factory()  # the project's burst server speaks no loadgen hello
    result = invoke("bench", "--suite", "nagle", "--target", f"127.0.0.1:{server.port}", *TINY, env=built)
    assert result.exit_code == 1
    # After the progress bar as it stood: the arm and what went wrong, on one line.
    assert result.stderr.splitlines()[-1] == (
        f"tcpadvise: error: plain: 127.0.0.1:{server.port} is not a tcpadvise bench-server (no answer to the hello)"
    )


def test_loadgen_is_found_beside_the_shim(tmp_path):
    assert find_loadgen({"TCPADVISE_SHIM": str(shim_path())}) == LOADGEN
    with pytest.raises(LoadgenNotFoundError, match="TCPADVISE_LOADGEN names"):
        find_loadgen({"TCPADVISE_LOADGEN": str(tmp_path / "missing")})


def test_without_loadgen_the_run_stops_with_one_line(tmp_path):
    result = invoke("bench", env={"TCPADVISE_LOADGEN": str(tmp_path / "missing")})
    assert_one_line_error(result, 1, "which is not a file")


def test_every_suite_runs_on_loopback_and_prints_its_tables(loopback_run):
    result, _ = loopback_run
    for title in (
        "ping-pong (seed 000)",
        "15 two-byte writes",
        "stream by write size",
        "by SO_SNDBUF",
        "split with a 4-byte tail",
        "Compared with the seeds",
    ):
        assert title in result.stdout
    assert "shim-coalesce" in result.stdout
    assert result.stderr.splitlines()[-1].startswith("tcpadvise bench: wrote ")


def test_the_calibration_validates_and_report_reads_it(loopback_run):
    _, out = loopback_run
    document = json.loads((out / "calibration.json").read_text())
    assert schemas.errors("tcpadvise.calibration/1", document) == []
    measurements = load_calibration(out / "calibration.json").measurements
    for name in ("nagle", "large_write_tail", "small_writes", "sndbuf", "extra_segment", "nagle_shim"):
        assert name in measurements
    nagle = measurements["nagle"]
    # Nagle against the delayed ACK: tens of milliseconds; one writev: far less.
    assert nagle["plain_us"] > 20_000 > 100 * nagle["writev_us"]
    assert measurements["large_write_tail"]["request_bytes"] == 4096
    assert measurements["extra_segment"]["two_segments_us"] > 0


def test_the_results_hold_every_summary_with_its_counts(loopback_run):
    _, out = loopback_run
    results = json.loads((out / "calibration.results.json").read_text())
    assert results["schema"] == "https://tcpadvise.dev/schemas/bench/1"
    assert schemas.errors(results["schema"], results) == []
    assert results["path"]["name"] == "loopback"
    assert set(results["suites"]) == {"pingpong", "nagle", "stream", "rpc"}
    point = results["suites"]["pingpong"]["points"][0]["round_trip_us"]
    assert (
        point["runs"] == 2 and point["count"] >= 2 and point["ci_low"] <= point["median"] <= point["ci_high"]
    )
    stream = results["suites"]["stream"]["by_size"][0]["nagle"]["throughput_mbit_s"]
    assert stream["count"] >= 2 and stream["median"] > 0
    assert results["calibration"]["schema"] == "https://tcpadvise.dev/schemas/calibration/1"


def test_plots_are_pngs(loopback_run):
    _, out = loopback_run
    for suite in ("pingpong", "nagle", "stream", "rpc"):
        assert (out / "plots" / f"{suite}.png").read_bytes().startswith(b"\x89PNG")


def test_bench_against_a_bench_server(built, tmp_path):
    server = subprocess.Popen(
        ["tcpadvise", "bench-server", "--host", "127.0.0.1", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **built},
    )
    try:
        announce = server.stderr.readline()
        assert "listening on 127.0.0.1:" in announce, announce
        port = announce.split("127.0.0.1:")[1].split(";")[0]
        result = invoke(
            "bench",
            "--suite",
            "rpc",
            "--target",
            f"127.0.0.1:{port}",
            *TINY,
            "-o",
            str(tmp_path / "calibration.json"),
            env=built,
        )
        assert result.exit_code == 0, result.output
        # A pipe is 80 columns wide: the heading may wrap, so compare the words.
        assert "to the bench-server at 127.0.0.1" in " ".join(result.stdout.split())
        far_end = int(Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()[0])
    finally:
        server.terminate()
        server.wait(timeout=10)
    # SIGTERM stops bench-server and the load generator it runs.
    assert wait_for(lambda: not Path(f"/proc/{far_end}").exists(), timeout=5)


def test_html_page_draws_every_suite_offline(loopback_run, tmp_path):
    from browserlib import assert_page_is_whole, open_page

    result, out = loopback_run
    assert str(out / "bench.html") in result.stderr
    visit = open_page(out / "bench.html", tmp_path / "artifacts" / "bench.png")
    assert_page_is_whole(visit, charts=4)
    for suite in ("pingpong", "nagle", "stream", "rpc"):
        assert suite in visit.text
