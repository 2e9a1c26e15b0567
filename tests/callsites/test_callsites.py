"""Call sites: the report names the code that writes, from stacks the shim
samples with libunwind and the CLI symbolises. Real programs compiled here
(C with -g -O1, the same stripped, C++, a dlopen'ed library, a static
binary) and a Python client talk to a server in this process."""
import json
import pathlib
import shutil
import socket
import subprocess
import sys
import threading

import pytest
from testlib import invoke, load_traces, run, shim_env

from tcpadvise.symbols.symbolize import Symbolizer

HERE = pathlib.Path(__file__).resolve().parent
# Each request is 40 bytes (an 8-byte header and a 32-byte body) answered by
# one byte; with Nagle on each takes a delayed ACK (~40 ms): few requests.
REQUESTS = 20


@pytest.fixture
def port():
    """A server answering one byte per 40 received, on as many connections as come."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    stop = threading.Event()

    def answer(conn):
        with conn:
            conn.settimeout(30)
            pending = 0
            while data := conn.recv(4096):
                pending += len(data)
                while pending >= 40:
                    pending -= 40
                    conn.sendall(b"r")

    def serve():
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    listener.close()


def build(compiler, output, *args):
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} is not installed")
    subprocess.run([compiler, *args, "-o", str(output)], check=True, capture_output=True, timeout=120)
    return str(output)


def line_of(source, marker):
    return next(n for n, text in enumerate((HERE / source).read_text().splitlines(), 1) if marker in text)


def record_report(tmp_path, cmd, mode="all"):
    """Runs cmd under the shim with call sites `mode`; the JSON report and the text one."""
    out = tmp_path / "traces"
    out.mkdir()
    result = run(cmd, env=shim_env(out, TCPADVISE_CALL_SITES=mode), timeout=60)
    assert result.returncode == 0, result.stderr
    assert load_traces(out), "no trace written"  # validated against the schema
    report = invoke("report", "--format", "json", out)
    assert report.exit_code == 0, report.output
    text = invoke("report", out)
    assert text.exit_code == 0, text.output
    return json.loads(report.stdout), text.stdout


def client_sites(report):
    clients = [s for s in report["sockets"] if s["role"] == "client"]
    assert len(clients) == 1, report["sockets"]
    return clients[0]["call_sites"]


def test_c_client_names_both_writers_with_lines_and_counts(tmp_path, port):
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    report, text = record_report(tmp_path, [client, str(port), str(REQUESTS)])
    sites = {site["function"]: site for site in client_sites(report)}
    header, body = sites["write_header"], sites["write_body"]
    assert pathlib.Path(header["file"]).name == "client.c" and header["line"] == line_of("client.c", "header-write")
    assert pathlib.Path(body["file"]).name == "client.c" and body["line"] == line_of("client.c", "body-write")
    assert (header["writes"], header["bytes"], header["first_of_burst"]) == (REQUESTS, 8 * REQUESTS, REQUESTS)
    assert (body["writes"], body["bytes"], body["first_of_burst"]) == (REQUESTS, 32 * REQUESTS, 0)
    # The whole stack: (libasan's interceptor under ASan,) write_header, main.
    functions = [frame["function"] for frame in header["stack"]]
    assert header["module"] == client and functions.index("write_header") < functions.index("main")
    # The finding about the small writes names both, and says where to change the code.
    nagle = [f for f in report["findings"] if {"write_header", "write_body"} <= {s["function"] for s in f["call_sites"]}]
    assert nagle, report["findings"]
    assert f"client.c:{header['line']}" in nagle[0]["recommendation"]["code"]
    assert f"write_header (client.c:{header['line']})" in text and f"write_body (client.c:{body['line']})" in text
    # Per stack: the sizes written and where in the burst (the last body ends no burst: the client closes).
    assert (header["sizes"]["min"], header["sizes"]["max"], header["sizes"]["count"]) == (8, 8, REQUESTS)
    assert (body["sizes"]["min"], body["sizes"]["max"]) == (32, 32)
    assert header["burst_position"] == {"first": 1.0, "middle": 0.0, "last": 0.0, "alone": 0.0}
    assert body["burst_position"]["last"] == round((REQUESTS - 1) / REQUESTS, 3) and body["burst_position"]["first"] == 0
    assert f"write_header (client.c:{header['line']}): {REQUESTS} writes of 8 B (1 per burst), first of burst" in text
    assert f"write_body (client.c:{body['line']}): {REQUESTS} writes of 32 B (1 per burst), last of burst" in text


def test_sampling_names_the_writers_and_scales_counts(tmp_path, port):
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    report, _ = record_report(tmp_path, [client, str(port), str(REQUESTS)], mode="sample")
    sites = client_sites(report)
    assert {site["function"] for site in sites} == {"write_header", "write_body"}
    # The first 4 writes of 40 sampled (header, body, header, body), then about one in 1024: scaled to the socket's 40.
    assert sum(site["sampled_writes"] for site in sites) < 2 * REQUESTS
    assert sum(site["writes"] for site in sites) == 2 * REQUESTS


def test_sampling_defaults_stay_within_their_cost(tmp_path, port):
    """Unset, sampling takes a socket's first 4 writes, then one in 1024 (16.6k instructions an unwind
    of nginx's writev: 16 a request), within 500 unwinds a second; the trace says so."""
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    out = tmp_path / "traces"
    out.mkdir()
    result = run([client, str(port), str(REQUESTS)], env=shim_env(out), timeout=60)
    assert result.returncode == 0, result.stderr
    (trace,) = load_traces(out).values()
    sites = trace["call_sites"]
    assert (sites["mode"], sites["first"], sites["every"], sites["budget_per_second"]) == ("sample", 4, 1024, 500)
    # 40 writes: the first 4, and no more than the one in 1024 the scramble may pick.
    assert 4 <= sites["sampled_writes"] <= 5, sites


