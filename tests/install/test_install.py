"""tcpadvise installed like a system tool, then used from there: the build of
TCPADVISE_BUILD installed into a temporary prefix (`make install-built`), the
advisor pip-installed from a copy of the checkout into a fresh virtual
environment (`TCPADVISE_PREFIX=PREFIX pip install`, offline: the venv sees the
system's site-packages for its dependencies), and record, report, config check
and bench run from there with no checkout path in their environment. Also the
man pages, completions, pkg-config file and CMake package it installed, and
`make uninstall`, which must leave nothing behind."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tcpadvise.cli import cli
from tcpadvise.cli.manpages import commands, page_name
from testlib import BUILD, REPO

pytestmark = pytest.mark.slow

SUBCOMMAND_PAGES = ["tcpadvise", "tcpadvise-record", "tcpadvise-report", "tcpadvise-bench", "tcpadvise-rules-show",
                    "tcpadvise-ab-report", "tcpadvise-config-check"]
TIMEOUT = 60


def run(cmd, env, cwd, timeout=TIMEOUT, check=True):
    result = subprocess.run([str(part) for part in cmd], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check:
        assert result.returncode == 0, f"{cmd}: {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


class Installed:
    """A prefix, a venv and an environment that points only at them."""

    def __init__(self, root: Path):
        self.prefix = root / "prefix"
        self.venv = root / "venv"
        self.work = root / "work"
        self.work.mkdir()
        self.env = {"HOME": str(root), "PATH": f"{self.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
        self.shim = self.prefix / "lib" / "tcpadvise" / "libtcpadvise.so"
        self.libexec = self.prefix / "libexec" / "tcpadvise"

    def tcpadvise(self, *args, check=True, **env):
        return run(["tcpadvise", *args], {**self.env, **env}, self.work, check=check)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if not (BUILD / "packaging" / "man.stamp").is_file():
        pytest.fail(f"{BUILD} has no man pages: configure it with Python able to import tcpadvise.cli")
    root = tmp_path_factory.mktemp("install")
    inst = Installed(root)
    # The build's manifest of a real install of its own, which ours replaces, is put back after.
    manifest = BUILD / "install_manifest.txt"
    kept = manifest.read_bytes() if manifest.exists() else None
    run(["make", "--no-print-directory", "install-built", f"BUILD={BUILD}", f"PREFIX={inst.prefix}"], None, REPO)
    # A copy, so that building the wheel writes nothing into the checkout (the docs'
    # symlinks become files).
    source = root / "src" / "advisor"
    shutil.copytree(REPO / "advisor", source,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "_paths.py"))
    run([sys.executable, "-m", "venv", "--system-site-packages", inst.venv], None, root)
    run([inst.venv / "bin" / "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index",
         "--disable-pip-version-check", source], {**inst.env, "TCPADVISE_PREFIX": str(inst.prefix)}, root,
        timeout=120)
    shutil.rmtree(root / "src")
    assert not any(str(REPO) in value for value in inst.env.values())
    yield inst
    if kept is not None:
        manifest.write_bytes(kept)


def assert_no_checkout_path(text):
    """Nothing tcpadvise cites lives in the checkout. The helpers' own debug info names their
    sources there (a call site's file:line, as DWARF has it): that is the traced program's, not ours."""
    assert str(REPO) not in text.replace(f"{REPO}/programs/", "<source of the traced program>/"), text


def test_layout_follows_gnu_install_dirs(installed):
    assert installed.shim.is_file() and (installed.shim.parent / "libtcpadvise_config.so").is_file()
    helpers = sorted(path.name for path in installed.libexec.iterdir())
    assert helpers == ["burst", "tcpadvise-config-check", "tcpadvise-loadgen"]
    assert all(os.access(installed.libexec / helper, os.X_OK) for helper in helpers)
    docs = installed.prefix / "share" / "doc" / "tcpadvise"
    assert sorted(path.name for path in docs.iterdir()) == ["README.md", "policy-config.md"]
    recorded = json.loads((installed.prefix / "share" / "tcpadvise" / "install.json").read_text())
    assert recorded["shim"] == str(installed.shim) and recorded["libexec"] == str(installed.libexec)


def test_the_command_runs_from_the_venv_and_finds_the_recorded_install(installed):
    # Every module of the package comes from the venv, and the shim is the one recorded at install.
    script = ("import json, sys, tcpadvise.cli, tcpadvise.record.shim as shim; "
              "print(json.dumps([m.__file__ for n, m in sys.modules.items() if n.startswith('tcpadvise')])); "
              "print(shim.find_shim()); print(shim.recorded_installation().origin)")
    out = run(["python", "-c", script], installed.env, installed.work).stdout.splitlines()
    modules = json.loads(out[0])
    assert len(modules) > 10 and all(path.startswith(str(installed.venv)) for path in modules), modules
    assert out[1:] == [str(installed.shim), "recorded at install"]


def test_record_report_and_a_policy_from_the_install(installed):
    burst = installed.libexec / "burst"
    script = ('exec 3< <("$1" server --port 0); read -r _ port <&3; '
              '"$1" client --port "$port" --rounds 20 --writes 15 --size 2 --reply 2 >/dev/null; kill $!')
    recorded = installed.tcpadvise("record", "-o", "out", "--", "bash", "-c", script, "demo", burst)
    assert "tcpadvise: traces in out:" in recorded.stderr, recorded.stderr
    assert json.loads((installed.work / "out" / "record.json").read_text())["shim"] == str(installed.shim)

    text = installed.tcpadvise("report", "out").stdout
    report = json.loads(installed.tcpadvise("report", "--format", "json", "out").stdout)
    metrics = installed.tcpadvise("export", "out").stdout
    for output in (text, json.dumps(report), metrics, recorded.stderr):
        assert_no_checkout_path(output)
    # The export counts the client's writes as the report does: 20 rounds of 15 writes.
    assert 'tcpadvise_writes_total{' in metrics and metrics.rstrip().endswith("# EOF"), metrics[-300:]
    client_writes = [line for line in metrics.splitlines()
                     if line.startswith("tcpadvise_writes_total{") and 'role="client"' in line]
    assert [float(line.rsplit(" ", 1)[1]) for line in client_writes] == [300.0], client_writes
    (finding,) = [item for item in report["findings"] if item["rule"] == "nagle-delayed-ack"]
    # What the finding cites is shipped with the package: it exists, inside the venv.
    assert len(finding["source"]["seeds"]) == 2
    for seed in finding["source"]["seeds"]:
        assert seed.startswith(str(installed.venv)) and Path(seed).read_text().strip()

    # The config the recommendations make names the shipped doc and passes the installed checker.
    installed.tcpadvise("report", "--emit-policy", "fix.yaml", "out")
    comment = (installed.work / "fix.yaml").read_text().splitlines()[0]
    doc = comment[comment.index("(") + 1:comment.index(")")]
    assert doc.startswith(str(installed.venv)) and "Experiments" in Path(doc).read_text()
    checked = installed.tcpadvise("config", "check", "fix.yaml")
    assert "rule" in checked.stdout, checked.stdout

    # Under a policy (its rules match this run's port, so the built-in one), the installed
    # shim loads the installed config parser beside it.
    installed.tcpadvise("record", "-o", "fixed", "--policy", "cork", "--", "bash", "-c",
                        script.replace("--rounds 20", "--rounds 5"), "demo", burst)
    (client,) = [item for trace in (installed.work / "fixed").glob("burst.*.json")
                 for item in json.loads(trace.read_text())["sockets"] if item["role"] == "client"]
    assert client["policy"]["settings"]["cork"] and client["policy"]["counters"]["corks"] == 5, client["policy"]


def test_a_tiny_bench_from_the_install(installed):
    result = installed.tcpadvise("bench", "--suite", "nagle", "--runs", "2", "--rounds", "5", "--seconds", "0.1",
                                 "-o", "calibration.json")
    assert_no_checkout_path(result.stdout + result.stderr)
    calibration = json.loads((installed.work / "calibration.json").read_text())
    assert "nagle" in calibration["measurements"], calibration
    results = json.loads((installed.work / "calibration.results.json").read_text())
    assert results["suites"], results


def test_man_pages_for_every_command(installed):
    man1 = installed.prefix / "share" / "man" / "man1"
    pages = sorted(path.stem for path in man1.glob("*.1"))
    every_command = sorted(page_name(ctx) for ctx in commands(cli))
    assert set(SUBCOMMAND_PAGES) <= set(pages) and pages == every_command, pages
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (scripts/install-deps.sh installs groff-base)")
    for page in pages:
        warnings = run(["groff", "-man", "-ww", "-z", man1 / f"{page}.1"], installed.env, installed.work)
        assert warnings.stderr == "", (page, warnings.stderr)
    if shutil.which("man") is None:
        pytest.skip("man is not installed (scripts/install-deps.sh installs man-db): the pages were checked with groff only")
    shown = run(["man", "-P", "cat", "tcpadvise-record"], {**installed.env, "MANPATH": str(installed.prefix / "share/man"),
                                                           "MANWIDTH": "100"}, installed.work).stdout
    assert "tcpadvise-record - Run CMD with the tcpadvise shim preloaded" in shown
    assert "--call-sites [off|sample|all]" in shown and "tcpadvise record -o out -- redis-benchmark" in shown
    assert "tcpadvise(1)" in shown  # SEE ALSO


def test_completions_are_installed_and_complete(installed):
    share = installed.prefix / "share"
    for script in ("bash-completion/completions/tcpadvise", "zsh/site-functions/_tcpadvise",
                   "fish/vendor_completions.d/tcpadvise.fish"):
        assert "_TCPADVISE_COMPLETE" in (share / script).read_text(), script
    completed = installed.tcpadvise(_TCPADVISE_COMPLETE="bash_complete", COMP_WORDS="tcpadvise rep", COMP_CWORD="1")
    assert completed.stdout.split() == ["plain,report"]


def test_pkg_config_names_the_shim_and_links_it(installed):
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed (scripts/install-deps.sh installs pkgconf)")
    env = {**installed.env, "PKG_CONFIG_PATH": str(installed.prefix / "lib" / "pkgconfig")}
    flags = run(["pkg-config", "--cflags", "--libs", "tcpadvise"], env, installed.work).stdout.split()
    libdir = installed.shim.parent
    assert flags == [f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-ltcpadvise"]
    assert run(["pkg-config", "--variable=shim", "tcpadvise"], env, installed.work).stdout.strip() == str(installed.shim)
    # A program linked with those flags is recorded without LD_PRELOAD.
    program = installed.work / "linked"
    run(["cc", "-o", program, Path(__file__).with_name("linked.c"), *flags], env, installed.work)
    traces = installed.work / "linked-traces"
    traces.mkdir()
    run([program], {**env, "TCPADVISE_OUT": str(traces)}, installed.work)
    (trace,) = traces.glob("linked.*.json")
    sockets = json.loads(trace.read_text())["sockets"]
    assert sorted((item["role"], item["writes"]["calls"]) for item in sockets) == [("client", 3), ("server", 0)]
    # The package finds the shim through pkg-config alone (no recorded install in this process).
    script = ("import tcpadvise.record.shim as shim; print(shim.pkg_config_installation().shim)")
    assert run(["python", "-c", script], env, installed.work).stdout.strip() == str(installed.shim)


def test_cmake_package_finds_the_shim(installed):
    project = installed.work / "cmake-user"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(user LANGUAGES NONE)\n"
        "find_package(tcpadvise 0.1 CONFIG REQUIRED)\n"
        "get_target_property(configs tcpadvise::shim IMPORTED_CONFIGURATIONS)\n"
        "get_target_property(location tcpadvise::shim IMPORTED_LOCATION_${configs})\n"
        'file(WRITE "${CMAKE_BINARY_DIR}/found.txt" "${tcpadvise_VERSION}\\n${tcpadvise_SHIM}\\n${location}\\n'
        '${tcpadvise_LOADGEN}\\n")\n'
    )
    run(["cmake", "-S", project, "-B", project / "build", f"-DCMAKE_PREFIX_PATH={installed.prefix}"],
        installed.env, installed.work)
    found = (project / "build" / "found.txt").read_text().splitlines()
    assert found == ["0.1.0", str(installed.shim), str(installed.shim), str(installed.libexec / "tcpadvise-loadgen")]
    # A version it is not compatible with is refused.
    (project / "CMakeLists.txt").write_text((project / "CMakeLists.txt").read_text().replace("0.1 CONFIG", "1.0 CONFIG"))
    refused = run(["cmake", "-S", project, "-B", project / "build2", f"-DCMAKE_PREFIX_PATH={installed.prefix}"],
                  installed.env, installed.work, check=False)
    assert refused.returncode != 0 and "tcpadvise" in refused.stderr


def test_make_uninstall_leaves_nothing(installed):
    run(["make", "--no-print-directory", "uninstall", f"BUILD={BUILD}"], None, REPO)
    left = sorted(str(path.relative_to(installed.prefix)) for path in installed.prefix.rglob("*")
                  if not path.is_dir())
    assert left == []
    assert not installed.libexec.exists() and not installed.shim.parent.exists()
