#!/usr/bin/env python3
"""child_layout: the shim's functions a fork child runs, as the linker script that places them
side by side, with the shim's variables a child writes (preload/child_layout.ld; issue 16, what a
fork-per-connection server pays per process).

A fork child maps none of the shim's code its parent ran: it faults in each 64 KiB of the shim's
text it runs (the kernel's fault-around), and the functions a PostgreSQL backend runs lay spread
over seven such windows. Each page of data it writes is a page it copies. The shim is compiled with
-ffunction-sections and -fdata-sections; preload/child_layout.ld puts the functions listed here in
one output section right after the PLT, ahead of the rest of .text, and the variables a child writes
(a fixed list, below) in one block of .data that never crosses a page.

The same output section then holds, side by side, the shim's functions a one-write server (redis,
nginx, memcached) runs on each request that a backend does not (the write hooks that are not a
backend's, their RecordedWrite instantiations, the histograms' adds): at their default places they
lay on seven pages among functions a request never runs, and took more L1 instruction misses from
the server than their own (bench/server_cache.py, bench/results/hot-path-session14.md). They are
the shim's functions with at least --threshold instructions a request under the fixed loads of
bench/server_cache.py, under observe and the adaptive policies, counted by callgrind after a
warm-up; a server's in the order of REQUEST_SERVERS, costliest first.

This runs PostgreSQL under callgrind (`--zero-before=_Fork`, glibc's fork after the prepare
handlers: a backend's counts hold only what it ran after its fork) for `pgbench -C -S` under observe and the adaptive
policies, takes the shim's functions with instructions in the last backends, and writes the script.
A function renamed since, or one no backend runs, only falls back to .text: the script never has
to be current for the shim to be correct.

    PYTHONPATH=advisor python3 bench/child_layout.py --shim build/preload/libtcpadvise.so \\
        [--connections 30] [--threshold 1] [-o preload/child_layout.ld]

Needs valgrind, PostgreSQL, redis, nginx, memcached and their clients (scripts/install-deps.sh).
"""

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server_instructions import measured_dumps

from tcpadvise.bench import servers as S
from tcpadvise.bench.suites import ADAPTIVE, POLICIES
from tcpadvise.record.shim import isolated_environment

# What a backend runs when it writes a trace (a sampled child): callgrind's name for it.
TRACE = "_ZN9tcpadvise14SerializeTraceEPNS_10JsonWriterEbj"
# The one-write servers whose requests' functions come first (bench/server_cache.py's fixed loads).
REQUEST_SERVERS = ("redis", "nginx", "memcached")
_NAME = re.compile(r"^(c?ob|c?fn|c?fl|fi|fe)=\((\d+)\)(?: (.*))?$")

