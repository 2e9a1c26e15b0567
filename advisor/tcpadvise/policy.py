"""Policies for `tcpadvise record --policy` and `tcpadvise config check`.

The shim parses policy configs itself (docs/policy-config.md); this module
never re-implements that parser: it runs tcpadvise-config-check, built from
the same source and installed with the shim (in libexec/tcpadvise), and
writes the one-rule config a built-in policy name stands for."""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, RecordError
from .policyconfig import BUILTIN_SETTINGS, CONFIG_VERSION
from .safefile import write_atomically
from .shim import find_helper

BUILTIN_POLICIES = tuple(BUILTIN_SETTINGS)
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
    checker = find_helper(CHECKER_NAME, None, os.environ, ConfigError)
    # The checker quotes the file, which may hold bytes that are not UTF-8.
    result = subprocess.run(
        [str(checker), str(path)], capture_output=True, text=True, errors="replace", check=False
    )
    return ConfigCheck(ok=result.returncode == 0, lines=result.stdout.splitlines())


def builtin_config(name: str) -> str:
    """The config a built-in policy name stands for: that policy on every socket."""
    return (
        f"# tcpadvise record --policy {name}\nversion: {CONFIG_VERSION}\n"
        f"rules:\n  - name: {name}\n    policy: {name}\n"
    )


def write_policy_file(out_dir: Path, config: str) -> Path:
    """Write `config` to OUT_DIR/policy.yaml, where record keeps the config a run used; return that path."""
    path = out_dir / POLICY_FILE
    try:
        write_atomically(path, config)
    except OSError as error:
        raise RecordError(f"{path}: cannot write the policy config ({error.strerror})") from None
    return path


def resolve_policy(value: str, out_dir: Path) -> Path:
    """The config file the shim should read for `--policy VALUE`.

    A built-in name is written to OUT_DIR/policy.yaml; a file must pass the
    shim's parser first, so that a mistake stops the run instead of leaving
    it silently observe-only."""
    if value in BUILTIN_POLICIES:
        return write_policy_file(out_dir, builtin_config(value)).resolve()
    path = Path(value)
    if not path.exists():
        names = ", ".join(BUILTIN_POLICIES)
        raise ConfigError(f"--policy {value}: neither a built-in policy ({names}) nor a file")
    check = check_config(path)
    if not check.ok:
        raise ConfigError.from_problems(check.lines or [f"{path}: invalid"], str(path))
    return path.resolve()
