"""Tell from an executable file alone whether LD_PRELOAD can see its TCP calls.

The shim works by interposing on libc. It sees nothing of a statically linked
program (the dynamic loader that honours LD_PRELOAD never runs) nor of a Go
program (Go makes its system calls itself, without libc). A small parser of
the ELF headers finds out which, with no dependency.
"""

import mmap
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import CommandNotExecutableError, CommandNotFoundError

_ELF_MAGIC = b"\x7fELF"
_PT_LOAD, _PT_DYNAMIC, _PT_INTERP, _PT_NOTE = 1, 2, 3, 4
_DT_NULL, _DT_NEEDED, _DT_STRTAB = 0, 1, 5
_NT_GO_BUILDID = 4
_GO_BUILDINFO_SECTION = ".go.buildinfo"
# glibc's libc.so.6, musl's libc.so and Alpine's libc.musl-<arch>.so.1.
_LIBC_PREFIXES = ("libc.so", "libc.musl-")
# Linux follows at most this many nested #! interpreters (BINPRM_MAX_RECURSION).
_MAX_SCRIPT_DEPTH = 4

# Per ELF class: (header after e_ident, program header, section header, dynamic entry).
_LAYOUTS = {
    1: ("HHIIIIIHHHHHH", "IIIIIIII", "IIIIIIIIII", "iI"),
    2: ("HHIQQQIHHHHHH", "IIQQQQQQ", "IIQQQQIIQQ", "qQ"),
}


@dataclass(frozen=True)
class BinaryInfo:
    """What record.json says of the executable run (the interpreter, for a script)."""

    path: str | None
    static: bool
    go: bool

    @classmethod
    def of_manifest(cls, manifest: dict) -> "BinaryInfo":
        """The "binary" of a record.json's data."""
        binary = manifest["binary"]
        return cls(path=binary["path"], static=binary["static"], go=binary["go"])


@dataclass(frozen=True)
class ElfFacts:
    """The parts of an ELF file that decide whether the shim can see it."""

    interpreter: str | None
    needed: tuple[str, ...]
    sections: frozenset[str]
    has_go_note: bool

    @property
    def static(self) -> bool:
        # No interpreter: the dynamic loader, which applies LD_PRELOAD, never runs.
        # No libc needed: whatever it calls, it does not call libc's functions.
        return self.interpreter is None or not any(name.startswith(_LIBC_PREFIXES) for name in self.needed)

    @property
    def go(self) -> bool:
        return self.has_go_note or _GO_BUILDINFO_SECTION in self.sections


# Not an ELF file (nor a script run by one): no reason to warn.
_UNJUDGED = BinaryInfo(path=None, static=False, go=False)


class ElfFormatError(Exception):
    """The file is not an ELF file this parser can read."""


def resolve_command(name: str, search_path: str | None = None) -> Path:
    """The file `name` runs, as a shell finds it: a path if it has a '/', else through PATH."""
    if "/" in name:
        candidate = Path(name)
        if not candidate.exists():
            raise CommandNotFoundError(f"{name}: no such file")
        if candidate.is_dir() or not os.access(candidate, os.X_OK):
            raise CommandNotExecutableError(f"{name}: not an executable file")
        # Absolute: Path("./date") is "date", which exec would look up on PATH.
        return candidate.absolute()
    found = shutil.which(name, path=search_path)
    if found is None:
        raise CommandNotFoundError(f"{name}: command not found on PATH")
    return Path(found)


def inspect_executable(path: Path, search_path: str | None = None) -> BinaryInfo:
    """Judge the executable at `path`, following #! lines to the interpreter."""
    for _ in range(_MAX_SCRIPT_DEPTH + 1):
        interpreter = _script_interpreter(path)
        if interpreter is None:
            break
        try:
            path = resolve_command(interpreter, search_path)
        except (CommandNotFoundError, CommandNotExecutableError):
            # The kernel will refuse to run it too: nothing the shim could miss.
            return _UNJUDGED
    try:
        facts = read_elf(path)
    except ElfFormatError:
        return _UNJUDGED
    return BinaryInfo(path=str(path), static=facts.static, go=facts.go)


def blind_spot(binary: BinaryInfo) -> str | None:
    """Why the shim cannot see this binary's TCP calls, or None if it can."""
    if binary.go:
        return f"{binary.path} is a Go binary, and Go makes system calls without libc"
    if binary.static:
        return f"{binary.path} is statically linked, and LD_PRELOAD cannot reach it"
    return None


