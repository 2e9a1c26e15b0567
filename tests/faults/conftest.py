"""Fixtures of the fault matrix: each case runs without the shim and under
every policy, on the conformance suite's driver and hashing peer."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

from conformlib import MODES, Conformance, Mode  # noqa: E402


@pytest.fixture(scope="session")
def baselines():
    return {}


@pytest.fixture(params=MODES)
def conform(request, tmp_path, tmp_path_factory, baselines):
    return Conformance(Mode(request.param, tmp_path), tmp_path_factory, baselines)
