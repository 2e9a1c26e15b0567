"""Policy configs (docs/policy-config.md): the built-in policies, checking a config, and the
config that applies a report's findings.

Built-in policies and checks, for `tcpadvise record --policy` and `tcpadvise config check`:
the shim parses policy configs itself; this module never re-implements that parser: it runs tcpadvise-config-check, built from
the same source and installed with the shim (in libexec/tcpadvise), and writes the one-rule config
a built-in policy name stands for.

The config that applies the findings' recommendations: `tcpadvise report --emit-policy FILE`,
ready for `tcpadvise record --policy FILE`.

One config rule per scope with a finding whose policy does something: it
matches the scope as the shim sees it (program and role; a server's local
port; a client's peer address and port) and applies the policies of the
scope's findings merged, the most severe first (a later finding adds only
settings not yet given and compatible with those: cork and coalesce exclude
each other). Findings on a run, and those whose policy is observe, add
nothing: a socket no rule matches is observed anyway.
"""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import ConfigError, PolicyWriteError, RecordError
from ..record.shim import SHIM_ENV, find_helper
from ..resources import doc_path
from ..safefile import write_atomically

# CONFIG_SCHEMA: the URI a config names (schemas/config-1.schema.json); the shim also reads `version: 1`.
CONFIG_SCHEMA = "https://tcpadvise.dev/schemas/config/1"
BUILTIN_SETTINGS = {
    "observe": {},
    "nodelay": {"nodelay": True},
    "cork": {"cork": {}},
    "coalesce": {"coalesce": {}},
}
EXCLUSIVE_SETTINGS = ({"cork", "coalesce"},)
# The shim's limits (libtcpadvise/config.h: kMaxRules, and kMaxNameLength with its terminating NUL).
MAX_RULES = 64
MAX_NAME_LENGTH = 127
# fnmatch's special characters (a backslash escapes in the C library's fnmatch).
_GLOB_SPECIAL = "*?[\\"
BUILTIN_POLICIES = tuple(BUILTIN_SETTINGS)
CHECKER_NAME = "tcpadvise-config-check"
POLICY_FILE = "policy.yaml"
# COMPILED_FILE: where record keeps the compiled form of the run's config, which the shim loads in a
# read where YAML costs milliseconds in every process (libtcpadvise/config_compiled.h).
COMPILED_FILE = "policy.compiled"


@dataclass(frozen=True)
class ConfigCheck:
    """What the shim's parser said of a config: ok, and its lines of output."""

    ok: bool
    lines: list[str]


def _checker_for(path: Path, shim: Path | None = None) -> Path:
    """The shim's config checker (the one beside `shim` if given), once path is known to be a file
    it can read."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a config file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    environ = {**os.environ, SHIM_ENV: str(shim)} if shim is not None else os.environ
    return find_helper(CHECKER_NAME, None, environ, ConfigError)


def check_config(path: Path) -> ConfigCheck:
    """Check a policy config with the shim's own parser."""
    checker = _checker_for(path)
    # The checker quotes the file, which may hold bytes that are not UTF-8.
    result = subprocess.run(
        [str(checker), str(path)], capture_output=True, text=True, errors="replace", check=False
    )
    return ConfigCheck(ok=result.returncode == 0, lines=result.stdout.splitlines())


def builtin_config(name: str) -> str:
    """The config a built-in policy name stands for: that policy on every socket."""
    return f"# tcpadvise record --policy {name}\n" + every_socket_config(name, name)


def every_socket_config(name: str, policy: str | dict) -> str:
    """A config of one rule, `name`, applying `policy` (a built-in name or its settings) to every socket."""
    config = {"schema": CONFIG_SCHEMA, "rules": [{"name": name, "policy": policy}]}
    return yaml.safe_dump(config, sort_keys=False)


def write_policy_file(out_dir: Path, config: str) -> Path:
    """Write `config` to OUT_DIR/policy.yaml, where record keeps the config a run used; return that path."""
    path = out_dir / POLICY_FILE
    try:
        write_atomically(path, config)
    except OSError as error:
        raise RecordError(f"{path}: cannot write the policy config ({error.strerror})") from None
    return path


def compile_config(path: Path, shim: Path | None = None) -> bytes:
    """The compiled form of a config, made by the shim's own parser (the parser of the build of
    `shim` if given: a compiled config belongs to one build; ConfigError listing every mistake when
    the config is not valid)."""
    checker = _checker_for(path, shim)
    result = subprocess.run([str(checker), "--compile", str(path)], capture_output=True, check=False)
    if result.returncode != 0:
        problems = result.stderr.decode(errors="replace").splitlines()
        raise ConfigError.from_problems(problems or [f"{path}: invalid"], str(path))
    return result.stdout


def compiled_every_socket_config(directory: Path, name: str, policy: str | dict, shim: Path) -> Path:
    """DIRECTORY/NAME.compiled: `policy` on every socket (every_socket_config), compiled for `shim`
    as `tcpadvise record --policy` hands it to every process of a run, so that a process loads it in
    one read rather than bringing in the YAML parser (yaml-cpp, libstdc++)."""
    source = directory / f"{name}.yaml"
    source.write_text(every_socket_config(name, policy))
    compiled = directory / f"{name}.compiled"
    compiled.write_bytes(compile_config(source, shim))
    return compiled


