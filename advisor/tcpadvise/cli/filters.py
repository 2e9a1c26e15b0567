"""The report command's filter options (--program, --pid, --port, --peer, --role, --host, --min-severity)."""

from typing import TYPE_CHECKING

import click

from ..rules import SEVERITIES
from ..trace import UNKNOWN_HOST

if TYPE_CHECKING:
    from ..model.filters import Filters

_OPTIONS = [
    click.option(
        "--program",
        "programs",
        multiple=True,
        metavar="NAME",
        help="Only this program's sockets (repeatable).",
    ),
    click.option(
        "--pid",
        "pids",
        multiple=True,
        type=int,
        metavar="PID",
        help="Only sockets this process held (repeatable).",
    ),
    click.option(
        "--port",
        "ports",
        multiple=True,
        type=click.IntRange(1, 65535),
        metavar="PORT",
        help="Only sockets with this local, peer or service port (repeatable).",
    ),
    click.option(
        "--peer",
        "peers",
        multiple=True,
        metavar="ADDR[:PORT]",
        help="Only sockets to this peer address, or address and port ([v6]:PORT) (repeatable).",
    ),
    click.option(
        "--role",
        "roles",
        multiple=True,
        type=click.Choice(["client", "server", "unknown"]),
        help="Only sockets of this role (repeatable).",
    ),
    click.option(
        "--host",
        "hosts",
        multiple=True,
        metavar="HOST",
        help=f"Only traces written on this host (repeatable); '{UNKNOWN_HOST}' matches traces that name none.",
    ),
    click.option(
        "--min-severity",
        type=click.Choice(SEVERITIES),
        default=SEVERITIES[-1],
        show_default=True,
        help="Only findings this severe or more.",
    ),
]


def filter_options(command):
    """Adds every filter option to `command` (as programs, pids, ports, peers, roles, hosts, min_severity)."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def filters_from(options: dict) -> "Filters":
    """The Filters of the parsed options; removes them from `options`."""
    from ..model.filters import Filters

    return Filters(
        **{
            name: tuple(options.pop(name))
            for name in ("programs", "pids", "ports", "peers", "roles", "hosts")
        }
    )
