"""Policies on the project's own burst client: each one does what
docs/policy-config.md says, the bytes arrive intact (the server answers only
complete requests), and the trace tells which rule ran and what it did."""
import subprocess

import pytest

from testlib import BUILD, client_json, load_traces, policy_env, prog, run, sockets

ROUNDS, WRITES, SIZE = 100, 15, 2
thread = pytest.mark.thread


def run_client(tmp_path, port, policy, *args, rule=None):
    """The burst client under policy (see testlib.policy_env): what it did, its one socket's trace, its run.
    Every turn recorded in full (the default samples past the 64th), so that the histograms' counts are exact."""
    env, out = policy_env(tmp_path, policy, rule)
    env["TCPADVISE_TURNS_FIRST"] = str(ROUNDS)
    result = run([prog("burst"), "client", "--port", str(port), "--rounds", str(ROUNDS), *args], env=env)
    did = client_json(result)[0]
    (sock,) = sockets(load_traces(out)[did["pid"]], "client")
    return did, sock, result


@pytest.mark.parametrize("name", ["nodelay", "cork", "coalesce"])
def test_policy_removes_the_delayed_ack_stall(tmp_path, server_factory, name):
    server = server_factory()
    did, sock, _ = run_client(tmp_path, server.port, name, rule=f"{name}-rule")
    assert did["rounds"] == ROUNDS and sock["reads"]["bytes"] == ROUNDS * 2  # every request answered
    assert sock["writes"]["calls"] == ROUNDS * WRITES  # the trace counts the application's writes
    assert sock["policy"]["rule"] == f"{name}-rule"
    # Without a policy each round waits for the 40 ms delayed ACK.
    assert did["round_us_median"] < 5000, did
    segments = sock["tcp_info"]["data_segs_out"]
    assert sock["turns"]["count"] == ROUNDS
    if name == "nodelay":
        assert segments >= ROUNDS * WRITES
        assert sock["writes"]["gap_ns"]["count"] == ROUNDS * (WRITES - 1)
    else:
        # Held writes read no clock: no gaps, and turns run from the release.
        assert sock["writes"]["gap_ns"]["count"] == 0
        # Each held burst leaves whole at its release: the read that waits for the reply, or the deadline
        # thread when the client was off its CPU longer than the delay (200 us for coalesce) before that read,
        # as a loaded machine does to some bursts (two of them failed a count of read flushes alone). Either
        # way one segment a release; most bursts are released by their read (a deadline thread that sent
        # them all would still remove the stall).
        counters = sock["policy"]["counters"]
        flushes = counters["flushes"]
        released = flushes.get("read", 0) + flushes.get("deadline", 0)
        assert released >= ROUNDS - 1 and flushes.get("read", 0) >= ROUNDS // 2, flushes
        assert segments <= sum(flushes.values()) + 5, (segments, flushes)
        # Adaptive: the first burst acts from its second write, then the
        # socket turns active (enter_bursts 1) and every burst is acted on whole.
        assert counters["adaptive"] == {"bursts_passed_single_write": 1, "bursts_held_multi_write": ROUNDS - 1,
                                        "bursts_held_from_second_write": 1, "switches": 1}
        if name == "coalesce":
            assert counters["bytes_held"] == (ROUNDS * WRITES - 1) * SIZE
            assert counters["max_bytes_held"] == WRITES * SIZE
        else:
            assert counters["corks"] == ROUNDS


def test_a_compiled_config_applies_what_its_yaml_says(tmp_path, server_factory):
    """tcpadvise record hands processes the compiled form (docs/policy-config.md): the same rule acts."""
    server = server_factory()
    policy_env(tmp_path, "cork", "cork-rule")  # writes tmp_path/policy.yaml
    compiled = tmp_path / "policy.compiled"
    with compiled.open("wb") as out:
        subprocess.run([BUILD / "preload" / "tcpadvise-config-check", "--compile", tmp_path / "policy.yaml"],
                       stdout=out, check=True)
    did, sock, result = run_client(tmp_path, server.port, compiled)
    assert "warning" not in result.stderr
    assert sock["policy"]["rule"] == "cork-rule" and sock["policy"]["settings"]["cork"]
    assert did["round_us_median"] < 5000, did
    assert sock["policy"]["counters"]["corks"] == ROUNDS


def test_observe_rule_changes_nothing_but_names_the_rule(tmp_path, server_factory):
    server = server_factory()
    did, sock, _ = run_client(tmp_path, server.port, "observe", "--rounds", "5", rule="observe-rule")
    assert did["round_us_median"] > 20000  # the stall is still there
    assert sock["policy"]["rule"] == "observe-rule"
    assert sock["policy"]["counters"]["flushes"] == {}


def test_rules_match_on_peer_port_first_match_wins(tmp_path, server_factory):
    server = server_factory()
    config = tmp_path / "rules.yaml"
    config.write_text(f"""version: 1
rules:
  - name: other-service
    match: {{peer_port: {server.port + 1}}}
    policy: nodelay
  - name: this-service
    match: {{role: client, peer: 127.0.0.0/8, peer_port: {server.port}}}
    policy: {{coalesce: {{max_bytes: 16}}, sndbuf: 32768}}
""")
    did, sock, _ = run_client(tmp_path, server.port, config)
    assert sock["policy"]["rule"] == "this-service"
    assert sock["policy"]["settings"]["coalesce"]["max_bytes"] == 16
    assert sock["policy"]["counters"]["flushes"]["limit"] >= ROUNDS  # 30-byte bursts overflow 16 bytes
    assert sock["policy"]["counters"]["max_bytes_held"] <= 16
    assert sock["options"]["sndbuf"] == 2 * 32768  # the kernel doubles SO_SNDBUF
    assert did["rounds"] == ROUNDS


