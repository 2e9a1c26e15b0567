"""check finds what a schema-valid trace may still hold that the model cannot use.

The schema says which fields exist and their JSON types; it does not say that a
histogram's buckets match its encoding, that an integer fits in 64 bits or
that a tcp_info average was taken over at least one sample. A trace edited by
hand or cut short on a full disk can break any of those, and the model would
end in a traceback: problem names the first such field instead.
"""

import math
import operator
from itertools import chain

# LIMIT: the shim's counters are 64-bit; anything beyond is not from the shim.
LIMIT = 1 << 64
# MAX_SUB_BUCKETS: the shim uses 128; far more would make bucket arithmetic huge.
MAX_SUB_BUCKETS = 1 << 16


def problem(data) -> tuple[str, str] | None:
    """(where, what) of the first field the model cannot use, or None.

    A histogram's buckets are checked as a whole, in C (_columns, min, max), and a path is spelled
    out only for the field reported: a 100 MB trace in 3 s, where visiting each of its 13 million
    values with its path took 10.
    """
    # Each entry: (its path as a linked (parent, key) pair, a container); the path is spelled out
    # only for the field that is reported, and numbers are checked where they are met.
    if type(data) is not dict and type(data) is not list:
        found = _number_problem(data)
        return ("top level", found) if found else None
    stack = [(None, data)]
    while stack:
        where, value = stack.pop()
        if type(value) is dict:
            if type(value.get("buckets")) is list:
                found, skipped = _histogram_problem(value), "buckets"
            else:
                found, skipped = _samples_problem(where, value) if "samples" in value else None, None
            if found:
                return _spelled(where), found
            children = value.items()
        else:
            skipped, children = None, enumerate(value)
        for key, item in children:
            kind = type(item)
            if kind is dict or kind is list:
                if key != skipped:
                    stack.append(((where, key), item))
            elif kind is int:
                if not -LIMIT < item < LIMIT:
                    return _spelled((where, key)), _number_problem(item)
            elif kind is float and not abs(item) < LIMIT:  # an infinity is not below it either
                return _spelled((where, key)), _number_problem(item)
    return None


def _spelled(where) -> str:
    parts = []
    while where is not None:
        where, key = where
        parts.append(str(key))
    return "/".join(reversed(parts)) or "top level"


def _in_tcp_info(where) -> bool:
    while where is not None:
        where, key = where
        if key == "tcp_info":
            return True
    return False


def _number_problem(value) -> str | None:
    if type(value) is int:
        return None if -LIMIT < value < LIMIT else "number out of range (more than 64 bits)"
    if type(value) is float:
        return None if math.isfinite(value) and abs(value) < LIMIT else "number out of range"
    return None


def _samples_problem(where, value: dict) -> str | None:
    if _in_tcp_info(where) and not (type(value["samples"]) is int and value["samples"] >= 1):
        return "samples must be at least 1"
    return None


def _histogram_problem(histogram: dict) -> str | None:
    buckets = histogram["buckets"]
    if "scale" in histogram:
        sub_buckets, scale = histogram.get("sub_buckets"), histogram["scale"]
        if not (isinstance(sub_buckets, int) and 1 <= sub_buckets <= MAX_SUB_BUCKETS):
            return f"sub_buckets must be 1..{MAX_SUB_BUCKETS}"
        if sub_buckets & (sub_buckets - 1):
            return "sub_buckets must be a power of two"
        if not (isinstance(scale, (int, float)) and not isinstance(scale, bool) and 0 < scale < LIMIT):
            return "scale must be a positive number"
        top = 66 * sub_buckets  # past the bucket of 2**64
        columns = _columns(buckets, 2, {int})
        if columns is None or (buckets and not (min(columns[0]) >= 0 and max(columns[0]) < top)):
            return "indexed buckets must be [index, count] with index below the bucket of 2**64"
    else:
        columns = _columns(buckets, 3, {int, float})
        if columns is None or not all(map(operator.le, columns[0], columns[1])):
            return "buckets must be [low, high, count] with low <= high"
    if not all(map(_within, columns)):
        return "number out of range (more than 64 bits)"
    return None


def _within(values: list) -> bool:
    """Whether every value lies strictly between -2**64 and 2**64 (an infinity does not)."""
    return not values or (-LIMIT < min(values) and max(values) < LIMIT)


def _columns(buckets: list, length: int, types: set[type]) -> list[list] | None:
    """The buckets' values column by column, or None unless every bucket is a list of `length` values
    of `types` (bool is not int here). The loops run in C (map, set, chain, slices): a 100 MB trace
    holds millions of buckets."""
    if not (set(map(type, buckets)) <= {list} and set(map(len, buckets)) <= {length}):
        return None
    values = list(chain.from_iterable(buckets))
    if not set(map(type, values)) <= types:
        return None
    return [values[column::length] for column in range(length)]
