import os
import shutil
from pathlib import Path

import pytest

from tcpadvise.symbols.elfinfo import (
    BinaryInfo,
    ElfFormatError,
    blind_spot,
    inspect_executable,
    read_elf,
    resolve_command,
)
from tcpadvise.errors import CommandNotExecutableError, CommandNotFoundError

from .conftest import build_c

TRUE = Path(shutil.which("true"))


def script(directory: Path, name: str, first_line: str) -> Path:
    path = directory / name
    path.write_text(f"{first_line}\nexit 0\n")
    path.chmod(0o755)
    return path


def test_dynamic_binary_is_neither_static_nor_go():
    facts = read_elf(TRUE)
    assert facts.interpreter is not None
    assert any(name.startswith("libc.so") for name in facts.needed)
    assert inspect_executable(TRUE) == BinaryInfo(path=str(TRUE), static=False, go=False)
    assert blind_spot(inspect_executable(TRUE)) is None


def test_static_binary(static_binary):
    facts = read_elf(static_binary)
    assert facts.interpreter is None
    info = inspect_executable(static_binary)
    assert info == BinaryInfo(path=str(static_binary), static=True, go=False)
    assert "statically linked" in blind_spot(info)


def test_static_pie_binary(tmp_path):
    # A static PIE has a dynamic section but no interpreter: still out of LD_PRELOAD's reach.
    binary = build_c(tmp_path, "static-pie", "-static-pie")
    assert read_elf(binary).interpreter is None
    assert inspect_executable(binary).static


def test_go_binary(go_binary):
    info = inspect_executable(go_binary)
    assert info.go
    assert "Go binary" in blind_spot(info)


def test_script_is_judged_by_its_interpreter(tmp_path, static_binary):
    assert inspect_executable(script(tmp_path, "dynamic.sh", "#!/bin/sh")).path == "/bin/sh"
    assert not inspect_executable(script(tmp_path, "dynamic.sh", "#!/bin/sh -e")).static
    assert inspect_executable(script(tmp_path, "static.sh", f"#!{static_binary}")).static


def test_env_script_is_judged_by_the_command_found_on_path(tmp_path, static_binary):
    search_path = f"{static_binary.parent}{os.pathsep}{os.environ['PATH']}"
    info = inspect_executable(
        script(tmp_path, "run", f"#!/usr/bin/env -S {static_binary.name} -x"), search_path
    )
    assert info == BinaryInfo(path=str(static_binary), static=True, go=False)


def test_script_chain_goes_to_the_last_interpreter(tmp_path, static_binary):
    middle = script(tmp_path, "middle", f"#!{static_binary}")
    assert inspect_executable(script(tmp_path, "outer", f"#!{middle}")).path == str(static_binary)


def test_a_file_that_is_not_elf_cannot_be_judged(tmp_path):
    text = tmp_path / "notes"
    text.write_text("hello\n")
    empty = tmp_path / "empty"
    empty.touch()
    for path in (text, empty):
        with pytest.raises(ElfFormatError):
            read_elf(path)
        assert inspect_executable(path) == BinaryInfo(path=None, static=False, go=False)


def test_script_with_a_missing_interpreter_cannot_be_judged(tmp_path):
    assert inspect_executable(script(tmp_path, "orphan", "#!/no/such/interpreter")).path is None


def test_truncated_elf_is_a_format_error(tmp_path):
    truncated = tmp_path / "truncated"
    truncated.write_bytes(TRUE.read_bytes()[:40])
    with pytest.raises(ElfFormatError):
        read_elf(truncated)


def test_resolve_command_searches_path(tmp_path):
    tool = script(tmp_path, "my-tool", "#!/bin/sh")
    assert resolve_command("my-tool", str(tmp_path)) == tool
    assert resolve_command(str(tool)) == tool
    assert resolve_command("true") == TRUE


def test_resolve_command_not_found_is_127(tmp_path):
    with pytest.raises(CommandNotFoundError, match="command not found") as raised:
        resolve_command("no-such-command-tcpadvise", str(tmp_path))
    assert raised.value.exit_code == 127
    with pytest.raises(CommandNotFoundError, match="no such file"):
        resolve_command(str(tmp_path / "missing"))


def test_resolve_command_not_executable_is_126(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("data")
    with pytest.raises(CommandNotExecutableError) as raised:
        resolve_command(str(plain))
    assert raised.value.exit_code == 126
    with pytest.raises(CommandNotExecutableError):
        resolve_command(str(tmp_path))
