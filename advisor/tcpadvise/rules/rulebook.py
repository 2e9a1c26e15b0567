"""The rulebook: rules as YAML data, loaded, validated and evaluated.

A rule file (schemas/rules-1.schema.json) holds rules; the built-in ones are
the files of tcpadvise/rules/, and a user's --rules file adds rules or
replaces the built-in rule of the same id. A rule's condition is data:

    when:
      all:
        - {metric: bursts.writes_p50, op: ">=", value: 2}
        - {metric: turns.p50_us, op: between, value: [30000, 250000]}

over the metrics of metrics.METRICS, combined with all/any; nothing is
evaluated as code. Texts name metrics in braces ({turns.p50_us}) to show
their values. Loading checks a file against the schema, then what a schema
cannot say (metric names and units, placeholders, level lists, rule ids),
and reports every mistake with its line and column.
"""

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from .. import schemas
from ..errors import RulesError
from ..model.metrics import METRICS, SCOPE, MetricValues
from ..units import NUMERIC_UNITS
from . import yamlsafe
from .calibration import measurement_fields

RULES_SCHEMA = schemas.uri("tcpadvise.rules/1")
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*)\}")
_COMPARE = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "between": lambda value, bounds: bounds[0] <= value <= bounds[1],
    "in": lambda value, choices: value in choices,
}
_EQUALITY_OPS = ("==", "!=", "in")


def holds(op: str, value, threshold) -> bool:
    """Whether `value op threshold` holds, for a condition's operator."""
    return _COMPARE[op](value, threshold)


@dataclass(frozen=True)
class Rule:
    """One validated rule; `source_text` is its part of the file it came from, comments included."""

    data: dict
    origin: str
    line: int
    source_text: str

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def subject(self) -> str:
        return self.data.get("subject", SCOPE)

    @property
    def suppressed_by(self) -> list[str]:
        return self.data.get("suppressed_by", [])


@dataclass(frozen=True)
class Rulebook:
    rules: list[Rule]

    def get(self, rule_id: str) -> Rule | None:
        return next((rule for rule in self.rules if rule.id == rule_id), None)


