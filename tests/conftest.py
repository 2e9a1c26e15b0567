"""Makes tests/testlib.py importable from every suite and provides the
fixtures they share."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from testlib import burst_server_factory, kill_leftover_servers  # noqa: E402


def pytest_configure(config):
    # make test-tsan runs the marked cases of tests/e2e and tests/conformance
    # under ThreadSanitizer, except those with "signal" in their names.
    config.addinivalue_line("markers", "thread: a case with threads (the program's or the shim's) or signal handlers")
    # make test runs these too; -m "not slow" leaves them out of a quick run.
    config.addinivalue_line("markers", "slow: a case of more than a few seconds (tests/install)")


def pytest_sessionfinish(session):
    leftovers = kill_leftover_servers()
    if leftovers:
        print(f"\nkilled {len(leftovers)} server(s) a test left running: {leftovers}", file=sys.stderr)


@pytest.fixture
def server_factory():
    """Starts burst servers (server_factory(*args, env=...)) and stops them after the test."""
    start, stop_all = burst_server_factory()
    yield start
    stop_all()
