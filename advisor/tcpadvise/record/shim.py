"""Locate libtcpadvise.so, the shim `tcpadvise record` preloads, and the helper
programs installed with it (tcpadvise-loadgen, tcpadvise-config-check, burst).

They are looked for in these installations, in order:

1. the one recorded when this package was installed: `TCPADVISE_PREFIX=PREFIX
   pip install advisor` writes the paths of PREFIX/share/tcpadvise/install.json
   (written by `cmake --install`) into the package as tcpadvise/_paths.py;
2. the one pkg-config knows (`pkg-config --variable=shim tcpadvise`; set
   PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix of your own);
3. the build tree of the source checkout this package runs from: the shim in
   build/preload, the helpers in build/programs and build/preload.

$TCPADVISE_SHIM names the shim instead; its helpers are then looked for beside
it first (and in <build>/programs for a shim in <build>/preload).
"""

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ShimNotFoundError

SHIM_ENV = "TCPADVISE_SHIM"
SHIM_NAME = "libtcpadvise.so"
PKG_CONFIG_MODULE = "tcpadvise"

# The package's source folder is <repo>/advisor/tcpadvise when installed editable.
_SOURCE_CHECKOUT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Installation:
    """Where one installation (or build tree) keeps the shim and the helper programs."""

    origin: str
    shim: Path
    helper_dirs: tuple[Path, ...]


def recorded_installation() -> Installation | None:
    """The installation recorded in the package when it was installed, if any."""
    try:
        from .. import _paths  # written by setup.py at install time; absent in a checkout
    except ImportError:
        return None
    return Installation("recorded at install", Path(_paths.SHIM), (Path(_paths.LIBEXEC),))


def pkg_config_installation(environ: Mapping[str, str] = os.environ) -> Installation | None:
    """The installation pkg-config finds (tcpadvise.pc), if pkg-config runs and knows one."""
    variables = {}
    for variable in ("shim", "libexecdir"):
        try:
            result = subprocess.run(
                ["pkg-config", f"--variable={variable}", PKG_CONFIG_MODULE],
                capture_output=True, text=True, env=dict(environ), timeout=10, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if result.returncode != 0 or not result.stdout.strip():
            return None
        variables[variable] = Path(result.stdout.strip())
    return Installation("pkg-config", variables["shim"], (variables["libexecdir"],))


def build_tree_installation() -> Installation | None:
    """build/ of the source checkout this package runs from, if it runs from one."""
    if not (_SOURCE_CHECKOUT / "advisor" / "pyproject.toml").is_file():
        return None
    build = _SOURCE_CHECKOUT / "build"
    return Installation("build tree", build / "preload" / SHIM_NAME, (build / "programs", build / "preload"))


def installations(environ: Mapping[str, str] = os.environ) -> list[Installation]:
    """Every installation to search, in order (see the module's doc)."""
    found = [recorded_installation(), pkg_config_installation(environ), build_tree_installation()]
    return [installation for installation in found if installation is not None]


def shim_locations(environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where the shim is looked for, in order, when $TCPADVISE_SHIM is not set."""
    return _unique(installation.shim for installation in installations(environ))


def helper_locations(name: str, environ: Mapping[str, str] = os.environ) -> list[Path]:
    """Where a helper program is looked for, in order: beside $TCPADVISE_SHIM if set,
    then in each installation's helper directories."""
    directories = []
    if environ.get(SHIM_ENV):
        beside = Path(environ[SHIM_ENV]).resolve().parent
        directories.append(beside)
        if beside.name == "preload":
            directories.append(beside.parent / "programs")
    for installation in installations(environ):
        directories.extend(installation.helper_dirs)
    return _unique(directory / name for directory in directories)


def find_shim(environ: Mapping[str, str] = os.environ, locations: list[Path] | None = None) -> Path:
    """The shim to preload: $TCPADVISE_SHIM if set, else the first of `locations` that exists."""
    return find_built_file(SHIM_NAME, SHIM_ENV, environ, shim_locations(environ) if locations is None else locations,
                           ShimNotFoundError, "cmake --build build")


def find_helper(name: str, env_var: str | None, environ: Mapping[str, str], error: type) -> Path:
    """A helper program: $env_var if given and set, else the first of helper_locations."""
    return find_built_file(name, env_var, environ, helper_locations(name, environ), error,
                           f"cmake --build build --target {name}")


def find_built_file(name: str, env_var: str | None, environ: Mapping[str, str], locations: list[Path],
                    error: type, build_command: str) -> Path:
    """$env_var if set (it must name a file), else the first of `locations` that exists;
    else `error`, naming every place searched and how to build or find the file."""
    configured = environ.get(env_var) if env_var else None
    if configured:
        if not Path(configured).is_file():
            raise error(f"${env_var} names {configured}, which is not a file")
        return Path(configured).resolve()
    for location in locations:
        if location.is_file():
            return location
    searched = ", ".join(str(location) for location in locations) or "no installation found"
    override = f" or point ${env_var} at it" if env_var else ""
    raise error(
        f"{name} not found (searched {searched}); build it with '{build_command}', install tcpadvise "
        f"(README, Installing; PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix of your own){override}"
    )


def _unique(paths) -> list[Path]:
    unique = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


# Variables of ours or of a preload that must not leak into a process meant to run without the shim.
_ISOLATED_PREFIXES = ("LD_PRELOAD", "TCPADVISE_")


def isolated_environment() -> dict[str, str]:
    """This environment without any preload or TCPADVISE_ setting (`ip netns exec` passes it on)."""
    return {key: value for key, value in os.environ.items() if not key.startswith(_ISOLATED_PREFIXES)}


def shim_environment(base: Mapping[str, str], shim: Path, out_dir: Path, interval: float) -> dict[str, str]:
    """`base` with the shim prepended to LD_PRELOAD and its TCPADVISE_* settings."""
    environment = dict(base)
    existing = environment.get("LD_PRELOAD")
    environment["LD_PRELOAD"] = f"{shim}:{existing}" if existing else str(shim)
    environment["TCPADVISE_OUT"] = str(out_dir)
    environment["TCPADVISE_INTERVAL"] = f"{interval:g}"
    return environment