def builtin_rule_files() -> list[Path]:
    folder = resources.files(__package__)
    return sorted(Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def load_rulebook(extra_files: Iterable[Path] = ()) -> Rulebook:
    """The built-in rules, then those of `extra_files` (replacing built-in ones of the same id)."""
    rules, problems = _load_files([*builtin_rule_files(), *extra_files])
    if problems:
        raise RulesError.from_problems(problems)
    return Rulebook(rules)


def check_rule_files(paths: Iterable[Path]) -> tuple[list[Rule], list[str]]:
    """The rules of `paths` and every mistake in them, judged beside the built-in rules."""
    builtin, _ = _load_files(builtin_rule_files())
    return _load_files(list(paths), known_ids={rule.id for rule in builtin})


# A mistake found in a file: (line, column, "FILE:LINE:COLUMN: message"), so that they sort by position.
Problem = tuple[int, int, str]


def _load_files(paths: list[Path], known_ids: Iterable[str] = ()) -> tuple[list[Rule], list[str]]:
    """Rules of every file in order, a later rule replacing an earlier one of the same id, and the problems."""
    by_id: dict[str, Rule] = {}
    problems: list[str] = []
    suppressions: list[tuple[str, Problem]] = []
    for path in paths:
        rules, file_problems, file_suppressions = _load_file(path)
        problems.extend(text for *_, text in sorted(file_problems))
        suppressions.extend(file_suppressions)
        for rule in rules:
            by_id[rule.id] = rule
    ids = set(by_id) | set(known_ids)
    problems.extend(text for other, (*_, text) in suppressions if other not in ids)
    return list(by_id.values()), problems


def _load_file(path: Path) -> tuple[list[Rule], list[Problem], list[tuple[str, Problem]]]:
    """A file's rules (none if it has a mistake), its mistakes, and each suppressed_by id with where it stands."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "not UTF-8 text"
        return [], [(0, 0, f"{path}: cannot read ({reason})")], []
    try:
        root, data = yamlsafe.load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        reason = getattr(error, "problem", None) or error
        return [], [(line, column, f"{path}:{line}:{column}: not YAML ({reason})")], []
    if root is None:
        return [], [(1, 1, f"{path}:1:1: empty file; expected 'schema: {RULES_SCHEMA}' and 'rules:'")], []

    def locate(json_path: Iterable, message: str) -> Problem:
        mark = _node_at(root, json_path).start_mark
        return mark.line + 1, mark.column + 1, f"{path}:{mark.line + 1}:{mark.column + 1}: {message}"

    schema_problems = [
        locate(error.absolute_path, error.message) for error in schemas.errors(RULES_SCHEMA, data)
    ]
    if schema_problems:
        return [], schema_problems, []
    rules, problems, suppressions, seen = [], [], [], set()
    lines = text.splitlines()
    for index, rule_data in enumerate(data["rules"]):
        base = ["rules", index]
        if rule_data["id"] in seen:
            problems.append(locate([*base, "id"], f"rule id '{rule_data['id']}' appears twice in this file"))
        seen.add(rule_data["id"])
        problems.extend(locate([*base, *where], message) for where, message in _rule_problems(rule_data))
        suppressions.extend(
            (other, locate([*base, "suppressed_by", position], f"no rule has the id '{other}'"))
            for position, other in enumerate(rule_data.get("suppressed_by", []))
        )
        node = _node_at(root, base)
        rules.append(
            Rule(
                data=rule_data,
                origin=str(path),
                line=node.start_mark.line + 1,
                source_text="\n".join(lines[node.start_mark.line : node.end_mark.line]).rstrip() + "\n",
            )
        )
    return ([] if problems else rules), problems, suppressions


def _node_at(root: yaml.Node, json_path: Iterable) -> yaml.Node:
    """The YAML node at a JSON path, or the deepest one that exists on the way."""
    node = root
    for part in json_path:
        if isinstance(node, yaml.MappingNode):
            children = {key.value: value for key, value in node.value}
            if part not in children:
                return node
            node = children[part]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _rule_problems(rule: dict) -> list[tuple[list, str]]:
    """What the schema cannot check in a rule, as (path inside the rule, message)."""
    subject = rule.get("subject", SCOPE)
    problems = []
    for where, condition in _conditions(rule):
        problems.extend(
            ([*where, *inner], message) for inner, message in _condition_problems(condition, subject)
        )
    for position, name in enumerate(rule.get("show", [])):
        problems.extend((["show", position], message) for message in _metric_problems(name, subject))
    for key in ("severity", "confidence", "recommendation"):
        if isinstance(rule[key], list):
            problems.extend(([key, *where], message) for where, message in _variant_problems(rule[key]))
    for where, template in _templates(rule):
        problems.extend((where, message) for message in _placeholder_problems(template, subject))
    measured = rule["expected_effect"].get("measured")
    if measured is not None:
        fields = measurement_fields(measured["measurement"])
        where = ["expected_effect", "measured"]
        if fields is None:
            problems.append(
                (
                    [*where, "measurement"],
                    f"unknown measurement '{measured['measurement']}' (see calibration-1.schema.json)",
                )
            )
        else:
            problems.extend(
                (
                    [*where, "text"],
                    (
                        f"'{name}' is neither a field of measurement '{measured['measurement']}' "
                        f"({', '.join(fields)}) nor a metric"
                    ),
                )
                for name in PLACEHOLDER.findall(measured["text"])
                if name not in fields and _metric_problems(name, subject)
            )
    return problems


def _conditions(rule: dict) -> list[tuple[list, dict]]:
    """Every condition of a rule with its path: when, and the when of each level and variant."""
    found = [(["when"], rule["when"])]
    for key in ("severity", "confidence", "recommendation"):
        if isinstance(rule[key], list):
            found.extend(
                ([key, index, "when"], entry["when"])
                for index, entry in enumerate(rule[key])
                if "when" in entry
            )
    return found


def _condition_problems(condition: dict, subject: str) -> list[tuple[list, str]]:
    for combinator in ("all", "any"):
        if combinator in condition:
            return [
                ([combinator, index, *where], message)
                for index, part in enumerate(condition[combinator])
                for where, message in _condition_problems(part, subject)
            ]
    problems = [(["metric"], message) for message in _metric_problems(condition["metric"], subject)]
    if not problems:
        message = _comparison_problem(condition, METRICS[condition["metric"]].unit)
        if message:
            problems.append((["value"], message))
    return problems


def _metric_problems(name: str, subject: str) -> list[str]:
    if name not in METRICS:
        return [f"unknown metric '{name}' ('tcpadvise rules metrics' lists them)"]
    if METRICS[name].subject != subject:
        return [f"metric '{name}' is one of a {METRICS[name].subject}, and this rule judges a {subject}"]
    return []


def _comparison_problem(comparison: dict, unit: str) -> str | None:
    op, value = comparison["op"], comparison["value"]
    values = value if op in ("between", "in") else [value]
    if unit in NUMERIC_UNITS:
        fits = all(isinstance(item, int | float) and not isinstance(item, bool) for item in values)
        expected = "numbers"
    else:
        expected_type = bool if unit == "bool" else str
        fits = op in _EQUALITY_OPS and all(isinstance(item, expected_type) for item in values)
        expected = "true or false with ==, != or in" if unit == "bool" else "strings with ==, != or in"
    return None if fits else f"metric '{comparison['metric']}' is in {unit}: compare it with {expected}"


def _variant_problems(entries: list[dict]) -> list[tuple[list, str]]:
    """Every entry but the last needs a 'when'; the last, the default, must not have one."""
    problems = [
        ([index], "only the last entry may go without 'when'")
        for index, entry in enumerate(entries[:-1])
        if "when" not in entry
    ]
    if "when" in entries[-1]:
        problems.append(([len(entries) - 1, "when"], "the last entry is the default: it takes no 'when'"))
    return problems


def _templates(rule: dict) -> list[tuple[list, str]]:
    templates = [(["why"], rule["why"]), (["expected_effect", "text"], rule["expected_effect"]["text"])]
    recommendations = (
        rule["recommendation"] if isinstance(rule["recommendation"], list) else [rule["recommendation"]]
    )
    for index, recommendation in enumerate(recommendations):
        where = ["recommendation", index] if isinstance(rule["recommendation"], list) else ["recommendation"]
        templates.extend(
            ([*where, key], recommendation[key]) for key in ("code", "note") if key in recommendation
        )
    return templates


def _placeholder_problems(template: str, subject: str) -> list[str]:
    return [message for name in PLACEHOLDER.findall(template) for message in _metric_problems(name, subject)]


# ---- evaluation ----


def evaluate(condition: dict, values: MetricValues) -> list[dict] | None:
    """The comparisons that made `condition` hold, as evidence; None when it does not hold."""
    if "all" in condition:
        evidence = []
        for part in condition["all"]:
            found = evaluate(part, values)
            if found is None:
                return None
            evidence.extend(found)
        return evidence
    if "any" in condition:
        held = [found for part in condition["any"] if (found := evaluate(part, values)) is not None]
        return [item for found in held for item in found] if held else None
    value = values[condition["metric"]]
    if value is None or not holds(condition["op"], value, condition["value"]):
        return None
    return [evidence_item(condition["metric"], value, condition["op"], condition["value"])]


def evidence_item(metric: str, value, op: str | None = None, threshold=None) -> dict:
    """One line of evidence: a metric's value, and the comparison it passed (None for context)."""
    return {
        "metric": metric,
        "value": value,
        "unit": METRICS[metric].unit,
        "op": op,
        "threshold": threshold,
    }


def choose(entries: dict | list[dict], values: MetricValues) -> dict:
    """A single entry, or the first of a variant list whose 'when' holds (the last has none)."""
    if not isinstance(entries, list):
        return entries
    return next(
        entry for entry in entries if "when" not in entry or evaluate(entry["when"], values) is not None
    )


def level(levels: str | list[dict], values: MetricValues) -> str:
    """A rule's severity or confidence: a level name, or the level of the chosen entry."""
    return levels if isinstance(levels, str) else choose(levels, values)["level"]


def fill(template: str, lookup: Callable[[str], str]) -> str:
    """`template` with each {name} replaced by lookup(name)."""
    return PLACEHOLDER.sub(lambda match: lookup(match.group(1)), template)