def resolve_policy(value: str, out_dir: Path) -> Path:
    """The config file the shim should read for `--policy VALUE`: OUT_DIR/policy.compiled.

    A built-in name is first written to OUT_DIR/policy.yaml. The config is compiled by the shim's
    parser, so that a mistake stops the run instead of leaving it silently observe-only, and so
    that each process of the run loads it in one read."""
    if value in BUILTIN_POLICIES:
        source = write_policy_file(out_dir, builtin_config(value))
    else:
        source = Path(value)
        if not source.exists():
            names = ", ".join(BUILTIN_POLICIES)
            raise ConfigError(f"--policy {value}: neither a built-in policy ({names}) nor a file")
    compiled = compile_config(source)
    path = out_dir / COMPILED_FILE
    try:
        write_atomically(path, compiled)
    except OSError as error:
        raise RecordError(f"{path}: cannot write the compiled policy config ({error.strerror})") from None
    return path.resolve()


def scope_rules(findings: list[dict]) -> list[dict]:
    """One config rule per scope whose findings' policies do something, however many."""
    settings_by_scope: dict[tuple, dict] = {}
    findings_by_scope: dict[tuple, list[dict]] = {}
    for finding in findings:
        scope = finding["scope"]
        settings = _settings(finding["recommendation"]["policy"])
        if scope["command"] is not None or not settings:
            continue
        key = (scope["program"], scope["role"], scope["local_port"], scope["peer"], scope["peer_port"])
        merged = settings_by_scope.setdefault(key, {})
        for name, value in settings.items():
            if name not in merged and not _excluded(name, merged):
                merged[name] = value
        findings_by_scope.setdefault(key, []).append(finding)
    return [
        {
            "name": _rule_name(findings_by_scope[key]),
            "match": _match(findings_by_scope[key][0]["scope"]),
            "policy": _policy(settings),
        }
        for key, settings in settings_by_scope.items()
    ]


def write_policy_config(path: Path, findings: list[dict]) -> dict:
    """Write the config as YAML, each rule under a comment naming its findings; return the config:
    {"schema": CONFIG_SCHEMA, "rules": [{"name", "match", "policy"}, ...]}, most severe scope first."""
    rules = scope_rules(findings)
    config = {"schema": CONFIG_SCHEMA, "rules": rules[:MAX_RULES]}
    lines = [
        f"# tcpadvise policy config ({doc_path('policy-config.md')}), written by 'tcpadvise report --emit-policy'.",
        "# Try it: tcpadvise record --policy THIS-FILE -- COMMAND",
        f"schema: {CONFIG_SCHEMA}",
        "rules:" if config["rules"] else "rules: []",
    ]
    for rule in config["rules"]:
        lines.append(f"  # {rule['name']}")
        lines.extend(f"  # {line}" for line in adaptive_effect(rule["policy"]))
        dumped = yaml.safe_dump([rule], default_flow_style=None, sort_keys=False, width=1000)
        lines.extend(f"  {line}" for line in dumped.splitlines())
    left_out = len(rules) - len(config["rules"])
    if left_out > 0:
        lines.append(f"# {left_out} more scope(s) left out: a config holds at most {MAX_RULES} rules.")
    try:
        path.write_text("\n".join(lines) + "\n")
    except OSError as error:
        raise PolicyWriteError(f"{path}: cannot write the policy config ({error.strerror})") from None
    return config


def adaptive_effect(policy: str | dict) -> list[str]:
    """What an adaptive cork or coalesce (the default form) is expected to do, as comment lines; [] otherwise."""
    settings = _settings(policy)
    held = next((name for name in ("cork", "coalesce") if settings.get(name) not in (None, False)), None)
    if held is None or (isinstance(settings[held], dict) and settings[held].get("adaptive") is False):
        return []
    return [
        f"{held} is adaptive (docs/policy-config.md): on sockets of this group whose bursts have",
        "several writes, they leave as one segment, without Nagle's delayed-ACK stall;",
        "on sockets that write once per burst: no effect (no holding, no extra syscall).",
    ]


def _settings(policy: str | dict) -> dict:
    return dict(BUILTIN_SETTINGS[policy]) if isinstance(policy, str) else dict(policy)


def _excluded(name: str, chosen: dict) -> bool:
    return any(name in group and chosen.keys() & (group - {name}) for group in EXCLUSIVE_SETTINGS)


def _policy(settings: dict) -> str | dict:
    """A built-in name when the settings are exactly one, else the mapping."""
    return next((name for name, builtin in BUILTIN_SETTINGS.items() if builtin == settings), settings)


def _match(scope: dict) -> dict:
    """The shim's view of a scope: a server by its local port, a client by its peer."""
    match = {"program": "".join(f"[{char}]" if char in _GLOB_SPECIAL else char for char in scope["program"])}
    if scope["role"] in ("client", "server"):
        match["role"] = scope["role"]
    if scope["role"] != "client" and scope["local_port"]:
        match["local_port"] = scope["local_port"]
    if scope["role"] != "server":
        match["peer"] = scope["peer"]
        match["peer_port"] = scope["peer_port"]
    return match


def _rule_name(findings: list[dict]) -> str:
    scope = findings[0]["scope"]
    where = (
        f":{scope['local_port']}"
        if scope["role"] == "server"
        else f" to {scope['peer']}:{scope['peer_port']}"
    )
    rules = ", ".join(dict.fromkeys(finding["rule"] for finding in findings))
    return f"{scope['program']} {scope['role']}{where}: {rules}"[:MAX_NAME_LENGTH]
