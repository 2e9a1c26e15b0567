"""A sampled fork child's trace as the children it stands for.

The shim writes the final trace of only some of a service's fork children of one connection (a
PostgreSQL backend's shape; TCPADVISE_CHILD_TRACES_FIRST and _EVERY): the first ones, then the last
of every N, whose trace says "represents": N, itself and the N - 1 before it that wrote none. Read
here as N copies of it folded together, as the shim folds closed connections into a group: its
counts, histograms' counts and sums and open time multiplied by N; what is not a count (a
histogram's min and max, options, tcp_info's averages and gauges, the policy's settings, its longest
hold) kept. Everything the report adds up across sockets then adds up as if every child had
written, and every ratio, mean and percentile stays the sampled child's.
"""

# _HISTOGRAM_COUNTS: what of a histogram adds up across copies; its bucket counts do too.
_HISTOGRAM_COUNTS = ("count", "sum")
# _SECTIONS: a socket's sections of counts, all of whose numbers add up (model/sockets.py sums them).
_SECTIONS = ("writes", "bursts", "turns", "reads", "errors")
# TCP_INFO_COUNTERS: tcp_info's numbers that add up over connections (the samples its averages are
# weighted by among them); the others are averages and gauges. model/metrics.py sums these.
TCP_INFO_COUNTERS = ("total_retrans", "segs_out", "data_segs_out", "busy_time_us", "rwnd_limited_us",
                     "sndbuf_limited_us", "samples")
# _POLICY_MAXIMA: the policy's counters that are a maximum, not a count.
_POLICY_MAXIMA = ("max_bytes_held", "longest_hold_ns")
# _SITE_COUNTS: a call site's (and a stack's) counts.
_SITE_COUNTS = ("writes", "bytes", "first_of_burst", "last_of_burst", "alone_in_burst", "estimated_writes",
                "estimated_bytes")
# _CALL_SITES_COUNTS: the trace's call_sites counts (its settings and memory are not).
_CALL_SITES_COUNTS = ("sampled_writes", "dropped_writes", "unwind_failures", "left_to_tree")


def represented(data: dict) -> int:
    """The processes a trace stands for: its "represents", else 1."""
    return data.get("represents", 1)


def processes(traces) -> int:
    """The processes a list of traces stands for: each (program, pid) once, as many as it represents."""
    counted: dict[tuple, int] = {}
    for trace in traces:
        key = (trace.data["program"], trace.data["pid"])
        counted[key] = max(counted.get(key, 1), represented(trace.data))
    return sum(counted.values())


def stand_for(data: dict) -> dict:
    """The trace `data` (validated) as the children it represents folded together; itself when it
    represents one."""
    times = represented(data)
    if times == 1:
        return data
    scaled = dict(data)
    scaled["sockets"] = [_socket(socket, times) for socket in data["sockets"]]
    if "call_sites" in data:
        call_sites = _counts(data["call_sites"], _CALL_SITES_COUNTS, times)
        if "stacks" in call_sites:
            call_sites["stacks"] = [_site(stack, times) for stack in call_sites["stacks"]]
        scaled["call_sites"] = call_sites
    return scaled


def _socket(socket: dict, times: int) -> dict:
    scaled = dict(socket)
    scaled["connections"] = socket["connections"] * times
    if "duration_ns" in socket:
        scaled["duration_ns"] = socket["duration_ns"] * times
    for section in _SECTIONS:
        scaled[section] = _all_counts(socket[section], times)
    if "tcp_info" in socket:
        scaled["tcp_info"] = _counts(socket["tcp_info"], TCP_INFO_COUNTERS, times)
    if "call_sites" in socket:
        scaled["call_sites"] = [_site(site, times) for site in socket["call_sites"]]
    policy = socket.get("policy")
    if policy is not None and "counters" in policy:
        counters = {key: value if key in _POLICY_MAXIMA else _all_counts(value, times)
                    for key, value in policy["counters"].items()}
        scaled["policy"] = {**policy, "counters": counters}
    return scaled


def _site(site: dict, times: int) -> dict:
    scaled = _counts(site, _SITE_COUNTS, times)
    if "sizes" in site:
        scaled["sizes"] = _all_counts(site["sizes"], times)
    return scaled


def _counts(table: dict, keys: tuple[str, ...], times: int) -> dict:
    return {key: value * times if key in keys else value for key, value in table.items()}


def _all_counts(value, times: int):
    """Every number of value times `times`, a histogram's counts and sum only; booleans kept."""
    if type(value) is dict:
        if "buckets" in value:
            scaled = _counts(value, _HISTOGRAM_COUNTS, times)
            scaled["buckets"] = [[bucket, count * times] for bucket, count in value["buckets"]]
            return scaled
        return {key: _all_counts(item, times) for key, item in value.items()}
    if type(value) in (int, float):
        return value * times
    return value
