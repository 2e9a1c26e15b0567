"""`tcpadvise serve-metrics`: /metrics for a directory of traces that running processes keep rewriting.

Each scrape re-reads the directory (the shim's snapshots replace whole files,
so a scrape sees each process as of its last snapshot), at most once per
MIN_REREAD_S: scrapes in between get the last answer, and one scrape renders
at a time, so a busy scraper cannot make the server read without bound.
The answer is OpenMetrics when the scraper accepts it (Prometheus does),
else Prometheus's text format.
"""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST as OPENMETRICS_CONTENT_TYPE

from ..errors import BadInputError, NoTracesError, TcpadviseError
from ..rules.rulebook import Rulebook
from ..trace.hosts import only_hosts
from ..trace.reader import Inputs, load_inputs
from .openmetrics import OPENMETRICS, PROMETHEUS, render

MIN_REREAD_S = 1.0


def parse_listen(value: str) -> tuple[str, int]:
    """ADDR:PORT ([ADDR]:PORT for IPv6) as (address, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadInputError(f"--listen {value}: expected ADDR:PORT, e.g. 127.0.0.1:9465")
    return host.strip("[]") or "0.0.0.0", int(port)


class MetricsSource:
    """The rendered metrics of one trace directory, re-read at most once per MIN_REREAD_S."""

    def __init__(self, directory: Path, rulebook: Rulebook | None, hosts: tuple[str, ...] = ()):
        self.directory = directory
        self.rulebook = rulebook
        self.hosts = hosts
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, bytes]] = {}

    def metrics(self, text_format: str) -> bytes:
        with self._lock:
            read_at, body = self._cache.get(text_format, (0.0, b""))
            if time.monotonic() - read_at >= MIN_REREAD_S:
                body = render(self._inputs(), self.rulebook, text_format)
                self._cache[text_format] = (time.monotonic(), body)
            return body

    def _inputs(self) -> Inputs:
        try:
            inputs = load_inputs([self.directory], compact=True)  # read one socket at a time
        except NoTracesError:
            return Inputs()  # the experiment has written nothing yet: only tcpadvise_traces 0
        return only_hosts(inputs, self.hosts) if self.hosts else inputs


def serve(address: tuple[str, int], source: MetricsSource, ready=None) -> None:
    """Serve GET /metrics until interrupted; `ready(server)` is called once listening."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self._send(404, "text/plain; charset=utf-8", b"not found: the metrics are at /metrics\n")
                return
            openmetrics = "application/openmetrics-text" in self.headers.get("Accept", "")
            try:
                body = source.metrics(OPENMETRICS if openmetrics else PROMETHEUS)
            except TcpadviseError as error:
                self._send(500, "text/plain; charset=utf-8", f"tcpadvise: error: {error}\n".encode())
                return
            self._send(200, OPENMETRICS_CONTENT_TYPE if openmetrics else CONTENT_TYPE_LATEST, body)

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes every few seconds: no line each
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        daemon_threads = True

    try:
        server = Server(address, Handler)
    except OSError as error:
        raise BadInputError(f"--listen {address[0]}:{address[1]}: cannot listen ({error.strerror})") from None
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    finally:
        server.server_close()
