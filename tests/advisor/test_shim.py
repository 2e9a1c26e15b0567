import os
import sys
import types
from pathlib import Path

import pytest
from tcpadvise.errors import ShimNotFoundError
from tcpadvise.record.shim import (
    SHIM_ENV,
    SHIM_NAME,
    find_helper,
    find_shim,
    helper_locations,
    installations,
    pkg_config_installation,
    shim_locations,
)

from .conftest import BUILT_SHIM, REPO


def test_environment_variable_wins(tmp_path):
    shim = tmp_path / "libtcpadvise.so"
    shim.touch()
    assert find_shim({SHIM_ENV: str(shim)}, locations=[]) == shim


def test_environment_variable_naming_a_missing_file_is_an_error(tmp_path):
    with pytest.raises(ShimNotFoundError, match=SHIM_ENV):
        find_shim({SHIM_ENV: str(tmp_path / "missing.so")})


def test_first_existing_location_is_used(tmp_path):
    first, second = tmp_path / "a" / "libtcpadvise.so", tmp_path / "b" / "libtcpadvise.so"
    second.parent.mkdir()
    second.touch()
    assert find_shim({}, locations=[first, second]) == second


def test_not_found_names_every_place_searched(tmp_path):
    places = [tmp_path / "one.so", tmp_path / "two.so"]
    with pytest.raises(ShimNotFoundError) as raised:
        find_shim({}, locations=places)
    assert str(places[0]) in str(raised.value) and str(places[1]) in str(raised.value)
    assert raised.value.exit_code == 125


def test_locations_are_the_recorded_install_then_pkg_config_then_the_build_tree(tmp_path, monkeypatch):
    # The tests run against an editable install of this checkout: nothing recorded, and
    # pkg-config pointed at a prefix of our own.
    prefix = tmp_path / "prefix"
    write_pc(prefix)
    environ = {"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig"), "PATH": os.environ["PATH"]}
    assert [i.origin for i in installations(environ)] == ["pkg-config", "build tree"]
    assert shim_locations(environ) == [prefix / "lib" / "tcpadvise" / SHIM_NAME, BUILT_SHIM]

    recorded = types.ModuleType("tcpadvise._paths")
    recorded.SHIM, recorded.LIBEXEC = "/opt/t/lib/tcpadvise/libtcpadvise.so", "/opt/t/libexec/tcpadvise"
    monkeypatch.setitem(sys.modules, "tcpadvise._paths", recorded)
    assert shim_locations(environ)[0] == Path(recorded.SHIM)
    assert helper_locations("tcpadvise-loadgen", environ) == [
        Path("/opt/t/libexec/tcpadvise/tcpadvise-loadgen"),
        prefix / "libexec" / "tcpadvise" / "tcpadvise-loadgen",
        BUILT_SHIM.parents[1] / "programs" / "tcpadvise-loadgen",
        BUILT_SHIM.parent / "tcpadvise-loadgen",
    ]


def test_without_pkg_config_knowing_tcpadvise_the_build_tree_is_searched(tmp_path):
    environ = {"PKG_CONFIG_PATH": str(tmp_path), "PKG_CONFIG_LIBDIR": str(tmp_path), "PATH": os.environ["PATH"]}
    assert pkg_config_installation(environ) is None
    assert pkg_config_installation({"PATH": str(tmp_path)}) is None  # no pkg-config at all
    assert shim_locations(environ) == [BUILT_SHIM]


def test_a_helper_is_looked_for_beside_an_explicit_shim_first(tmp_path):
    shim = tmp_path / "build" / "preload" / SHIM_NAME
    shim.parent.mkdir(parents=True)
    shim.touch()
    environ = {SHIM_ENV: str(shim), "PKG_CONFIG_LIBDIR": str(tmp_path), "PATH": os.environ["PATH"]}
    assert helper_locations("burst", environ)[:2] == [shim.parent / "burst", tmp_path / "build" / "programs" / "burst"]
    with pytest.raises(ShimNotFoundError) as raised:
        find_helper("nothing-of-ours", None, environ, ShimNotFoundError)
    assert str(tmp_path / "build" / "programs" / "nothing-of-ours") in str(raised.value)
    assert "PKG_CONFIG_PATH" in str(raised.value)


def write_pc(prefix):
    """A pkg-config file as `cmake --install` writes it (packaging/tcpadvise.pc.in)."""
    (prefix / "lib" / "pkgconfig").mkdir(parents=True)
    template = (REPO / "packaging" / "tcpadvise.pc.in").read_text()
    for name, value in {"prefix": prefix, "libdir": prefix / "lib" / "tcpadvise",
                        "libexecdir": prefix / "libexec" / "tcpadvise", "version": "0.1.0"}.items():
        template = template.replace(f"@{name}@", str(value))
    (prefix / "lib" / "pkgconfig" / "tcpadvise.pc").write_text(template)
