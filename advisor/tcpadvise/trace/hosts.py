"""Traces of several hosts: each trace names the host it was written on (its "host" field,
uname's nodename); traces written before the shim recorded it are of host "unknown"."""

import dataclasses
from collections.abc import Iterable

from . import UNKNOWN_HOST
from .reader import Inputs


def trace_host(trace) -> str:
    """The host a trace was written on ("unknown" for traces from before the shim recorded it)."""
    return trace.data.get("host") or UNKNOWN_HOST


def split_by_host(inputs: Inputs) -> dict[str, Inputs]:
    """`inputs` as one Inputs per host, in order of first appearance."""
    hosts = dict.fromkeys(trace_host(trace) for trace in inputs.traces)
    return {host: only_hosts(inputs, [host]) for host in hosts}


def only_hosts(inputs: Inputs, hosts: Iterable[str]) -> Inputs:
    """`inputs` with only the traces written on `hosts`; a record manifest goes with the hosts that
    wrote traces beside it (a run with no trace of a host is not that host's). The loader's warnings
    (files skipped, stale or damaged traces) hold for every host."""
    wanted = set(hosts)
    traces = [trace for trace in inputs.traces if trace_host(trace) in wanted]
    directories = {trace.path.resolve().parent for trace in traces}
    manifests = [manifest for manifest in inputs.manifests if manifest.path.resolve().parent in directories]
    return dataclasses.replace(inputs, traces=traces, manifests=manifests)
