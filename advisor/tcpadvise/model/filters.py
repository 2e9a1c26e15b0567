"""Filters narrow a report to the sockets asked for (report --program, --pid, --port, --peer, --role, --host)
and its findings to a least severity (--min-severity).

Each option may be given several times: a socket item is kept when it matches
one of the values of every option given. Sockets are filtered before the
rulebook runs, so the findings, their evidence and their socket indexes are of
the sockets kept.
"""

from dataclasses import dataclass

from ..trace.hosts import only_hosts
from ..trace.reader import Inputs


@dataclass(frozen=True)
class Filters:
    """The values of each filter option; an empty tuple keeps everything."""

    programs: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    ports: tuple[int, ...] = ()
    peers: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()

    def keeps(self, item: dict) -> bool:
        """Whether a report socket item matches every filter given."""
        return (
            (not self.programs or item["program"] in self.programs)
            and (not self.pids or any(pid in self.pids for pid in item.get("pids") or [item["pid"]]))
            and (not self.ports or bool(self.ports_of(item) & set(self.ports)))
            and (not self.peers or any(_peer_matches(peer, item.get("peer")) for peer in self.peers))
            and (not self.roles or item.get("role") in self.roles)
        )

    @staticmethod
    def ports_of(item: dict) -> set:
        ends = [item.get("local") or {}, item.get("peer") or {}]
        return {port for port in (*(end.get("port") for end in ends), item.get("service_port")) if port}


def filter_inputs(inputs: Inputs, filters: Filters) -> Inputs:
    """`inputs` with only the traces of the hosts asked for (a trace without a host is of "unknown")."""
    return only_hosts(inputs, filters.hosts) if filters.hosts else inputs


def at_least(findings: list[dict], severity: str, severities: tuple[str, ...]) -> list[dict]:
    """The findings of `severity` or more severe (severities runs from most to least severe)."""
    limit = severities.index(severity)
    return [finding for finding in findings if severities.index(finding["severity"]) <= limit]


def _peer_matches(wanted: str, peer: dict | None) -> bool:
    """ADDR matches the peer's address; ADDR:PORT or [ADDR]:PORT its address and port."""
    if not peer:
        return False
    addr, port = str(peer.get("addr", "")), peer.get("port")
    if wanted == addr or wanted.strip("[]") == addr:
        return True
    host, sep, wanted_port = wanted.rpartition(":")
    return bool(sep) and host.strip("[]") == addr and wanted_port.isdigit() and int(wanted_port) == port
