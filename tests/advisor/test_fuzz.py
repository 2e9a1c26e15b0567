"""Hostile input to every reader: a one-line error or a warning, never a traceback.

Each reader (trace, rules YAML, calibration, policy config checks, experiment
traces for ab report, ELF headers) gets mutations of a real input: truncation,
type swaps, deleted keys, deep nesting, huge numbers, NaN/Infinity, wrong
UTF-8. Hypothesis runs a fixed set (derandomize) so a failure reproduces; a
time-bounded random part (TCPADVISE_FUZZ_SECONDS, 2 s by default) adds new
cases each run and prints the seed of a failing one.
"""

import io
import json
import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from tcpadvise.ab.experiment import build_ab_report
from tcpadvise.errors import TcpadviseError
from tcpadvise.model.report import build_report
from tcpadvise.render.json import dumps, render_json
from tcpadvise.render.text import render_text
from tcpadvise.rules.advice import advise
from tcpadvise.rules.calibration import load_calibration
from tcpadvise.rules.rulebook import builtin_rule_files, check_rule_files, load_rulebook
from tcpadvise.symbols.elfinfo import ElfFormatError, read_elf
from tcpadvise.trace.reader import load_inputs

from .test_ab import experiment_trace

RECORDED = Path(__file__).parent / "data" / "recorded-trace.json"
RULEBOOK = load_rulebook(())
SECONDS = float(os.environ.get("TCPADVISE_FUZZ_SECONDS", "2"))
HOSTILE = [
    0,
    -1,
    2**64,
    2**1000,
    -(2**63),
    1e308,
    "NaN",
    "Infinity",
    -0.0,
    "x",
    "\x1b[2J\x07",
    "",
    None,
    True,
    [],
    {},
    [1, 2],
    [0, 1, 2, 3],
    {"a": 1},
]
FIXED = settings(
    derandomize=True,
    database=None,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _leaves(document, path=()):
    yield path
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            yield from _leaves(value, (*path, index))


def mutate(document, rng: random.Random):
    """`document` with one to three fields swapped, deleted or nested deep."""
    document = json.loads(json.dumps(document))
    paths = [path for path in _leaves(document) if path]
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(paths)
        parent = document
        try:
            for part in path[:-1]:
                parent = parent[part]
            choice = rng.random()
            if choice < 0.15 and isinstance(parent, dict):
                del parent[path[-1]]
            elif choice < 0.2:
                parent[path[-1]] = "DEEP"
            else:
                parent[path[-1]] = rng.choice(HOSTILE)
        except (KeyError, IndexError, TypeError):
            pass
    return document


def encode(document, rng: random.Random) -> bytes:
    """JSON text of `document`, NaN spelt as JSON cannot, sometimes cut short or with a bad UTF-8 byte."""
    text = (
        json.dumps(document).replace('"NaN"', "NaN").replace('"Infinity"', "Infinity")
    )
    text = text.replace('"DEEP"', "[" * 3000 + "]" * 3000).encode()
    choice = rng.random()
    if choice < 0.1:
        return text[: rng.randrange(len(text))]
    if choice < 0.15:
        cut = rng.randrange(len(text))
        return text[:cut] + b"\xff\xc3" + text[cut:]
    return text


def report_all_ways(paths: list[Path]) -> None:
    """Everything `report` does with the files: text, JSON with no NaN/Infinity, findings."""
    try:
        inputs = load_inputs(paths)
        report = build_report(inputs)
        report.findings = advise(report, RULEBOOK, None)
        json.loads(render_json(report), parse_constant=_not_json)
        render_text(report, Console(file=io.StringIO(), width=120))
    except TcpadviseError as error:
        assert "\n" not in str(error)


def _not_json(name: str):
    raise AssertionError(f"{name} in JSON output")


def ab_all_ways(path: Path) -> None:
    try:
        json.loads(
            dumps(build_ab_report(load_inputs([path]))), parse_constant=_not_json
        )
    except TcpadviseError as error:
        assert "\n" not in str(error)


def check_trace(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    bad = tmp_path / f"bad{seed}.json"
    bad.write_bytes(encode(mutate(json.loads(RECORDED.read_text()), rng), rng))
    good = tmp_path / "good.json"
    good.write_bytes(RECORDED.read_bytes())
    report_all_ways([bad])
    report_all_ways([tmp_path])


@FIXED
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_traces_never_end_in_a_traceback(tmp_path, seed):
    check_trace(tmp_path, seed)


def test_mutated_traces_random_part(tmp_path):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    deadline = time.monotonic() + SECONDS
    while time.monotonic() < deadline:
        case = rng.randrange(2**32)
        try:
            check_trace(tmp_path, case)
        except BaseException:
            print(f"failing case: check_trace(tmp_path, {case}) (run seed {seed})")
            raise


@FIXED
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_experiment_traces_never_end_in_a_traceback(tmp_path, seed):
    rng = random.Random(seed)
    document = experiment_trace(
        {"control": [100, 110, 120] * 4, "nodelay": [50, 60, 70] * 4}
    ).data
    path = tmp_path / "trial.json"
    path.write_bytes(encode(mutate(document, rng), rng))
    ab_all_ways(path)


def test_a_damaged_trace_among_good_ones_is_skipped_and_exit_3(tmp_path):
    from testlib import invoke

    (tmp_path / "good.json").write_bytes(RECORDED.read_bytes())
    damaged = json.loads(RECORDED.read_text())
    damaged["sockets"][0]["tcp_info"] = {
        **damaged["sockets"][0].get("tcp_info", {}),
        "samples": 0,
    }
    (tmp_path / "damaged.json").write_text(json.dumps(damaged))
    result = invoke("report", "--format", "json", tmp_path)
    assert result.exit_code == 3, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any(
        "damaged.json" in warning and "tcp_info" in warning for warning in warnings
    ), warnings


def test_nan_in_a_trace_is_one_line_not_json(tmp_path):
    from testlib import assert_one_line_error, invoke

    text = '{"x": NaN, ' + RECORDED.read_text().lstrip().removeprefix("{")
    (tmp_path / "t.json").write_text(text)
    assert_one_line_error(
        invoke("report", tmp_path / "t.json"), 2, "NaN is not a JSON number"
    )


RULE = (builtin_rule_files()[0]).read_text()


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            'a: &a ["x","x","x","x","x","x","x","x"]\n'
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} ["
                + ",".join([f"*{chr(97 + i)}"] * 8)
                + "]\n"
                for i in range(9)
            ),
            "aliases",
        ),
        ("rules: " + "[" * 5000 + "]" * 5000, "nested deeper"),
        ("rules: " + "{a: " * 2000 + "1" + "}" * 2000, "nested deeper"),
        ("# " + "x" * (2 << 20), "larger than"),
    ],
    ids=["alias-bomb", "deep-flow", "deep-mapping", "huge"],
)
def test_hostile_yaml_is_refused_quickly(tmp_path, text, fragment):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    started = time.monotonic()
    _, problems = check_rule_files([path])
    assert time.monotonic() - started < 5
    assert len(problems) == 1 and fragment in problems[0], problems


