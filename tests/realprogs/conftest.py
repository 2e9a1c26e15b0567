"""Fixtures of the real-program tests: the policy each test runs under, and
the servers it starts."""
import pytest

from harness import POLICIES, ForegroundServer, Shim


@pytest.fixture(params=POLICIES.values(), ids=POLICIES.keys())
def shim(request, tmp_path):
    """The test's servers and clients all run under one policy, or without the shim."""
    return Shim.for_policy(request.param, tmp_path)


@pytest.fixture
def start_server(shim, tmp_path):
    """start_server(script, *args, **options) starts a ForegroundServer under the
    test's shim; every one started is stopped after the test, also on failure."""
    servers = []

    def start(script, *args, **options):
        servers.append(ForegroundServer(script, args, shim, tmp_path / f"server{len(servers)}", **options))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
