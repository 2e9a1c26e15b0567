"""Traces of several hosts: each trace names the host it was written on (its "host" field,
uname's nodename); traces written before the shim recorded it are of host "unknown"."""

from collections.abc import Iterable

from .reader import Inputs

UNKNOWN_HOST = "unknown"


def trace_host(trace) -> str:
    """The host a trace was written on ("unknown" for traces from before the shim recorded it)."""
    return trace.data.get("host") or UNKNOWN_HOST


def split_by_host(inputs: Inputs) -> dict[str, Inputs]:
    """`inputs` as one Inputs per host, in order of first appearance; a record manifest goes with the
    hosts that wrote traces beside it (a run with no trace of a host is not that host's)."""
    hosts: dict[str, Inputs] = {}
    for trace in inputs.traces:
        # The loader's warnings (files skipped, stale traces) hold for every host's report.
        hosts.setdefault(trace_host(trace), Inputs(stale=inputs.stale, warnings=inputs.warnings)).traces.append(trace)
    for part in hosts.values():
        directories = {trace.path.resolve().parent for trace in part.traces}
        part.manifests = [manifest for manifest in inputs.manifests if manifest.path.resolve().parent in directories]
    return hosts


def only_hosts(inputs: Inputs, hosts: Iterable[str]) -> Inputs:
    """`inputs` with only the traces written on `hosts`."""
    wanted = set(hosts)
    return Inputs(
        traces=[trace for trace in inputs.traces if trace_host(trace) in wanted],
        manifests=inputs.manifests,
        stale=inputs.stale,
        warnings=inputs.warnings,
    )
