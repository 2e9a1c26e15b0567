"""Mistakes in setting up a run that tcpadvise must report as one line (or a
usage message) with its exit status, never as a traceback."""

import pathlib

from testlib import assert_one_line_error, invoke

from .conftest import make_trace, write_trace


def assert_usage_error(result, fragment):
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.stderr.startswith("Usage: ")
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: ") and fragment in last, last


def test_record_ab_into_a_directory_it_cannot_create_exits_125(fake_shim):
    result = invoke("record", "-o", "/proc/nope", "--ab", "control=observe,treat=cork", "--", "true")
    assert_one_line_error(result, 125, "/proc/nope: cannot create the output directory")


def test_record_ab_that_cannot_write_its_policy_file_exits_125(fake_shim, tmp_path):
    (tmp_path / "policy.yaml").mkdir()
    result = invoke("record", "-o", tmp_path, "--ab", "control=observe,treat=cork", "--", "true")
    assert_one_line_error(result, 125, "policy.yaml: cannot write the policy config")
    assert not (tmp_path / "record.json").exists()


def test_record_ab_of_a_missing_command_leaves_no_policy_file(fake_shim, tmp_path):
    out = tmp_path / "out"
    result = invoke("record", "-o", out, "--ab", "control=observe,treat=cork", "--", tmp_path / "no-such-command")
    assert_one_line_error(result, 127, "no-such-command")
    assert not (out / "policy.yaml").exists()


def test_record_policy_that_cannot_write_its_policy_file_exits_125(fake_shim, tmp_path):
    (tmp_path / "policy.yaml").mkdir()
    result = invoke("record", "-o", tmp_path, "--policy", "cork", "--", "true")
    assert_one_line_error(result, 125, "policy.yaml: cannot write the policy config")


def test_seed_without_ab_is_a_usage_error(fake_shim, tmp_path):
    out = tmp_path / "out"
    result = invoke("record", "-o", out, "--seed", "3", "--", "true")
    assert_usage_error(result, "--seed")
    assert not out.exists()


def test_report_of_an_unreadable_directory_exits_2(tmp_path, monkeypatch):
    # Root reads any directory whatever its mode, so the refusal is simulated.
    unreadable = tmp_path / "traces"
    unreadable.mkdir()
    write_trace(unreadable, make_trace())
    real_iterdir = pathlib.Path.iterdir

    def iterdir(path):
        if path == unreadable:
            raise PermissionError(13, "Permission denied", str(path))
        return real_iterdir(path)

    monkeypatch.setattr(pathlib.Path, "iterdir", iterdir)
    result = invoke("report", unreadable)
    assert_one_line_error(result, 2, f"{unreadable}: cannot read (Permission denied)")


def test_bench_plot_directory_is_checked_before_the_bench_runs(tmp_path):
    # A load generator that does not exist: a bench that started would fail on it instead.
    env = {"TCPADVISE_LOADGEN": str(tmp_path / "no-loadgen")}
    result = invoke("bench", "-o", tmp_path / "calibration.json", "--plot", "/proc/nope", env=env)
    assert_one_line_error(result, 1, "/proc/nope: cannot create the plot directory")
    assert not (tmp_path / "calibration.json").exists()
