import sys
from pathlib import Path

import pytest

from tcpadvise.errors import ShimNotFoundError
from tcpadvise.record.shim import SHIM_ENV, find_shim, shim_locations

from .conftest import BUILT_SHIM


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


def test_locations_cover_the_source_build_and_install_prefixes():
    locations = shim_locations()
    # The tests run against an editable install of this checkout.
    assert locations[0] == BUILT_SHIM
    assert Path(sys.prefix) / "lib" / "tcpadvise" / "libtcpadvise.so" in locations
    assert Path("/usr/local/lib/tcpadvise/libtcpadvise.so") in locations
