"""tcpadvise diff on generated traces: groups as the report scopes them (a stream
apart from an exchange to the same peer), groups on one side only, and an
unchanged recording showing no significant change."""
import json

from testlib import invoke

from .conftest import make_socket, make_trace, write_trace

STREAM_READS = {"calls": 0, "bytes": 0, "by_api": {}, "size": {"unit": "bytes", "count": 0, "sum": 0, "min": 0,
                                                               "max": 0, "buckets": []}, "eof": 0}


def diff(before, after):
    result = invoke("diff", "--format", "json", before, after)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_stream_and_an_exchange_to_one_peer_are_two_groups(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    after.mkdir()
    exchange = make_socket(cookie=1)
    stream = make_socket(cookie=2, reads=STREAM_READS, local={"addr": "127.0.0.1", "port": 40001})
    write_trace(before, make_trace(sockets=[exchange, stream]))
    write_trace(after, make_trace(sockets=[exchange]))
    document = diff(before, after)
    (group,) = document["groups"]
    assert (group["peer_port"], group["stream"]) == (6379, False)
    assert [(g["peer_port"], g["stream"]) for g in document["only_before"]] == [(6379, True)]
    assert document["only_after"] == []
    for key in ("turn_p50_us", "turn_p99_us", "writes_per_burst_p50"):
        assert group[key]["change"] == 0 and not group[key]["significant"], group[key]
