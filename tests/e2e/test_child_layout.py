"""preload/child_layout.ld places side by side the shim's functions a fork child runs and the variables
it writes (bench/child_layout.py writes it from PostgreSQL's backends under callgrind): a name that no
longer matches a function or variable of the built shim places nothing, and the child faults in one
more window of text or copies one more page a connection, which nothing else notices (session 19:
three renamed functions had cost each child two faults). A renamed function fails here until the
script is run again."""
import fnmatch
import os
import re
import subprocess

import pytest

from testlib import REPO, shim_path

LAYOUT = REPO / "preload" / "child_layout.ld"
# A placed function: *(.text.NAME .text.exit.NAME), NAME a section pattern (section_pattern's [12]).
_FUNCTION = re.compile(r"^\s*\*\(\.text\.(\S+) \.text\.exit\.\1\)$", re.MULTILINE)
_VARIABLE = re.compile(r"^\s*\*\(\.(?:bss|data)\.(\S+)\)$", re.MULTILINE)


def shim_symbols():
    listing = subprocess.run(["nm", "--defined-only", str(shim_path())], capture_output=True, text=True,
                             check=True).stdout
    return {fields[2] for fields in map(str.split, listing.splitlines()) if len(fields) == 3}


@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer build's compiler clones and names functions its own way")
def test_every_function_and_variable_the_layout_places_is_the_shims():
    if not shim_path().is_file():
        pytest.fail(f"build the shim first: {shim_path()} is missing")
    script = LAYOUT.read_text()
    functions = _FUNCTION.findall(script)
    variables = _VARIABLE.findall(script)
    assert len(functions) > 100 and len(variables) > 10, (len(functions), len(variables))
    symbols = shim_symbols()
    missing = [name for name in functions + variables
               if not any(fnmatch.fnmatchcase(symbol, name) for symbol in symbols)]
    assert not missing, (f"{len(missing)} name(s) in {LAYOUT.name} match nothing in the shim; run "
                         f"bench/child_layout.py again: {missing}")


@pytest.mark.skipif(bool(os.environ.get("TCPADVISE_PRELOAD_FIRST")),
                    reason="a sanitizer build lays its zeroed data out without child_layout.ld's marks")
def test_the_zeroed_datas_marks_are_its_mappings_ends():
    """process_page.h's AvoidHugePagesInZeroedData covers the mapping the loader makes of the shim's
    zeroed data, from the page after the file's data to the wiped part: no more (a range across two
    mappings would split one, one more mapping every fork copies), no less."""
    listing = subprocess.run(["nm", str(shim_path())], capture_output=True, text=True, check=True).stdout
    marks = {fields[2]: int(fields[0], 16) for fields in map(str.split, listing.splitlines())
             if len(fields) == 3 and fields[2].startswith("tcpadvise_zeroed_")}
    headers = subprocess.run(["readelf", "-lSW", str(shim_path())], capture_output=True, text=True,
                             check=True).stdout
    (writable,) = [line.split() for line in headers.splitlines()
                   if line.split()[:1] == ["LOAD"] and "RW" in line]
    file_end = int(writable[2], 16) + int(writable[4], 16)
    wiped = re.search(r"\.bss\.tcpadvise_process_page\s+NOBITS\s+([0-9a-f]+)", headers)
    page = os.sysconf("SC_PAGE_SIZE")
    assert -(-marks["tcpadvise_zeroed_start"] // page) == -(-file_end // page)
    assert wiped and marks["tcpadvise_zeroed_end"] == int(wiped[1], 16)