HEADER = """\
/* child_layout.ld: what a fork child (a PostgreSQL backend under pgbench -C)
   runs and writes of the shim, side by side. Written by bench/child_layout.py.

   The functions it runs, first in .text, right after the PLT: the child
   faults in one 64 KiB window of the shim's text (and jemalloc's mallocx)
   where it faulted in seven. Ahead of them the shim's own cold parts
   (.text.unlikely.*, some 6.5 KB of slow paths kept out of line, among them
   CloseTracked, which each child runs for the listener it closes),
   crtbeginS.o's .text (the destructors the exit runs) and .fini (_fini,
   DT_FINI): after the functions, they were a second window. Those a
   one-write server (redis, nginx, memcached) runs on every request come
   last of every child's, followed by the rest of the server's: a request's
   text is one stretch. Then the functions only some children run (the
   sampled ones' traces, 1 in 16): among every child's, they pushed its
   functions over a 64 KiB boundary (a second window). The rest of the
   text follows in the same output section, as the default script would
   place it, whose own .text is then empty and dropped: tools
   that symbolize only the section .text (valgrind's callgrind, which
   bench/server_instructions.py reads) see every function. From callgrind runs under observe, cork and coalesce; a name that no
   longer exists matches nothing and its function stays in .text.

   The variables it writes (or reads where its parent never did), in one
   block of 1.3 KB aligned to 2 KiB, never across a page: the fields of
   g_runtime its fork handler sets (the first of RuntimeState),
   crtbeginS.o's completed.0 (set by its exit's destructors), the signal
   dispositions the shim owns and the program's handlers it runs (set again
   by a server's sigaction calls: a PostgreSQL backend sets 14), the
   generation of the readable memory it knows (moved on by a backend's
   mmap and munmap), the deadline thread's state, the held
   set's use and the experiments' draws (read by the fork handler), the
   socket table's arena (a child's first entry or table moves it on), and the
   count of modules the call sites' snapshot holds (read by the trace of a
   child that loaded no unwinder: alone on a page, it was one more fault),
   the snapshot deadline (set again by its fork handler). The child copies one page of the
   shim's data where it faulted on four. */
SECTIONS
{
  .data.tcpadvise_child ALIGN(2048) :
  {
    /* Its first byte is data: zero-initialised variables (.bss) come first
       in a section of initialised data. */
    BYTE(0)
    *crtbeginS.o(.bss)
    *(.bss._ZN9tcpadvise23g_deadline_thread_stateE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_114g_flusher_idleE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_110g_set_usedE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_17g_drawsE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_17g_ownedE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_111g_app_plainE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_110g_app_infoE)
    *(.data._ZN9tcpadvise19g_memory_generationE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_114g_module_countE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_17g_spoolE)
    *(.bss._ZN9tcpadvise12_GLOBAL__N_113g_table_arenaE)
    *(.data._ZN9tcpadvise20g_next_snapshot_tickE)
    *(.data._ZN9tcpadvise9g_runtimeE)
    /* The end of the file's data: the zeroed data's mapping starts on the
       next page, and ends where its wiped part starts (process_page.h:
       AvoidHugePagesInZeroedData). */
    tcpadvise_zeroed_start = .;
  }
}
INSERT AFTER .data;
SECTIONS
{
  /* The socket table's per-process part (socket_table.h: Local) and the
     process page (process_page.h), both wiped in fork children, last and
     side by side: the shim's zeroed data is then two mappings, where it
     would be three and Local one more of its own, each of which every fork
     and exit of the process copies and tears down. */
  .bss.tcpadvise_process_page (NOLOAD) :
  {
    tcpadvise_zeroed_end = .;
    *(.bss._ZN9tcpadvise11SocketTable6local_E)
    *(.bss._ZN9tcpadvise14g_process_pageE)
  }
}
INSERT AFTER .bss;
SECTIONS
{
  /* The read-only data with the headers and the dynamic symbols, ahead of
     the text rather than in a segment of its own after it: the shim's file
     is four mappings, not five, each of which every fork and exit of the
     process copies and tears down, and the data stays out of the
     executable one (-z noseparate-code makes three, the data executable).
     The default script's sections of the same names are then empty and
     dropped. The segment is padded to 64 KiB, in the file too (a hole
     would be one more mapping): the kernel maps a file's pages around a
     fault 64 KiB at a time from such a boundary, and the child's
     functions, first in the text, start a window. A backend then reads
     the symbol hash (the loader's lookups) and the trace's strings in one
     window where it faulted on each. */
  .rodata ALIGN(0x1000) : { *(.rodata .rodata.* .gnu.linkonce.r.*) }
  .rodata1 : { *(.rodata1) }
  .eh_frame_hdr : { *(.eh_frame_hdr) *(.eh_frame_entry .eh_frame_entry.*) }
  .eh_frame : ONLY_IF_RO { KEEP (*(.eh_frame)) *(.eh_frame.*) }
  .gcc_except_table : ONLY_IF_RO { *(.gcc_except_table .gcc_except_table.*) }
  .tcpadvise_text_align : { BYTE(0) . = ALIGN(0x10000); }
}
INSERT AFTER .relr.dyn;
SECTIONS
{
  .text :
  {
    *crtbeginS.o(.text)
    KEEP (*(SORT_NONE(.fini)))
    *(.text.unlikely.*)
    /* The functions after them at the offsets in a page they had after the
       PLT: the same cache sets as without the block ahead of them (a
       request's L1 instruction misses). */
    . = (. + 0xfff) & ~0xfff;
"""
FOOTER = """\
    *(.text.unlikely .text.*_unlikely .text.unlikely.*)
    *(.text.exit .text.exit.*)
    *(.text.startup .text.startup.*)
    *(.text.hot .text.hot.*)
    *(SORT(.text.sorted.*))
    /* jemalloc's main object (113 KiB, no function sections) on a 64 KiB
       boundary: the mallocx a child runs (10 KiB at 72 KiB into it) is then
       one window, whatever the size of the text ahead of it. */
    . = ALIGN(0x10000);
    *libjemalloc_lazy_pic.a:jemalloc.pic.o(.text)
    *(.text .stub .text.* .gnu.linkonce.t.*)
  }
}
INSERT BEFORE .text;
"""


