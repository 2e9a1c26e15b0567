"""Policies for `tcpadvise record --policy` and `tcpadvise config check`.

The shim parses policy configs itself (docs/policy-config.md); this module
never re-implements that parser: it runs tcpadvise-config-check, built from
the same source and installed beside the shim, and writes the one-rule config
a built-in policy name stands for."""

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError
from .shim import find_shim

BUILTIN_POLICIES = ("observe", "nodelay", "cork", "coalesce")
CHECKER_NAME = "tcpadvise-config-check"
POLICY_FILE = "policy.yaml"


@dataclass(frozen=True)
class ConfigCheck:
    """What the shim's parser said of a config: ok, and its lines of output."""

    ok: bool
    lines: list[str]


def check_config(path: Path) -> ConfigCheck:
    """Check a policy config with the shim's own parser."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    checker = find_shim().parent / CHECKER_NAME
    if not checker.is_file():
        raise ConfigError(f"{CHECKER_NAME} not found beside the shim ({checker}); rebuild tcpadvise")
    # The checker quotes the file, which may hold bytes that are not UTF-8.
    result = subprocess.run([str(checker), str(path)], capture_output=True, text=True, errors="replace")
    return ConfigCheck(ok=result.returncode == 0, lines=result.stdout.splitlines())


def builtin_config(name: str) -> str:
    """The config a built-in policy name stands for: that policy on every socket."""
    return f"# tcpadvise record --policy {name}\nversion: 1\nrules:\n  - name: {name}\n    policy: {name}\n"


def resolve_policy(value: str, out_dir: Path) -> Path:
    """The config file the shim should read for `--policy VALUE`.

    A built-in name is written to OUT_DIR/policy.yaml; a file must pass the
    shim's parser first, so that a mistake stops the run instead of leaving
    it silently observe-only."""
    if value in BUILTIN_POLICIES:
        path = out_dir / POLICY_FILE
        path.write_text(builtin_config(value))
        return path.resolve()
    path = Path(value)
    if not path.exists():
        names = ", ".join(BUILTIN_POLICIES)
        raise ConfigError(f"--policy {value}: neither a built-in policy ({names}) nor a file")
    check = check_config(path)
    if not check.ok:
        first = check.lines[0] if check.lines else f"{path}: invalid"
        more = f" (and {len(check.lines) - 1} more; see tcpadvise config check {path})" if len(check.lines) > 1 else ""
        raise ConfigError(f"{first}{more}")
    return path.resolve()
