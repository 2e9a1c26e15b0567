"""The bench tests run the built load generator and shim of TCPADVISE_BUILD
(default: build/), found through the same variables a user would set."""

import pytest
from testlib import BUILD, invoke, shim_path

LOADGEN = BUILD / "programs" / "tcpadvise-loadgen"
BUILT_ENV = {"TCPADVISE_LOADGEN": str(LOADGEN), "TCPADVISE_SHIM": str(shim_path())}
# As small as the suites go: one round trip per point after warm-up, a tenth of a second per stream.
TINY = ["--runs", "2", "--rounds", "5", "--seconds", "0.1"]


@pytest.fixture(scope="session")
def built():
    if not LOADGEN.is_file() or not shim_path().is_file():
        pytest.fail(
            f"build tcpadvise-loadgen and the shim first: cmake --build {BUILD} "
            "--target tcpadvise tcpadvise_config tcpadvise-loadgen"
        )
    return BUILT_ENV


@pytest.fixture(scope="session")
def loopback_run(built, tmp_path_factory):
    """One real run of every suite on loopback, with charts and the page: (CliRunner result, output directory)."""
    out = tmp_path_factory.mktemp("bench")
    result = invoke(
        "bench", *TINY, "-o", str(out / "calibration.json"), "--plot", str(out / "plots"),
        "--html", str(out / "bench.html"), env=built
    )
    assert result.exit_code == 0, result.output
    return result, out