def shim_functions(dump: Path, shim: Path) -> collections.Counter:
    """The functions of the shim's object with instructions in one callgrind dump (names as compiled),
    and their self instructions."""
    objects: dict[str, str] = {}
    functions: dict[str, str] = {}
    current_object = current_function = None
    calling = False
    found: collections.Counter = collections.Counter()
    for line in dump.read_text(errors="replace").splitlines():
        named = _NAME.match(line)
        if named:
            kind, number, name = named.groups()
            table = objects if kind.endswith("ob") else functions if kind.endswith("fn") else None
            if table is not None and name is not None:
                table[number] = name
            if kind == "ob":
                current_object = objects[number]
            elif kind == "fn":
                # NAME'2: callgrind's name for a function's recursive calls.
                current_function, calling = functions[number].split("'")[0], False
            continue
        if line.startswith("calls="):
            calling = True  # the next cost line is the call's inclusive cost, not the function's own
            continue
        if line[:1].isdigit() or line[:1] in "+-*":
            if calling:
                calling = False
                continue
            fields = line.split()
            # Valgrind reads the symbols of a shim linked with this script, but counts the code
            # outside .text as an unknown object's ("???").
            if (current_object and (Path(current_object).name == shim.name or current_object == "???")
                    and len(fields) > 1 and int(fields[1]) > 0):
                found[current_function] += int(fields[1])
    return found


def shim_symbols(shim: Path) -> set[str]:
    """The shim's functions, by their symbols (those of an unknown object a backend ran may be another's)."""
    listing = subprocess.run(["nm", "--defined-only", str(shim)], capture_output=True, text=True, check=True).stdout
    return {fields[2] for fields in map(str.split, listing.splitlines()) if len(fields) == 3 and fields[1] in "tTW"}


def section_pattern(name: str) -> str:
    """The pattern of the section -ffunction-sections gives the function: callgrind names a constructor or
    destructor by its complete-object symbol (C1, D1), an alias in the base-object one's (C2, D2)
    section; a function run only at exit (a destructor attribute) is in .text.exit.NAME."""
    return _STRUCTOR.sub(lambda m: f"{m[1]}[12]{m[2]}", name)


_STRUCTOR = re.compile(r"([CD])[12](E)")


def backend_functions(shim: Path, arm: str, connections: int, scratch: Path) -> list[set[str]]:
    """The shim's functions each of the last backends of `pgbench -C -S` ran under the arm."""
    server = next(s for s in S.SERVERS if s.name == "postgres")
    directory = S._prepared(server, scratch)
    out = Path(tempfile.mkdtemp(prefix="callgrind-", dir=scratch))
    out.chmod(0o777)  # written by a server that runs as another user
    traces = Path(tempfile.mkdtemp(prefix="traces-", dir=scratch))
    traces.chmod(0o777)
    valgrind = ["valgrind", "--tool=callgrind", "--trace-children=yes", "--demangle=no",
                "--zero-before=_Fork", f"--callgrind-out-file={out}/cg.%p"]
    # setpriv before valgrind: a dump named by the pid is then never the root's file that the
    # server, the same pid after setpriv's exec, cannot open.
    run_as = server.run_as()
    server.run_as = lambda: []
    try:
        with S.running(server, directory, POLICIES[arm], shim, traces, [*run_as, *valgrind]) as port:
            subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-C", "-S", "-n",
                            "-c", "1", "-t", str(connections), "postgres"], capture_output=True,
                           env=isolated_environment(), check=True, timeout=900)
            time.sleep(1)  # the last backend's dump
    finally:
        del server.run_as
    # The backends are the processes that ran PostgresMain (not the postmaster, nor its background
    # processes, whatever their pids after a wrap), in the order they ended; the first backends take
    # the call-site samples that the later ones, a steady-state server's, leave to the tree (README:
    # Call sites).
    dumps = sorted(out.glob("cg.*"), key=lambda path: path.stat().st_mtime)
    backends = [dump for dump in dumps if "PostgresMain" in dump.read_text(errors="replace")][-10:]
    if len(backends) < 5:
        raise RuntimeError(f"{arm}: {len(backends)} backend dumps in {out}")
    return [set(shim_functions(dump, shim)) for dump in backends]


