"""Records, in the package being built, where tcpadvise's programs were installed.

`TCPADVISE_PREFIX=PREFIX pip install advisor` (after `make install PREFIX=...`)
reads PREFIX/share/tcpadvise/install.json, which `cmake --install` wrote, and
writes its paths into the built package as tcpadvise/_paths.py, the first place
tcpadvise.record.shim looks. Without TCPADVISE_PREFIX nothing is recorded (pkg-config
and a checkout's build tree are searched instead). Everything else is in
pyproject.toml."""

import json
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PREFIX_ENV = "TCPADVISE_PREFIX"
INSTALL_RECORD = Path("share") / "tcpadvise" / "install.json"


class BuildWithPaths(build_py):
    """build_py, then tcpadvise/_paths.py from $TCPADVISE_PREFIX (removed when it is not set)."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "tcpadvise" / "_paths.py"
        prefix = os.environ.get(PREFIX_ENV)
        if not prefix:
            target.unlink(missing_ok=True)  # left in build/ by an earlier build with a prefix
            return
        record = Path(prefix) / INSTALL_RECORD
        try:
            paths = json.loads(record.read_text())
            shim, libexec = paths["shim"], paths["libexec"]
        except (OSError, ValueError, KeyError) as error:
            raise SystemExit(f"${PREFIX_ENV}={prefix}: cannot read {record} ({error}); run 'make install PREFIX={prefix}' first")
        target.write_text(
            f'"""Where tcpadvise was installed (from {record}), recorded by setup.py."""\n'
            f"SHIM = {shim!r}\nLIBEXEC = {libexec!r}\n"
        )


setup(cmdclass={"build_py": BuildWithPaths})
