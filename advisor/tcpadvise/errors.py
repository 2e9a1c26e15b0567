"""The one error hierarchy of tcpadvise.

Every failure the user can cause or fix is a TcpadviseError. The CLI catches
it once, prints ``tcpadvise: error: <message>`` on one line and exits with the
error's exit_code; anything else escaping is a bug and keeps its traceback.
"""


class TcpadviseError(Exception):
    """Base of every expected failure; the message is one line for the user."""

    exit_code = 1


class BadInputError(TcpadviseError):
    """The traces or paths given cannot be used."""

    exit_code = 2


class MissingPathError(BadInputError):
    """A path given does not exist."""


class NoTracesError(BadInputError):
    """No path was given, or the paths hold no trace nor record manifest."""


class NotJsonError(BadInputError):
    """A file is not JSON."""


class NotATraceError(BadInputError):
    """A JSON file is not a tcpadvise trace or record manifest."""


class UnknownSchemaError(BadInputError):
    """A tcpadvise file of a schema version this advisor does not know."""


class InvalidTraceError(BadInputError):
    """A tcpadvise file that fails validation against its schema."""


class FileProblemsError(BadInputError):
    """A file with mistakes, each one line "FILE:LINE:COLUMN: message"."""

    # After the first mistake, how many others there are and the command that lists them all.
    more = ""

    @classmethod
    def from_problems(cls, problems: list[str], file: str = "FILE") -> "FileProblemsError":
        """The error for every mistake in `file`: one line, the first of them and `more`."""
        others = len(problems) - 1
        return cls(problems[0] + (cls.more.format(count=others, file=file) if others else ""))


class ConfigError(FileProblemsError):
    """A policy config (or --policy value) the shim would not accept."""

    more = " (and {count} more; see tcpadvise config check {file})"


class RulesError(FileProblemsError):
    """A rule file cannot be read or breaks the rule format."""

    more = " ({count} more; 'tcpadvise rules check FILE' lists them)"


class BadCalibrationError(BadInputError):
    """A calibration file (report --calibration) cannot be read or is invalid."""


class PolicyWriteError(TcpadviseError):
    """report --emit-policy cannot write its file."""


class OutputWriteError(TcpadviseError):
    """report -o or bench --html cannot write its file."""


class RecordError(TcpadviseError):
    """tcpadvise record could not set up or save a run.

    125, as env(1) and timeout(1) use, so that the tool's own failure is told
    apart from the exit status of the command it passes through.
    """

    exit_code = 125


class ShimNotFoundError(RecordError):
    """libtcpadvise.so is in none of the places searched."""


class CommandNotExecutableError(TcpadviseError):
    """The command exists but cannot be run (126, as a shell says)."""

    exit_code = 126


class CommandNotFoundError(TcpadviseError):
    """The command is not a file nor found on PATH (127, as a shell says)."""

    exit_code = 127


class BenchError(TcpadviseError):
    """tcpadvise bench could not build its path, start its load generator or finish an experiment."""


class LinkNeedsRootError(BenchError):
    """--link was asked for without root, which namespaces and qdiscs need."""

    exit_code = 2


class LoadgenNotFoundError(BenchError):
    """tcpadvise-loadgen is in none of the places searched."""