@FIXED
@given(data=st.data())
def test_mutated_rule_files_are_problems_not_tracebacks(tmp_path, data):
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1)))
    text = RULE
    cut = rng.randrange(len(text))
    choice = rng.random()
    if choice < 0.3:
        text = text[:cut]
    elif choice < 0.6:
        text = (
            text[:cut]
            + rng.choice(
                [
                    "*x",
                    "&a ",
                    ": :",
                    "\t",
                    "[",
                    "{",
                    "!!python/object:os.system",
                    "1e999",
                    ".nan",
                ]
            )
            + text[cut:]
        )
    else:
        text = text.replace(
            rng.choice(["high", "medium", "0", "1", "id", "when"]),
            rng.choice(["", "-1", "[]", "{}", ".inf"]),
            1,
        )
    path = tmp_path / "rules.yaml"
    path.write_bytes(text.encode() if rng.random() < 0.9 else text.encode() + b"\xff")
    check_rule_files([path])


@FIXED
@given(
    document=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(st.text(max_size=8), children, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_any_json_as_calibration_is_one_line(tmp_path, document):
    path = tmp_path / "calibration.json"
    path.write_text(
        json.dumps({"schema": "tcpadvise.calibration/1", "measurements": document})
    )
    try:
        load_calibration(path)
    except TcpadviseError as error:
        assert "\n" not in str(error)


@FIXED
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_elf_headers_are_elf_format_errors(tmp_path, seed):
    rng = random.Random(seed)
    image = bytearray(Path("/bin/true").read_bytes()[:4096])
    for _ in range(rng.randint(1, 8)):
        offset = rng.randrange(64 if rng.random() < 0.7 else len(image))
        image[offset] = rng.choice([0, 0xFF, rng.randrange(256)])
    if rng.random() < 0.3:
        image = image[: rng.randrange(len(image))]
    path = tmp_path / "elf"
    path.write_bytes(bytes(image))
    try:
        read_elf(path)
    except ElfFormatError:
        pass
