"""Makes tests/testlib.py importable from every suite and provides the
fixtures they share."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from testlib import burst_server_factory  # noqa: E402


@pytest.fixture
def server_factory():
    """Starts burst servers (server_factory(*args, env=...)) and stops them after the test."""
    start, stop_all = burst_server_factory()
    yield start
    stop_all()
