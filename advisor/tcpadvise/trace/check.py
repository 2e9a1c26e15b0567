"""check finds what a schema-valid trace may still hold that the model cannot use.

The schema says which fields exist and their JSON types; it does not say that a
histogram's buckets match its encoding, that an integer fits in 64 bits or
that a tcp_info average was taken over at least one sample. A trace edited by
hand or cut short on a full disk can break any of those, and the model would
end in a traceback: problem names the first such field instead.
"""

import math

# LIMIT: the shim's counters are 64-bit; anything beyond is not from the shim.
LIMIT = 1 << 64
# MAX_SUB_BUCKETS: the shim uses 128; far more would make bucket arithmetic huge.
MAX_SUB_BUCKETS = 1 << 16


def problem(data) -> tuple[str, str] | None:
    """(where, what) of the first field the model cannot use, or None."""
    stack = [((), data)]
    while stack:
        path, value = stack.pop()
        found = _value_problem(path, value)
        if found:
            return "/".join(str(part) for part in path) or "top level", found
        if isinstance(value, dict):
            stack.extend(((*path, key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, index), item) for index, item in enumerate(value))
    return None


def _value_problem(path: tuple, value) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if -LIMIT < value < LIMIT else "number out of range (more than 64 bits)"
    if isinstance(value, float):
        return None if math.isfinite(value) and abs(value) < LIMIT else "number out of range"
    if isinstance(value, dict):
        if isinstance(value.get("buckets"), list):
            return _histogram_problem(value)
        if (
            "tcp_info" in path
            and "samples" in value
            and not (isinstance(value["samples"], int) and value["samples"] >= 1)
        ):
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
        if not all(_ints(bucket, 2) and 0 <= bucket[0] < top for bucket in buckets):
            return "indexed buckets must be [index, count] with index below the bucket of 2**64"
    elif not all(_numbers(bucket, 3) and bucket[0] <= bucket[1] for bucket in buckets):
        return "buckets must be [low, high, count] with low <= high"
    return None


def _ints(bucket, length: int) -> bool:
    return (
        isinstance(bucket, list)
        and len(bucket) == length
        and all(isinstance(part, int) and not isinstance(part, bool) for part in bucket)
    )


def _numbers(bucket, length: int) -> bool:
    return (
        isinstance(bucket, list)
        and len(bucket) == length
        and all(isinstance(part, (int, float)) and not isinstance(part, bool) for part in bucket)
    )
