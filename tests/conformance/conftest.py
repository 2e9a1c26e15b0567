"""Fixtures of the conformance suite: every test runs once per mode
(without the shim, and under each policy)."""
import pytest

from conformlib import MODES, SEED, Conformance, Mode


def pytest_report_header(config):
    return f"conformance seed: {SEED} (CONFORM_SEED={SEED} repeats this run)"


@pytest.fixture(scope="session")
def baselines():
    """The results of each case without the shim, by case and arguments."""
    return {}


@pytest.fixture(params=MODES)
def conform(request, tmp_path, tmp_path_factory, baselines):
    return Conformance(Mode(request.param, tmp_path), tmp_path_factory, baselines)