@pytest.mark.parametrize("mode", ["sample", "all"])
def test_program_that_closes_every_fd_keeps_its_bytes(tmp_path, mode):
    """closefrom(3), then sockets on the lowest numbers, in rounds: numbers
    libunwind's own pipe had in 1.6.2. With sampling on (the default) every
    byte arrives intact, nothing extra, no hang (SO_RCVTIMEO 10 s, timeout)."""
    program = build("gcc", tmp_path / "fdreuse", "-g", "-O1", str(HERE / "fdreuse.c"))
    out = tmp_path / "traces"
    out.mkdir()
    env = shim_env(out)
    if mode == "all":
        env["TCPADVISE_CALL_SITES"] = mode
    else:
        env.pop("TCPADVISE_CALL_SITES", None)  # the default
    result = run([program, "3", "200"], env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "3 rounds of 200 messages intact" in result.stdout
    (trace,) = load_traces(out).values()
    info = trace["call_sites"]
    assert info["mode"] == mode and info["sampled_writes"] > 0 and info["unwind_failures"] == 0
    report = invoke("report", "--format", "json", out)
    assert report.exit_code == 0, report.output
    functions = {site["function"] for s in json.loads(report.stdout)["sockets"] for site in s.get("call_sites", [])}
    assert {"send_message", "send_answer"} <= functions, functions


def test_unwinding_changes_no_signal_mask(tmp_path, port):
    """libunwind 1.6.2 blocks every signal around each frame it steps (two sigprocmask calls a
    frame). The shim answers those calls itself and blocks nothing around an unwind: a mask's
    system call in the program's thread makes the kernel hand that thread a signal pending for
    the process, which it had meant for another (a Python program whose main thread waits on a
    lock for SIGINT then waits for ever). Every write unwound, the client makes as many
    rt_sigprocmask calls as with call sites off but the two around the one load of libunwind, at
    its first sample (the session 12 shim: two more a sample, 90 against 6)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    calls = {}
    for mode in ("off", "all"):
        out = tmp_path / mode
        out.mkdir()
        counts = tmp_path / f"strace-{mode}.txt"
        result = run(["strace", "-f", "-c", "-o", str(counts), "-e", "trace=rt_sigprocmask", client, str(port),
                      str(REQUESTS)], env=shim_env(out, TCPADVISE_CALL_SITES=mode), timeout=60)
        assert result.returncode == 0, result.stderr
        (trace,) = load_traces(out).values()
        if mode == "all":
            assert trace["call_sites"]["sampled_writes"] == 2 * REQUESTS
            assert trace["call_sites"]["unwind_failures"] == 0
        rows = [line.split() for line in counts.read_text().splitlines() if line.rstrip().endswith("rt_sigprocmask")]
        calls[mode] = int(rows[0][3]) if rows else 0
    assert calls["all"] <= calls["off"] + 2, calls


def test_sampling_slows_down_past_its_budget_and_scales_honestly(tmp_path):
    """One write in 2 asked for, thousands of writes a second: the shim doubles the interval
    (more than 2000 samples a second) and each sample counts for the writes of its rate."""
    program = build("gcc", tmp_path / "fdreuse", "-g", "-O1", str(HERE / "fdreuse.c"))
    out = tmp_path / "traces"
    out.mkdir()
    env = shim_env(out, TCPADVISE_CALL_SITES="sample", TCPADVISE_CALL_SITES_EVERY="2")
    result = run([program, "2", "3000"], env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    (trace,) = load_traces(out).values()
    info = trace["call_sites"]
    assert info["slowdowns"] >= 1 and info["every_max"] > 2, info
    assert info["sampled_writes"] < 12000 / 2
    report = json.loads(invoke("report", "--format", "json", out).stdout)
    writers = [s for s in report["sockets"] if s.get("call_sites")]
    assert len(writers) >= 2  # each round's client and server side
    for s in writers:
        assert abs(sum(site["writes"] for site in s["call_sites"]) - s["writes"]["calls"]) <= len(s["call_sites"])


def test_stripped_binary_gives_module_offset_and_build_id(tmp_path, port):
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    stripped = tmp_path / "client-stripped"
    subprocess.run(["strip", "--strip-all", "-o", str(stripped), client], check=True, timeout=60)
    report, text = record_report(tmp_path, [str(stripped), str(port), str(REQUESTS)])
    sites = client_sites(report)
    assert len(sites) == 2 and all(site["writes"] == REQUESTS for site in sites)
    build_id = subprocess.run(["readelf", "-n", str(stripped)], capture_output=True, text=True).stdout
    for site in sites:
        assert site["function"] is None and site["file"] is None and site["module"] == str(stripped)
        assert site["build_id"] and f"Build ID: {site['build_id']}" in build_id
        assert f"client-stripped+{site['offset']:#x}" in text
    # Offline, the unstripped build (same code, same offsets) names them.
    named = {Symbolizer().resolve({"path": client}, site["offset"])["function"] for site in sites}
    assert named == {"write_header", "write_body"}


def test_inlined_function_is_named_with_the_one_it_was_inlined_into(tmp_path, port):
    if shutil.which("addr2line") is None:
        pytest.skip("addr2line (binutils) is not installed: inlined frames need it")
    client = build("gcc", tmp_path / "inlined", "-g", "-O2", str(HERE / "inlined.c"))
    report, _ = record_report(tmp_path, [client, str(port), str(REQUESTS)])
    (site,) = client_sites(report)
    assert (site["function"], site["line"]) == ("put_frame", line_of("inlined.c", "inlined-write"))
    frame = next(f for f in site["stack"] if f["function"] == "put_frame")
    assert frame["inlined_by"][0]["function"] == "send_request"
    assert frame["inlined_by"][0]["line"] == line_of("inlined.c", "inlined-call")


def test_cpp_names_are_demangled(tmp_path, port):
    program = build("g++", tmp_path / "writer", "-g", "-O1", str(HERE / "writer.cc"))
    report, _ = record_report(tmp_path, [program, str(port), str(REQUESTS)])
    functions = {site["function"] for site in client_sites(report)}
    assert functions == {"proto::Writer::Header(int)", "proto::Writer::Body()"}


def test_dlopened_library_is_named(tmp_path, port):
    plugin = build("gcc", tmp_path / "libplugin.so", "-g", "-O1", "-shared", "-fPIC", str(HERE / "plugin.c"))
    program = build("gcc", tmp_path / "dlclient", "-g", "-O1", str(HERE / "dlclient.c"), "-ldl")
    report, _ = record_report(tmp_path, [program, str(port), str(REQUESTS), plugin])
    sites = client_sites(report)
    assert sum(site["writes"] for site in sites) == 2 * REQUESTS
    for site in sites:
        assert site["function"] == "plugin_write_request" and site["module"] == plugin
        assert pathlib.Path(site["file"]).name == "plugin.c" and site["line"] == line_of("plugin.c", "plugin-write")


PYTHON_CLIENT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(int(sys.argv[2])):
    s.sendall(b"h" * 8)
    s.send(b"b" * 32)
    assert s.recv(1) == b"r"
s.close()
"""


def test_python_frames_are_the_interpreters(tmp_path, port):
    report, _ = record_report(tmp_path, [sys.executable, "-c", PYTHON_CLIENT, str(port), str(REQUESTS)])
    sites = client_sites(report)
    assert sum(site["writes"] for site in sites) == 2 * REQUESTS
    functions = {site["function"] for site in sites}
    # The socket module's C functions, named, not garbage.
    assert any(name and name.startswith("sock_send") for name in functions), functions
    assert all(site["module"] and ("python" in site["module"].lower() or "_socket" in site["module"]) for site in sites)


NODE_CLIENT = """
const net = require('net');
const [port, n] = [Number(process.argv[2]), Number(process.argv[3])];
const s = net.connect(port, '127.0.0.1', () => {
  let got = 0;
  const send = () => { s.write(Buffer.alloc(8, 'h')); s.write(Buffer.alloc(32, 'b')); };
  s.on('data', (d) => { got += d.length; if (got >= n) s.destroy(); else send(); });
  send();
});
"""


def test_nodejs_names_the_first_native_frame_and_jit_code_as_unknown(tmp_path, port):
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("Node.js is not installed (scripts/install-deps.sh installs nodejs)")
    script = tmp_path / "client.js"
    script.write_text(NODE_CLIENT)
    report, text = record_report(tmp_path, [node, str(script), str(port), str(REQUESTS)])
    sites = client_sites(report)
    assert sum(site["writes"] for site in sites) >= REQUESTS  # libuv may join a request's two writes
    for site in sites:
        # The first frame outside libc and the shim: libuv's write in the node binary, named.
        assert site["function"] and site["function"].startswith("uv__") and site["module"].endswith("node"), site
        for frame in site["stack"]:
            # Each frame is a named function of a module, or code in no module (V8's JIT) said so.
            assert frame["function"] or frame["module"], frame
            if frame["module"] is None:
                assert frame["function"] == "[unknown code: JIT or unmapped]"
    assert any(frame["module"] is None for site in sites for frame in site["stack"]), "no JIT frame seen"


def test_static_binary_is_blind(tmp_path, port):
    try:
        program = build("gcc", tmp_path / "client-static", "-static", "-O1", str(HERE / "client.c"))
    except subprocess.CalledProcessError:
        pytest.skip("no static libc to link against")
    out = tmp_path / "traces"
    result = invoke("record", "-o", out, "--", program, str(port), "2")
    assert result.exit_code == 0, result.output
    assert "statically linked" in result.stderr
    assert not list(out.glob("*.*.json"))


def test_pyelftools_alone_gives_the_same_lines(tmp_path):
    """Without addr2line: pyelftools' symbols and DWARF line tables."""
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    with_tool, alone = Symbolizer(), Symbolizer(use_addr2line=False)
    symbols = subprocess.run(["nm", client], capture_output=True, text=True, check=True).stdout.split("\n")
    start = next(int(line.split()[0], 16) for line in symbols if line.endswith(" write_body"))
    for offset in range(start + 1, start + 40):
        a, b = with_tool.resolve({"path": client}, offset), alone.resolve({"path": client}, offset)
        assert b["function"] == a["function"] == "write_body"
        assert (pathlib.Path(b["file"]).name, b["line"]) == (pathlib.Path(a["file"]).name, a["line"]), offset


def test_symbol_tables_are_read_as_pyelftools_reads_them(tmp_path):
    """_read_elf unpacks a symbol table whole: the functions it finds are those pyelftools'
    own iteration finds, in a program's .symtab, a stripped one's .dynsym and the libraries loaded here."""
    from elftools.elf.elffile import ELFFile

    from tcpadvise.symbols.symbolize import _read_elf

    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    stripped = build("gcc", tmp_path / "stripped", "-O1", "-s", str(HERE / "client.c"))
    loaded = {line.split()[-1] for line in pathlib.Path("/proc/self/maps").read_text().splitlines()
              if ".so" in line.split()[-1] and line.split()[-1].startswith("/")}
    compared = 0
    for path in [client, stripped, *sorted(loaded)]:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            table = elf.get_section_by_name(".symtab") or elf.get_section_by_name(".dynsym")
            expected = sorted((symbol["st_value"], symbol["st_size"], symbol.name)
                              for symbol in table.iter_symbols()
                              if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"])
        assert _read_elf(path, None).symbols == expected, path
        compared += bool(expected)
    assert compared >= 3


def test_missing_foreign_or_rebuilt_files_stay_module_offset(tmp_path):
    client = build("gcc", tmp_path / "client", "-g", "-O1", str(HERE / "client.c"))
    not_elf = tmp_path / "not-elf"
    not_elf.write_bytes(b"\x7fELF" + b"\xff" * 100)
    symbolizer = Symbolizer()
    for module in ({"path": str(tmp_path / "gone")}, {"path": str(not_elf)},
                   {"path": client, "build_id": "00" * 20}, {"path": _zero_sized_symbols(client)}, None):
        frame = symbolizer.resolve(module, 0x1189)
        assert frame["file"] is None and frame["offset"] == 0x1189
        assert frame["function"] is None or module is None


def _zero_sized_symbols(path: str) -> str:
    """A copy of an ELF file whose .symtab says its entries are 0 bytes (a hostile file's)."""
    import struct

    from elftools.elf.elffile import ELFFile

    data = bytearray(pathlib.Path(path).read_bytes())
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        index = next(number for number, section in enumerate(elf.iter_sections()) if section.name == ".symtab")
        header = elf["e_shoff"] + index * elf["e_shentsize"]
    struct.pack_into("<Q", data, header + 56, 0)  # Elf64_Shdr.sh_entsize
    broken = pathlib.Path(path + "-zero-entsize")
    broken.write_bytes(bytes(data))
    return str(broken)
