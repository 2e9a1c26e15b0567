"""fork_echo: bench/fork_echo.c as a server of the bench framework, for bench/cpu_per_request.py
(`--server fork-echo`): a fork-per-connection server (a PostgreSQL postmaster's shape: poll, accept, fork,
a child that answers 3 requests and exits) whose own work a connection is a fork, an exit and 3 round trips,
so that what the shim adds a connection (its mappings at fork and exit, the child's page faults and system
calls, its trace) is measured in microseconds against some 100-200, not against PostgreSQL's 3 ms.

The programs are the build's (build/bench/fork_echo; TCPADVISE_BUILD names another build directory).
"""

import os
import re
from pathlib import Path

from tcpadvise.bench.servers import Server

_BUILD = Path(os.environ.get("TCPADVISE_BUILD", Path(__file__).resolve().parent.parent / "build"))


class ForkEcho(Server):
    name = "fork-echo"
    title = "fork_echo: a fork per connection, 3 round trips of 64 bytes each"
    programs = ()
    _CONNECTIONS = re.compile(r"^connections (\d+) in ([0-9.]+) s$", re.MULTILINE)

    @property
    def program(self) -> Path:
        return _BUILD / "bench" / "fork_echo"

    def missing(self):
        return None if os.access(self.program, os.X_OK) else f"not built: {self.program} (cmake --build build)"

    def command(self, directory, port):
        return [str(self.program), "serve", str(port)]

    def client(self, port, seconds):
        return [str(self.program), "load", str(port), f"{seconds:g}"]

    def warmup(self, port):
        # Some hundred connections: past the first 16 children, which sample (Server.warmup).
        return [str(self.program), "load", str(port), "0.5"]

    def rate(self, output):
        found = self._CONNECTIONS.search(output)
        return int(found[1]) / float(found[2]) if found and float(found[2]) > 0 else None

    def requests(self, output, command):
        found = self._CONNECTIONS.search(output)
        return int(found[1]) if found else None
