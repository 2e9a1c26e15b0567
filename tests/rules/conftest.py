"""Fixtures of the rulebook's tests: the corpus recorded once per session, and
the advisor run on it through its Python API or its command line."""

import json
from pathlib import Path

import pytest
from testlib import invoke, shim_path  # noqa: F401 (the tests import invoke from here)

from tcpadvise import schemas
from tcpadvise.rules.advice import advise
from tcpadvise.rules.calibration import load_calibration
from tcpadvise.render.json import render_json
from tcpadvise.model.report import Report, build_report
from tcpadvise.rules.rulebook import load_rulebook
from tcpadvise.trace.reader import load_inputs

from .corpus import CORPUS

CASES = {case.label: case for case in CORPUS}


@pytest.fixture(scope="package", autouse=True)
def shim_under_test():
    """The shim (and tcpadvise-config-check beside it) of TCPADVISE_BUILD, for the command and its checks."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TCPADVISE_SHIM", str(shim_path()))
        yield


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> callable:
    """recorded(label): the trace directory of that corpus case, recorded on first use."""
    directories: dict[str, Path] = {}

    def directory(label: str) -> Path:
        if label not in directories:
            out_dir = tmp_path_factory.mktemp(label) / "traces"
            CASES[label].record(out_dir)
            directories[label] = out_dir
        return directories[label]

    return directory


def advised(*directories: Path, rule_files=(), calibration: Path | None = None) -> Report:
    """The report on the traces in `directories`, with the findings of the rulebook."""
    report = build_report(load_inputs(directories))
    measured = load_calibration(calibration) if calibration is not None else None
    report.findings = advise(report, load_rulebook(rule_files), measured)
    document = json.loads(render_json(report))
    errors = schemas.errors("tcpadvise.report/1", document)
    assert not errors, errors[0]
    return report


def summary(findings: list[dict]) -> str:
    """Findings in one line each, for assertion messages."""
    return "\n".join(
        f"{finding['severity']} {finding['rule']} on {finding['scope']}: "
        + ", ".join(f"{item['metric']}={item['value']}" for item in finding["evidence"])
        for finding in findings
    )
