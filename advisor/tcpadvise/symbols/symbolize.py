"""Name the code that writes: a trace's call-site stacks (module + offset) turned into functions and lines.

The shim stores each frame as a module (path, build-id, load base) and the return address's offset
from that base, which is the ELF virtual address of the instruction after the call. Here those are
resolved offline: `addr2line` (binutils) for function, file and line when it is installed, else
pyelftools' symbol tables and DWARF line tables; C++ names demangled (addr2line -C, c++filt). A file
whose build-id differs from the trace's (rebuilt since) is not trusted: its frames stay module+offset.
"""

import bisect
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from operator import itemgetter

from elftools.common.exceptions import ELFError
from elftools.construct.core import ConstructError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection

from ..model.hist import ranges

# Modules whose frames are never the one a finding names: libc and the loader, the sanitizer
# runtimes, and the shim itself (the program's code is what calls them).
_RUNTIME_PREFIXES = ("libc.so", "libc-", "libpthread", "ld-linux", "libasan", "libtsan", "libubsan", "libtcpadvise")
# Files larger than this are not parsed (a trace names any path; time and memory stay bounded).
_MAX_FILE_BYTES = 1 << 30
_TOOL_TIMEOUT_S = 60


@dataclass
class _Elf:
    path: str
    symbols: list[tuple[int, int, str]] = field(default_factory=list)  # (address, size, name), sorted
    starts: list[int] = field(default_factory=list)
    lines: list[tuple[int, str, int]] | None = None  # (address, file, line), sorted; None until read
    has_dwarf: bool = False


def _build_id(elf: ELFFile) -> str | None:
    for section in elf.iter_sections():
        if isinstance(section, NoteSection):
            for note in section.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    return note["n_desc"]
    return None


def is_runtime_module(path: str) -> bool:
    """Whether frames in the module at `path` are runtime (libc, loader, sanitizer, shim), not the program."""
    return os.path.basename(path).startswith(_RUNTIME_PREFIXES)