def read_elf(path: Path) -> ElfFacts:
    """Parse the headers of the ELF file at `path`."""
    try:
        with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as image:
            return _ElfReader(image).facts()
    except (OSError, ValueError, OverflowError, struct.error, IndexError) as error:
        # mmap raises ValueError on an empty file; the others come from a truncated or odd file.
        raise ElfFormatError(f"{path}: {error}") from None


class _ElfReader:
    def __init__(self, image: mmap.mmap):
        if image[:4] != _ELF_MAGIC or image[4] not in _LAYOUTS or image[5] not in (1, 2):
            raise ElfFormatError("not an ELF file")
        self.image = image
        self.is_64 = image[4] == 2
        self.order = "<" if image[5] == 1 else ">"
        self.header_format, self.program_format, self.section_format, self.dynamic_format = _LAYOUTS[image[4]]

    def facts(self) -> ElfFacts:
        (_, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx) = self.unpack(
            self.header_format, 16
        )
        segments = [self.segment(phoff + index * phentsize) for index in range(phnum)]
        interpreter, needed, has_go_note = None, (), False
        for p_type, p_offset, _, p_filesz, p_align in segments:
            if p_type == _PT_INTERP:
                interpreter = self.c_string(p_offset)
            elif p_type == _PT_DYNAMIC:
                needed = self.needed_libraries(p_offset, p_filesz, segments)
            elif p_type == _PT_NOTE:
                has_go_note = has_go_note or self.has_go_note(p_offset, p_filesz, p_align)
        sections = set()
        if shoff and shstrndx < shnum:
            names_offset = self.unpack(self.section_format, shoff + shstrndx * shentsize)[4]
            for index in range(shnum):
                name_index = self.unpack(self.section_format, shoff + index * shentsize)[0]
                sections.add(self.c_string(names_offset + name_index))
        return ElfFacts(interpreter, needed, frozenset(sections), has_go_note)

    def unpack(self, fmt: str, offset: int) -> tuple:
        return struct.unpack_from(self.order + fmt, self.image, offset)

    def segment(self, offset: int) -> tuple[int, int, int, int, int]:
        """A program header as (type, offset, vaddr, filesz, align)."""
        fields = self.unpack(self.program_format, offset)
        # 64-bit program headers move p_flags up to second place.
        if self.is_64:
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, p_align = fields
        else:
            p_type, p_offset, p_vaddr, _, p_filesz, _, _, p_align = fields
        return p_type, p_offset, p_vaddr, p_filesz, p_align

    def needed_libraries(self, offset: int, size: int, segments: list) -> tuple[str, ...]:
        entry_size = struct.calcsize(self.dynamic_format)
        name_offsets, string_table_address = [], None
        for entry in range(offset, offset + size - entry_size + 1, entry_size):
            tag, value = self.unpack(self.dynamic_format, entry)
            if tag == _DT_NULL:
                break
            if tag == _DT_NEEDED:
                name_offsets.append(value)
            elif tag == _DT_STRTAB:
                string_table_address = value
        # DT_STRTAB is a virtual address: the loaded segment holding it maps it to the file.
        for p_type, p_offset, p_vaddr, p_filesz, _ in segments:
            if (
                p_type == _PT_LOAD
                and string_table_address is not None
                and p_vaddr <= string_table_address < p_vaddr + p_filesz
            ):
                table = p_offset + string_table_address - p_vaddr
                return tuple(self.c_string(table + name) for name in name_offsets)
        return ()

    def has_go_note(self, offset: int, size: int, segment_align: int) -> bool:
        align = 8 if segment_align == 8 else 4
        position, end = offset, offset + size
        while position + 12 <= end:
            name_size, desc_size, note_type = self.unpack("III", position)
            name_start = position + 12
            name = self.image[name_start : name_start + name_size].rstrip(b"\0")
            if name == b"Go" and note_type == _NT_GO_BUILDID:
                return True
            position = _align_up(_align_up(name_start + name_size, align) + desc_size, align)
        return False

    def c_string(self, offset: int) -> str:
        end = self.image.find(b"\0", offset)
        return self.image[offset:end].decode(errors="replace")


def _script_interpreter(path: Path) -> str | None:
    """The interpreter a #! line names, resolving `/usr/bin/env NAME` to NAME."""
    try:
        with open(path, "rb") as file:
            first_line = file.readline(256)
    except OSError:
        return None
    if not first_line.startswith(b"#!"):
        return None
    words = first_line[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        # env's options (-S, -i) and NAME=value settings come before the command it runs.
        commands = [word for word in words[1:] if not word.startswith("-") and "=" not in word]
        return commands[0] if commands else None
    return words[0]


def _align_up(value: int, align: int) -> int:
    return (value + align - 1) & ~(align - 1)
