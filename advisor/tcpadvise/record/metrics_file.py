"""`record --metrics-file`: a node_exporter textfile-collector file kept up to date during a run.

The file is rewritten whole (safefile: a new 0600 file under an unguessable
hidden name in the same directory, then renamed over it), so the collector
never reads half of it. The textfile collector reads Prometheus's text
format 0.0.4, not OpenMetrics, and only files named *.prom.
"""

from collections.abc import Callable
from pathlib import Path

from ..errors import TcpadviseError
from ..render.openmetrics import PROMETHEUS, render
from ..safefile import write_atomically
from ..trace.reader import Inputs, load_inputs


class MetricsFile:
    """Writes the metrics of the traces in `out_dir` to `path`; `warn` gets the first failure only."""

    def __init__(self, path: Path, out_dir: Path, warn: Callable[[str], None]):
        self.path = path
        self.out_dir = out_dir
        self.warn = warn
        self.warned = False

    def write(self) -> None:
        try:
            try:
                inputs = load_inputs([self.out_dir], compact=True)  # read one socket at a time
            except TcpadviseError:
                inputs = Inputs()  # nothing written yet (or a file mid-rename): tcpadvise_traces 0
            write_atomically(self.path, render(inputs, None, PROMETHEUS).decode())
        except OSError as error:
            if not self.warned:
                self.warn(f"{self.path}: cannot write the metrics file ({error.strerror}); the run goes on")
                self.warned = True