def demangle(names: list[str]) -> dict[str, str]:
    """C++ names demangled with c++filt when installed; others (and all without it) as they are."""
    mangled = sorted({name for name in names if name.startswith("_Z")})
    result = {name: name for name in names}
    tool = shutil.which("c++filt")
    if mangled and tool:
        try:
            out = subprocess.run(
                [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S
            ).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            out = []
        if len(out) == len(mangled):
            result.update(zip(mangled, out))
    return result


# _STACKS_KEPT: resolved stacks a Symbolizer keeps (they hold their trace's stack alive); past it, it starts over.
_STACKS_KEPT = 4096


class Symbolizer:
    """Resolves (module, offset) frames, caching each file's tables and each address's answer."""

    def __init__(self, use_addr2line: bool = True):
        self._addr2line = shutil.which("addr2line") if use_addr2line else None
        self._files: dict[tuple[str, str | None], _Elf | None] = {}
        self._answers: dict[tuple[str, str | None, int], dict] = {}
        # id of a trace's stack -> (the stack, kept so that the id stays its own; its frames).
        self._stacks: dict[int, tuple[dict, list[dict]]] = {}
        # id of a trace's stack -> (the stack, its stack_site).
        self._sites: dict[int, tuple[dict, tuple]] = {}

    def resolve(self, module: dict | None, offset: int) -> dict:
        """One frame: function, file, line (None where unknown), module path and offset."""
        return self.resolve_many(module, [offset])[0]

    def resolve_stack(self, modules: list[dict], stack: dict) -> list[dict]:
        """A trace stack's frames (its "frames" of [module index, offset]), resolved once per stack:
        the sockets of a process share its stacks."""
        key = id(stack)
        if key not in self._stacks:
            if len(self._stacks) >= _STACKS_KEPT:
                self._stacks.clear()  # the stacks of traces read earlier: a report holds one trace at a time
            frames = [self.resolve(modules[m] if 0 <= m < len(modules) else None, offset) for m, offset in stack["frames"]]
            self._stacks[key] = (stack, frames)
        return self._stacks[key][1]

    def stack_site(self, modules: list[dict], stack: dict) -> tuple[list[dict], dict, str | None, dict]:
        """A trace stack as a call site: its frames, the frame it is named after (the first outside
        the runtime), that frame's module's build-id and the stack's shape (stack_shape); once per
        stack, as resolve_stack."""
        key = id(stack)
        if key not in self._sites:
            if len(self._sites) >= _STACKS_KEPT:
                self._sites.clear()
            frames = self.resolve_stack(modules, stack)
            named = next((f for f in frames if not (f["module"] and is_runtime_module(f["module"]))), frames[0])
            self._sites[key] = (stack, (frames, named, _build_id_of(modules, stack["frames"], frames, named),
                                        stack_shape(stack)))
        return self._sites[key][1]

    def resolve_many(self, module: dict | None, offsets: list[int]) -> list[dict]:
        """Frames of one module (None: code in no module, such as JIT code) at these offsets."""
        if module is None:
            return [_frame(None, "[unknown code: JIT or unmapped]", None, None, offset) for offset in offsets]
        path, build_id = module.get("path", ""), module.get("build_id")
        key = (path, build_id)
        todo = sorted({o for o in offsets if (path, build_id, o) not in self._answers})
        if todo:
            elf = self._open(path, build_id)
            for offset, answer in zip(todo, self._lookup(elf, path, todo)):
                self._answers[(path, build_id, offset)] = answer
        return [self._answers[(*key, offset)] for offset in offsets]

    def _open(self, path: str, build_id: str | None) -> _Elf | None:
        key = (path, build_id)
        if key not in self._files:
            self._files[key] = _read_elf(path, build_id)
        return self._files[key]

    def _lookup(self, elf: _Elf | None, path: str, offsets: list[int]) -> list[dict]:
        if elf is None:
            return [_frame(path, None, None, None, offset) for offset in offsets]
        # A return address is the instruction after the call: the call is at the byte before.
        pcs = [max(offset - 1, 0) for offset in offsets]
        found = self._addr2line_lookup(path, pcs) if self._addr2line and elf.has_dwarf else None
        names = demangle([name for name in (_symbol(elf, pc) for pc in pcs) if name])
        answers = []
        for index, (offset, pc) in enumerate(zip(offsets, pcs)):
            function, file, line, inlined_by = found[index] if found else (None, None, None, [])
            if function is None:
                symbol = _symbol(elf, pc)
                function = names.get(symbol, symbol) if symbol else None
            if file is None and elf.has_dwarf and not found:
                file, line = _line(elf, pc)
            frame = _frame(path, function, file, line, offset)
            if inlined_by:
                frame["inlined_by"] = [{"function": f, "file": fl, "line": ln} for f, fl, ln in inlined_by]
            answers.append(frame)
        return answers

    def _addr2line_lookup(self, path: str, pcs: list[int]) -> list[tuple] | None:
        """(function, file, line, inlined_by) per pc: the innermost function DWARF places there,
        and the functions it was inlined into, outward, as (function, file, line) each."""
        try:
            out = subprocess.run(
                [self._addr2line, "-a", "-i", "-C", "-f", "-e", path, *(hex(pc) for pc in pcs)],
                capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S,
            ).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            return None
        groups: list[list[str]] = []
        for text in out:
            if text.startswith("0x") and " " not in text:
                groups.append([])
            elif groups:
                groups[-1].append(text)
        if len(groups) != len(pcs) or any(not g or len(g) % 2 for g in groups):
            return None
        result = []
        for lines in groups:
            frames = [_place(function, where) for function, where in zip(lines[0::2], lines[1::2])]
            result.append((*frames[0], frames[1:]))
        return result


def _place(function: str, where: str) -> tuple:
    file, _, line = where.rpartition(":")
    line = line.split(" ", 1)[0]
    return (
        None if function == "??" else function,
        None if file in ("??", "") else file,
        int(line) if line.isdigit() and line != "0" else None,
    )


def _frame(module: str | None, function: str | None, file: str | None, line: int | None, offset: int) -> dict:
    return {"function": function, "file": file, "line": line, "module": module, "offset": offset}


def _read_elf(path: str, build_id: str | None) -> _Elf | None:
    """The file's symbols (and whether it has DWARF), or None when it is missing, not ELF,
    too large, or not the build the trace saw (build-ids differ)."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > _MAX_FILE_BYTES:
            return None
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            if build_id is not None and _build_id(elf) not in (None, build_id):
                return None
            result = _Elf(path=path, has_dwarf=elf.get_section_by_name(".debug_line") is not None)
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            if isinstance(table, SymbolTableSection):
                result.symbols = _functions(elf, table)
            result.symbols.sort()
            result.starts = [start for start, _, _ in result.symbols]
            return result
    except (
        OSError, ELFError, ConstructError, ValueError, OverflowError, KeyError, IndexError, AttributeError, AssertionError
    ):
        return None


# _STT_FUNC: the symbol type of a function. (Type 10, a GNU IFUNC's resolver, is not taken:
# pyelftools names it STT_LOOS, so the name test this replaced never matched it.)
_STT_FUNC = 2


def _functions(elf: ELFFile, table: SymbolTableSection) -> list[tuple[int, int, str]]:
    """(address, size, name) of the table's functions at a non-zero address. The table is unpacked
    whole by struct (a shared library's ten thousand symbols in milliseconds, where pyelftools
    parsing each took 0.3 s); names from the string table as pyelftools reads them."""
    order = "<" if elf.little_endian else ">"
    # Elf64_Sym: name, info, other, shndx, value, size; Elf32_Sym: name, value, size, info, other, shndx.
    entry = struct.Struct(order + ("IBBHQQ" if elf.elfclass == 64 else "IIIBBH"))
    fields = itemgetter(0, 1, 4, 5) if elf.elfclass == 64 else itemgetter(0, 3, 1, 2)
    sized = table["sh_entsize"] == entry.size  # else its entries are not Elf_Sym as packed here
    data = table.data() if sized else b""
    if not sized or len(data) < table.num_symbols() * entry.size:
        return [(symbol["st_value"], symbol["st_size"], symbol.name) for symbol in table.iter_symbols()
                if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"]]
    count = table.num_symbols()
    strings = table.stringtable.data()

    def name(offset: int) -> str:
        end = strings.find(b"\0", offset)
        if end < 0 or offset >= len(strings):
            return table.stringtable.get_string(offset)  # past the table: from the file, as pyelftools does
        return strings[offset:end].decode("utf-8", errors="replace")

    return [(value, size, name(offset))
            for offset, info, value, size in map(fields, entry.iter_unpack(data[:count * entry.size]))
            if info & 0xF == _STT_FUNC and value]


def _symbol(elf: _Elf, pc: int) -> str | None:
    index = bisect.bisect_right(elf.starts, pc) - 1
    if index < 0:
        return None
    start, size, name = elf.symbols[index]
    return name if pc < start + max(size, 1) else None


def _line(elf: _Elf, pc: int) -> tuple[str | None, int | None]:
    """File and line from pyelftools' DWARF line tables (when addr2line is not installed)."""
    if elf.lines is None:
        elf.lines = []
        try:
            with open(elf.path, "rb") as stream:
                dwarf = ELFFile(stream).get_dwarf_info()
                for unit in dwarf.iter_CUs():
                    program = dwarf.line_program_for_CU(unit)
                    if program is None:
                        continue
                    files = program["file_entry"]
                    version = program["version"]
                    for entry in program.get_entries():
                        state = entry.state
                        if state is None or state.end_sequence:
                            continue
                        index = state.file if version >= 5 else state.file - 1
                        if 0 <= index < len(files):
                            elf.lines.append((state.address, files[index].name.decode(errors="replace"), state.line))
        except (
        OSError, ELFError, ConstructError, ValueError, OverflowError, KeyError, IndexError, AttributeError, AssertionError
    ):
            pass
        elf.lines.sort()
    index = bisect.bisect_right(elf.lines, (pc, "\uffff", 1 << 31)) - 1
    if index < 0:
        return None, None
    return elf.lines[index][1], elf.lines[index][2]


def socket_call_sites(trace: dict, socket: dict, symbolizer: Symbolizer) -> list[dict]:
    """A trace socket's call sites, most writes first: the named frame's function, file, line,
    module and offset, the writes and bytes (estimated for the socket when sampled), the sampled
    counts, how many opened a burst, and the whole stack."""
    info = trace.get("call_sites") or {}
    stacks, modules = info.get("stacks") or [], info.get("modules") or []
    own = [entry for entry in socket.get("call_sites") or [] if 0 <= entry.get("stack", -1) < len(stacks)]
    sampled = sum(entry["writes"] for entry in own)
    if not sampled:
        return []
    # Each sample stands for the writes of its rate (estimated_writes, traces since adaptive
    # sampling): the shares of the socket's write count, which they are scaled to.
    weight = {"writes": "estimated_writes", "bytes": "estimated_bytes"} if all("estimated_writes" in e for e in own) else {"writes": "writes", "bytes": "bytes"}
    estimated = sum(entry[weight["writes"]] for entry in own)
    calls = socket.get("writes", {}).get("calls", sampled)
    scale = calls / estimated if info.get("mode") == "sample" and estimated and calls >= sampled else 1.0
    sites = []
    for entry in own:
        frames, named, build_id, shape = symbolizer.stack_site(modules, stacks[entry["stack"]])
        sites.append({
            **named,
            "build_id": build_id,
            "writes": round(entry[weight["writes"]] * scale) if scale != 1.0 else entry["writes"],
            "bytes": round(entry[weight["bytes"]] * scale) if scale != 1.0 else entry["bytes"],
            "sampled_writes": entry["writes"],
            "first_of_burst": entry["first_of_burst"],
            **shape,
            "stack": frames,
        })
    return sorted(sites, key=lambda site: -site["writes"])


def stack_shape(stack: dict) -> dict:
    """What a stack's sampled writes look like, over the whole process: `sizes`, its write-size
    histogram (trace encoding), and `burst_position`, the share of them that were first, middle,
    last or alone in their burst (null for traces without it)."""
    writes = stack.get("writes", 0)
    if "last_of_burst" not in stack or not writes:
        return {"sizes": stack.get("sizes"), "burst_position": None}
    first, last, alone = stack["first_of_burst"] - stack["alone_in_burst"], stack["last_of_burst"] - stack["alone_in_burst"], stack["alone_in_burst"]
    middle = max(writes - first - last - alone, 0)
    position = {"first": first, "middle": middle, "last": last, "alone": alone}
    return {"sizes": stack.get("sizes"), "burst_position": {k: round(v / writes, 3) for k, v in position.items()}}


def size_words(sizes: dict | None, limit: int = 3) -> str:
    """`4 and 8 B`: the sizes a site writes, most frequent first (a bucket's low edge above 255 B)."""
    if not sizes or not sizes.get("count"):
        return ""
    buckets = sorted(ranges(sizes), key=lambda bucket: -bucket[2])
    values = sorted(int(low) for low, _, _ in buckets[:limit])
    if sizes.get("unbucketed") or len(buckets) > limit:
        return f"{int(sizes['min'])} to {int(sizes['max'])} B"
    words = [str(v) for v in values]
    return (" and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]) + " B"


def _build_id_of(modules: list[dict], raw: list, frames: list[dict], named: dict) -> str | None:
    m = raw[frames.index(named)][0]
    return modules[m].get("build_id") if 0 <= m < len(modules) else None


def merge_call_sites(lists: list[list[dict]]) -> list[dict]:
    """Call sites of several sockets added together by site (function, file, line, module, offset)."""
    total = CallSitesSum()
    for sites in lists:
        total.add(sites)
    return total.result()


class CallSitesSum:
    """merge_call_sites one socket's sites at a time: add() each list, result() is their merge."""

    def __init__(self):
        self._merged: dict[tuple, dict] = {}

    def add(self, sites: list[dict]) -> None:
        merged = self._merged
        for site in sites:
            key = (site["function"], site["file"], site["line"], site["module"], site["offset"])
            if key not in merged:
                merged[key] = {**site}
            else:
                for count in ("writes", "bytes", "sampled_writes", "first_of_burst"):
                    merged[key][count] += site[count]

    def result(self) -> list[dict]:
        return sorted(self._merged.values(), key=lambda site: -site["writes"])


def site_text(site: dict) -> str:
    """`function (file:line)`, or `module+0xoffset` when the module has no symbols or debug info."""
    where = f"{os.path.basename(site['file'])}:{site['line']}" if site["file"] and site["line"] else None
    module = os.path.basename(site["module"]) if site["module"] else "?"
    if site["function"] and where:
        return f"{site['function']} ({where})"
    if site["function"]:
        return f"{site['function']} ({module}+{site['offset']:#x})"
    return f"{module}+{site['offset']:#x}"


def call_sites_sentence(sites: list[dict], limit: int = 3) -> str:
    """Where to change the code: the sites that write the most, named."""
    named = [site_text(site) for site in sites[:limit]]
    more = f" and {len(sites) - limit} more" if len(sites) > limit else ""
    if len(named) == 1:
        return f"The writes come from {named[0]}."
    places = [_place_text(site) for site in sites[:limit]]
    return (f"The writes come from {', '.join(named[:-1])}{'' if more else ' and'} {named[-1]}{more}: "
            f"merge the writes at {', '.join(places[:-1])} and {places[-1]} into one writev where they belong to one message.")


def _place_text(site: dict) -> str:
    """`client.c:42`, or the site's text when it has no line."""
    if site["file"] and site["line"]:
        return f"{os.path.basename(site['file'])}:{site['line']}"
    return site_text(site)


def call_site_line(site: dict, bursts: int = 0) -> str:
    """One site for the text report: where, how many writes of which sizes (and per burst, given the
    group's `bursts`), where in their burst."""
    mean = site["bytes"] / site["writes"] if site["writes"] else 0
    sizes = size_words(site.get("sizes")) or f"{mean:.0f} B mean"
    shares = site.get("burst_position")
    if shares:
        word, share = max(shares.items(), key=lambda item: item[1])
        names = {"first": "first of burst", "middle": "mid-burst", "last": "last of burst", "alone": "alone in its burst"}
        position = names[word] if share >= 0.9 else ", ".join(f"{v:.0%} {names[k]}" for k, v in shares.items() if v)
    else:
        first = site["first_of_burst"] / site["sampled_writes"] if site["sampled_writes"] else 0
        position = "first of burst" if first >= 0.9 else "later in burst" if first <= 0.1 else f"{first:.0%} first of burst"
    per_burst = f" ({_plain_number(site['writes'] / bursts)} per burst)" if bursts else ""
    return f"{site_text(site)}: {site['writes']} writes of {sizes}{per_burst}, {position}"


def _plain_number(value: float) -> str:
    """Two decimals at most, never scientific notation: 15, 1.5, 0.33, <0.01."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value >= 0.01 or value == 0 else "<0.01"
