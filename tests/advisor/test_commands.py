"""--version, and what --help costs: no heavy library imported for it."""

import os
import subprocess
import sys
from pathlib import Path

from testlib import invoke

ADVISOR = Path(__file__).resolve().parents[2] / "advisor"


def test_version_names_the_cli_the_shim_and_the_schemas():
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tcpadvise ") and lines[1].startswith("shim: ")
    assert "https://tcpadvise.dev/schemas/trace/1" in lines[2] and "https://tcpadvise.dev/schemas/report/1" in lines[2]


def test_help_imports_no_scipy_numpy_nor_matplotlib():
    # Which modules got imported, not a timer: the machine's load does not change it.
    probe = (
        "import sys\n"
        "from tcpadvise.cli.main import cli\n"
        "try:\n"
        "    cli(['--help'], prog_name='tcpadvise')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('scipy', 'numpy', 'matplotlib') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ADVISOR)}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.splitlines()[-1] == "[]", out
