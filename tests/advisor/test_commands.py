"""--version, and what --help costs: no heavy library imported for it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from testlib import invoke

ADVISOR = Path(__file__).resolve().parents[2] / "advisor"


def test_version_names_the_cli_the_shim_and_the_schemas():
    result = invoke("--version")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tcpadvise ") and lines[1].startswith("shim: ")
    assert "https://tcpadvise.dev/schemas/trace/1" in lines[2] and "https://tcpadvise.dev/schemas/report/1" in lines[2]


# HEAVY_MODULES: what `--help` must not import (scipy alone took 0.7 s); each
# command imports them when it runs.
HEAVY_MODULES = ("scipy", "numpy", "matplotlib", "rich", "jsonschema", "referencing", "elftools")


@pytest.mark.parametrize("args", [["--help"], ["report", "--help"], ["ab", "report", "--help"],
                                  ["bench", "--help"], ["record", "--help"], ["rules", "check", "--help"]])
def test_help_imports_none_of_the_heavy_modules(args):
    # Which modules got imported, not a timer: the machine's load does not change it.
    probe = (
        "import sys\n"
        "from tcpadvise.cli.main import cli\n"
        "try:\n"
        f"    cli({args!r}, prog_name='tcpadvise')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules))\n"
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
