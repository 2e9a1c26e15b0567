"""tcpadvise config check and record --policy, run against the real checker
built beside the shim (tests skip without a build)."""
import json

import pytest
import yaml

from tcpadvise import schemas
from tcpadvise.errors import ConfigError
from tcpadvise.policy.config import BUILTIN_POLICIES, builtin_config, check_config, resolve_policy
from testlib import invoke, shim_path

pytestmark = pytest.mark.skipif(not shim_path().exists(), reason="needs the built shim and its config checker")

GOOD = "version: 1\nrules:\n  - name: web\n    match: {role: server, local_port: 8080}\n    policy: coalesce\n"
BAD = "version: 1\nrules:\n  - match: {role: sever}\n    policy: fastest\n"
# What a compiled config opens with (libtcpadvise/config_compiled.h).
COMPILED_MAGIC = b"TCPACFG\x01"


@pytest.fixture(autouse=True)
def use_built_shim(monkeypatch):
    monkeypatch.setenv("TCPADVISE_SHIM", str(shim_path()))


def test_check_config_accepts_a_good_file(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text(GOOD)
    check = check_config(path)
    assert check.ok and check.lines == [f"{path}: 1 rule", "  1. web: coalesce"]


def test_check_config_tells_the_fixed_form_and_checks_the_adaptive_settings(tmp_path):
    path = tmp_path / "forms.yaml"
    path.write_text("version: 1\nrules:\n  - name: a\n    policy: {cork: {enter_bursts: 3, leave_bursts: 9}}\n"
                    "  - name: f\n    policy: {coalesce: {adaptive: false}}\n")
    check = check_config(path)
    assert check.ok and check.lines == [f"{path}: 2 rules", "  1. a: cork", "  2. f: coalesce (fixed)"]
    path.write_text("version: 1\nrules:\n  - policy: {cork: {leave_bursts: 0, adaptive: maybe}}\n")
    check = check_config(path)
    assert not check.ok
    assert any("cork.leave_bursts must be a whole number from 1 to 1000" in line for line in check.lines), check.lines
    assert any("cork.adaptive must be true or false" in line for line in check.lines), check.lines


def test_check_config_lists_every_mistake_with_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    check = check_config(path)
    assert not check.ok
    assert check.lines == [f"{path}:3:19: match.role must be client or server",
                           f"{path}:4:13: unknown policy 'fastest' (built-in: observe, nodelay, cork, coalesce)"]


@pytest.mark.parametrize("name", BUILTIN_POLICIES)
def test_builtin_names_become_configs_the_shim_accepts(tmp_path, name):
    path = resolve_policy(name, tmp_path)
    assert path == (tmp_path / "policy.compiled").resolve()
    assert path.read_bytes().startswith(COMPILED_MAGIC)
    assert path.stat().st_mode & 0o777 == 0o600
    source = tmp_path / "policy.yaml"
    assert source.read_text() == builtin_config(name)
    assert check_config(source).ok
    assert schemas.errors("tcpadvise.config/1", yaml.safe_load(source.read_text())) == []


def test_a_config_names_its_schema_or_says_version_1(tmp_path):
    by_uri = tmp_path / "uri.yaml"
    by_uri.write_text(GOOD.replace("version: 1", "schema: https://tcpadvise.dev/schemas/config/1"))
    assert check_config(by_uri).ok
    assert schemas.errors("tcpadvise.config/1", yaml.safe_load(by_uri.read_text())) == []
    neither = tmp_path / "neither.yaml"
    neither.write_text(GOOD.replace("version: 1\n", ""))
    check = check_config(neither)
    assert not check.ok and "missing 'schema: https://tcpadvise.dev/schemas/config/1'" in check.lines[0]
    assert schemas.errors("tcpadvise.config/1", yaml.safe_load(neither.read_text())) != []


def test_cli_config_compile_writes_what_the_shim_loads(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    out = tmp_path / "policy.compiled"
    ok = invoke("config", "compile", str(good), "-o", str(out))
    assert ok.exit_code == 0, ok.output
    assert out.read_bytes().startswith(COMPILED_MAGIC) and out.stat().st_mode & 0o777 == 0o600
    failed = invoke("config", "compile", str(bad), "-o", str(tmp_path / "bad.compiled"))
    assert failed.exit_code == 2 and failed.output.count("\n") == 1 and "3:19: match.role" in failed.output
    assert not (tmp_path / "bad.compiled").exists()
    directory = invoke("config", "compile", str(tmp_path), "-o", str(tmp_path / "dir.compiled"))
    assert directory.exit_code == 2 and "is a directory" in directory.output


def test_resolve_policy_refuses_unknown_names_and_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="neither a built-in policy"):
        resolve_policy("fastest", tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD)
    with pytest.raises(ConfigError, match=r"bad.yaml:3:19: .* \(and 1 more"):
        resolve_policy(str(bad), tmp_path)


def test_cli_config_check_exit_codes(tmp_path):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    ok = invoke("config", "check", str(good))
    assert ok.exit_code == 0 and "1 rule" in ok.output
    failed = invoke("config", "check", str(bad))
    assert failed.exit_code == 2 and "3:19: match.role" in failed.output
    directory = invoke("config", "check", str(tmp_path))
    assert directory.exit_code == 2 and "is a directory" in directory.output
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"version: 1\nrules:\n  - policy: coalesce\n    f\xe9e: 1\n")
    odd = invoke("config", "check", str(latin1))
    assert odd.exit_code == 2 and "unknown key" in odd.output and "Traceback" not in odd.output
    missing = invoke("config", "check", str(tmp_path / "none.yaml"))
    assert missing.exit_code == 2 and missing.output.strip().endswith("no such file")
    assert "Traceback" not in missing.output


def test_cli_record_with_a_builtin_policy_writes_and_names_it(tmp_path):
    out = tmp_path / "out"
    result = invoke("record", "-o", str(out), "--policy", "cork", "--", "true")
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "record.json").read_text())
    assert manifest["policy"] == "cork"
    assert (out / "policy.yaml").read_text() == builtin_config("cork")


def test_cli_record_refuses_a_bad_policy_before_running(tmp_path):
    marker = tmp_path / "ran"
    result = invoke("record", "-o", str(tmp_path / "o"), "--policy", "fastest", "--",
                    "touch", str(marker))
    assert result.exit_code == 2 and "neither a built-in policy" in result.output
    assert not marker.exists()
