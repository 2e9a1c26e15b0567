"""Locate libtcpadvise.so, the shim `tcpadvise record` preloads."""

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..errors import ShimNotFoundError

SHIM_ENV = "TCPADVISE_SHIM"
SHIM_NAME = "libtcpadvise.so"

# The package's source folder is <repo>/advisor/tcpadvise when installed editable.
_SOURCE_CHECKOUT = Path(__file__).resolve().parents[3]


def shim_locations() -> list[Path]:
    """Where the shim is looked for, in order, when $TCPADVISE_SHIM is not set."""
    locations = []
    if (_SOURCE_CHECKOUT / "advisor" / "pyproject.toml").is_file():
        locations.append(_SOURCE_CHECKOUT / "build" / "preload" / SHIM_NAME)
    for prefix in (Path(sys.prefix), Path("/usr/local")):
        location = prefix / "lib" / "tcpadvise" / SHIM_NAME
        if location not in locations:
            locations.append(location)
    return locations


def find_shim(environ: Mapping[str, str] = os.environ, locations: list[Path] | None = None) -> Path:
    """The shim to preload: $TCPADVISE_SHIM if set, else the first of `locations` that exists."""
    return find_built_file(SHIM_NAME, SHIM_ENV, environ, shim_locations() if locations is None else locations,
                           ShimNotFoundError, "cmake --build build")


def find_built_file(name: str, env_var: str, environ: Mapping[str, str], locations: list[Path], error: type,
                    build_command: str) -> Path:
    """$env_var if set (it must name a file), else the first of `locations` that exists;
    else `error`, naming every place searched and how to build the file."""
    configured = environ.get(env_var)
    if configured:
        if not Path(configured).is_file():
            raise error(f"${env_var} names {configured}, which is not a file")
        return Path(configured).resolve()
    for location in locations:
        if location.is_file():
            return location
    searched = ", ".join(str(location) for location in locations)
    raise error(f"{name} not found (searched {searched}); build it with '{build_command}' or point ${env_var} at it")