def request_functions(shim: Path, server_name: str, arm: str, scratch: Path) -> collections.Counter:
    """The shim's self instructions a request by function on a one-write server under the arm: the
    fixed load of bench/server_cache.py, counted after a warm-up (the start and the trace excluded)."""
    server = next(s for s in S.SERVERS if s.name == server_name)
    requests, dumps = measured_dumps(server, POLICIES[arm], shim, scratch, ["--demangle=no"])
    found: collections.Counter = collections.Counter()
    for dump in dumps:
        found.update(shim_functions(dump, shim))
    return collections.Counter({name: n / requests for name, n in found.items()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", type=Path, required=True)
    parser.add_argument("--connections", type=int, default=30)
    parser.add_argument("--threshold", type=float, default=1.0,
                        help="a server's function runs at least this many instructions a request (default 1)")
    parser.add_argument("-o", "--output", type=Path, default=Path("preload/child_layout.ld"))
    args = parser.parse_args()
    symbols = shim_symbols(args.shim)
    every: set[str] = set()  # what the backends that wrote no trace ran
    tracing: set[str] = set()  # what those that wrote one (sampled children) ran
    # A server's functions, in the order of REQUEST_SERVERS, each one's costliest first; a function
    # two servers run goes with the first.
    hot: dict[str, None] = {}
    with tempfile.TemporaryDirectory(prefix="child-text-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as scratch:
        Path(scratch).chmod(0o711)
        for server in REQUEST_SERVERS:
            per_request: collections.Counter = collections.Counter()
            for arm in ("observe", *ADAPTIVE):
                per_request |= request_functions(args.shim.resolve(), server, arm, Path(scratch))
            found = [name for name, n in per_request.most_common() if n >= args.threshold and name in symbols]
            print(f"{server}: {len(found)} functions at {args.threshold:g}+ instructions a request", file=sys.stderr)
            hot.update(dict.fromkeys(found))
        for arm in ("observe", *ADAPTIVE):
            found = backend_functions(args.shim.resolve(), arm, args.connections, Path(scratch))
            print(f"{arm}: {len(set().union(*found))} functions in {len(found)} backends", file=sys.stderr)
            for functions in found:
                if TRACE in functions:
                    tracing |= functions
                else:
                    every |= functions
    # Callgrind names by its address the code it reads no symbol for (crtstuff's static functions).
    # The functions every child runs (those of the backends that wrote no trace) that a server does
    # not run on each request first, then the child's that it does, then the rest of the servers'
    # functions, then what only some children run (the sampled ones' traces): every child's functions
    # and a request's are one stretch, within the window the child faults in first (with the servers'
    # ahead of them, or the traces' among them, they crossed a 64 KiB boundary: one fault more a
    # backend).
    every &= symbols
    child = every | (tracing & symbols)
    sections = [*sorted(every - set(hot)), *(name for name in hot if name in child),
                *(name for name in hot if name not in child), *sorted(child - every - set(hot))]
    body = "".join(f"    *(.text.{pattern} .text.exit.{pattern})\n" for pattern in map(section_pattern, sections))
    args.output.write_text(HEADER + body + FOOTER)
    print(f"{len(every)} functions of every child's, {len(child - every)} of some, "
          f"+ {len(set(hot) - child)} of the servers' -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