def test_application_setting_wins_and_is_recorded(tmp_path, server_factory):
    server = server_factory()
    did, sock, _ = run_client(tmp_path, server.port, "{nodelay: true, cork: {}}", "--cork")
    assert sock["options_set"]["TCP_CORK"] == 0  # the client corks and uncorks each request itself
    assert sock["policy"]["counters"]["corks"] <= 1  # the policy stepped aside
    assert any("TCP_CORK" in c for c in sock["policy"]["conflicts"])
    assert did["round_us_median"] < 5000


@pytest.mark.parametrize("policy, warning", [
    pytest.param("fastest", "unknown policy 'fastest'", id="bad"),
    pytest.param(None, "cannot read the file", id="missing"),  # None: a config file that does not exist
])
def test_bad_or_missing_config_warns_once_and_observes(tmp_path, server_factory, policy, warning):
    server = server_factory()
    policy = tmp_path / "absent.yaml" if policy is None else policy
    did, sock, result = run_client(tmp_path, server.port, policy, "--rounds", "3", "--nodelay")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tcpadvise: warning:")]
    assert result.stderr.count("tcpadvise: warning:") == len(warnings) == 1, result.stderr
    assert warning in warnings[0], result.stderr
    assert "policy" not in sock
    assert did["rounds"] == 3


@thread  # the deadline thread flushes while the client sleeps
def test_coalesce_deadline_sends_without_a_read(tmp_path, server_factory):
    """A burst the program never follows with a read still leaves within the
    deadline: the server answers it, which the client then reads."""
    server = server_factory()
    # --think makes the client sleep between its last write and its read.
    did, sock, _ = run_client(tmp_path, server.port, "{coalesce: {max_delay_us: 300}}", "--rounds", "20",
                              "--think-us", "20000")
    counters = sock["policy"]["counters"]
    # Most bursts leave at the deadline, not at the read 20 ms later (a busy
    # machine may starve the deadline thread now and then).
    assert counters["flushes"].get("deadline", 0) >= 10, counters
    assert did["rounds"] == 20


@pytest.mark.parametrize("mode", [pytest.param("thread", marks=thread), "self"])
@pytest.mark.parametrize("name", ["observe", "cork", "coalesce"])
def test_cancellation_still_interrupts_a_wrapped_read(tmp_path, name, mode):
    """The deadline thread of cork and coalesce lets the shim make a
    single-threaded program's calls straight to the kernel; the program's
    own pthread_create or pthread_cancel must bring glibc's cancellation
    points back before its read blocks, or the read never returns."""
    env, _ = policy_env(tmp_path, name)
    result = run([prog("cancel"), mode], env=env, timeout=20)
    assert result.returncode == 0 and result.stdout == "cancelled\n", (result.stdout, result.stderr)


@pytest.mark.parametrize("name", ["cork", "coalesce"])
def test_main_thread_exit_ends_the_process(tmp_path, name):
    """A main thread that calls pthread_exit, with no other application
    thread left, ends the process with status 0, as without the shim: its
    deadline thread does not keep the process alive, and the trace is written."""
    env, out = policy_env(tmp_path, name)
    result = run([prog("cancel"), "exit"], env=env, timeout=20)
    assert result.returncode == 0, result.stderr
    (trace,) = load_traces(out).values()
    assert sum(s["writes"]["bytes"] for s in trace["sockets"] if s["role"] == "client") == 2


@pytest.mark.parametrize("policy, quickacks", [("{quickack: true}", True), ("{nodelay: true}", False)])
def test_quickack_is_rearmed_after_each_read_that_got_data(tmp_path, server_factory, policy, quickacks):
    """quickack: true sets TCP_QUICKACK after every read that got data (the read hook's gate is set for
    good once such a config is loaded, nothing held); a config without it never sets it. strace counts
    the setsockopt calls the client makes."""
    server = server_factory()
    env, out = policy_env(tmp_path, policy, "rule")
    log = tmp_path / "strace.txt"
    result = run(["strace", "-f", "-qq", "-e", "trace=setsockopt", "-o", str(log), prog("burst"), "client", "--port",
                  str(server.port), "--rounds", str(ROUNDS)], env=env)
    did = client_json(result)[0]
    (sock,) = sockets(load_traces(out)[did["pid"]], "client")
    assert did["rounds"] == ROUNDS and sock["reads"]["bytes"] == ROUNDS * 2
    set_quickack = [line for line in log.read_text().splitlines() if "TCP_QUICKACK, [1]" in line]
    if quickacks:
        # Every answer is read by at least one read that got data; no more than the reads made.
        assert ROUNDS <= len(set_quickack) <= sock["reads"]["calls"], (len(set_quickack), sock["reads"])
    else:
        assert set_quickack == []
