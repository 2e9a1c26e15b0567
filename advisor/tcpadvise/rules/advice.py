"""Findings: the rulebook applied to a report.

Each subject of the report (metrics.subjects_of: a scope of sockets, or a
record run) is judged by every rule of its kind; a rule whose `when` holds
makes a finding, unless a rule it names in suppressed_by fired on the same
subject. A finding, as JSON (report-1.schema.json, $defs/finding):

    {"rule": "nagle-delayed-ack", "title": "...",
     "severity": "high|medium|low|info", "confidence": "high|medium|low",
     "scope": {"program", "role", "local_port", "peer", "peer_port", "pids",
               "connections", "affected_connections" (of those, where the rule held),
               "sockets" (indexes into the report's sockets), "command"},
     "evidence": [{"metric", "value", "unit", "op", "threshold"}, ...],
     "why": "one sentence",
     "recommendation": {"policy": <what tcpadvise record --policy accepts>, "code": "...", "note": "..."|null},
     "expected_effect": "measured here: ..." or the seeds' figure,
     "source": {"seeds": ["<package>/data/seeds/<file>", ...], "note": ..., "seed_effect": "...",
                "calibration": "<file>"|null}}

Findings come in order of severity, then of subject, then of rule.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass

from ..model.metrics import METRICS, SCOPE, MetricValues, Scope, Subject, member_scopes, subjects_of
from ..model.report import Report
from ..resources import DOCS_DIR, DOCS_PLACEHOLDER, seed_path
from ..symbols.symbolize import call_sites_sentence, merge_call_sites
from ..units import format_value
from . import SEVERITIES
from .calibration import Calibration, field_unit
from .rulebook import Rule, Rulebook, choose, evaluate, evidence_item, fill, level

MEASURED_PREFIX = "measured here: "


def advise(report: Report, rulebook: Rulebook, calibration: Calibration | None = None) -> list[dict]:
    """Every finding of `rulebook` on `report`.

    A rule is judged on each scope as a whole and on each of its socket items alone: a rule
    that holds on one connection fires even when the others would average it away. The finding
    shows the values where it held (the whole scope if there, else its first item) and how many
    of the scope's connections it held on.
    """
    findings = []
    for subject in subjects_of(report):
        held: dict[str, Held] = {}
        if isinstance(subject, Scope):
            for member in member_scopes(report, subject):
                held_on_member(rulebook, MetricValues(member), held, lambda: scope_call_sites(report, member))
        findings.extend(judge(subject, held, rulebook, calibration, scope_call_sites(report, subject)))
    return sorted(findings, key=lambda item: SEVERITIES.index(item["severity"]))


@dataclass
class Held:
    """Where a rule held on a scope's socket items alone: the first such item (its values, the
    rule's evidence there and its call sites) and the connections of all of them."""

    first: MetricValues
    evidence: list[dict]
    call_sites: list[dict]
    connections: int


def held_on_member(
    rulebook: Rulebook, member: MetricValues, held: dict[str, "Held"], call_sites: Callable[[], list[dict]]
) -> None:
    """Judge one socket item of a scope (a scope of its own) by every scope rule; add where each held
    to `held` (rule id -> Held). call_sites() gives the item's, asked for once if at all."""
    sites = None
    for rule in rulebook.rules:
        if rule.subject != SCOPE:
            continue
        found = evaluate(rule.data["when"], member)
        if found is None:
            continue
        known = held.get(rule.id)
        if known is None:
            if sites is None:
                sites = call_sites()
            held[rule.id] = Held(member, found, sites, member.subject.merged["connections"])
        else:
            known.connections += member.subject.merged["connections"]


def judge(
    subject: Subject, held: dict[str, Held], rulebook: Rulebook, calibration: Calibration | None,
    call_sites: list[dict],
) -> list[dict]:
    """The findings on one subject: each rule of its kind judged on the whole (values) and, through
    `held` (held_on_member), on each of its items alone; call_sites: the subject's."""
    values = MetricValues(subject)
    fired = {}
    for rule in rulebook.rules:
        if rule.subject != subject.kind:
            continue
        evidence = evaluate(rule.data["when"], values)
        where = held.get(rule.id)
        if evidence is not None:
            fired[rule.id] = (rule, values, evidence, call_sites, where)
        elif where is not None:
            fired[rule.id] = (rule, where.first, where.evidence, where.call_sites, where)
    findings = []
    for rule, values_there, evidence, sites, where in fired.values():
        if any(other in fired for other in rule.suppressed_by):
            continue
        item = finding(rule, values_there.subject, values_there, evidence, calibration)
        item["scope"] = scope_json(subject)
        item["call_sites"] = sites
        if item["call_sites"] and item["recommendation"]["code"]:
            item["recommendation"]["code"] += " " + call_sites_sentence(item["call_sites"])
        if isinstance(subject, Scope):
            # Held on the whole but on no item alone (counts add up): every connection shares it.
            item["scope"]["affected_connections"] = (where.connections if where is not None else 0) or subject.merged[
                "connections"]
        findings.append(item)
    return findings


def finding(
    rule: Rule, subject: Subject, values: MetricValues, evidence: list[dict], calibration: Calibration | None
) -> dict:
    """The finding of `rule` on `subject`, whose condition held with `evidence`."""
    data = rule.data

    def metric_text(name: str) -> str:
        return format_value(values[name], METRICS[name].unit)

    def text(template: str) -> str:
        return fill(template, metric_text)

    recommendation = choose(data["recommendation"], values)
    seed_effect = text(data["expected_effect"]["text"])
    measured = _measured_effect(data["expected_effect"].get("measured"), calibration, metric_text)
    # A metric tested in two branches of an `any` that both held is evidence once.
    evidence = list({(item["metric"], item["op"], json.dumps(item["threshold"])): item for item in evidence}.values())
    tested = {item["metric"] for item in evidence}
    context = [evidence_item(name, values[name]) for name in data.get("show", []) if name not in tested]
    return {
        "rule": rule.id,
        "title": data["title"],
        "severity": level(data["severity"], values),
        "confidence": level(data["confidence"], values),
        "scope": scope_json(subject),
        "evidence": evidence + context,
        "why": text(data["why"]),
        "recommendation": {
            "policy": recommendation["policy"],
            "code": text(recommendation["code"]),
            "note": text(recommendation["note"]) if "note" in recommendation else None,
        },
        "expected_effect": measured or seed_effect,
        "source": {
            "seeds": [str(seed_path(seed)) for seed in data["source"].get("seeds", [])],
            "note": _note(data["source"].get("note")),
            "seed_effect": seed_effect,
            "calibration": str(calibration.path) if measured else None,
        },
    }


def _note(note: str | None) -> str | None:
    """A rule's source note, {docs} naming the docs shipped in the package."""
    return note.replace(DOCS_PLACEHOLDER, str(DOCS_DIR)) if note else note


def _measured_effect(
    measured: dict | None, calibration: Calibration | None, metric_text: Callable[[str], str]
) -> str | None:
    """The local figure from the calibration, when it has the rule's measurement."""
    if measured is None or calibration is None or measured["measurement"] not in calibration.measurements:
        return None
    figures = calibration.measurements[measured["measurement"]]
    return MEASURED_PREFIX + fill(
        measured["text"],
        lambda name: format_value(figures[name], field_unit(name)) if name in figures else metric_text(name),
    )


def scope_call_sites(report: Report, subject: Subject) -> list[dict]:
    """The call sites of a scope's sockets added together, most writes first (none for a run)."""
    if not isinstance(subject, Scope):
        return []
    return merge_call_sites([report.sockets[index].get("call_sites", []) for index in subject.sockets])


def scope_json(subject: Subject) -> dict:
    """Who a finding is about; the same keys for a scope of sockets and for a run."""
    if isinstance(subject, Scope):
        return {
            "program": subject.program,
            "role": subject.role,
            "local_port": subject.local_port,
            "peer": subject.peer,
            "peer_port": subject.peer_port,
            "pids": subject.pids,
            "connections": subject.merged["connections"],
            "affected_connections": subject.merged["connections"],
            "sockets": subject.sockets,
            "command": None,
        }
    return {
        "program": subject.program,
        "role": None,
        "local_port": None,
        "peer": None,
        "peer_port": None,
        "pids": [subject.manifest.data["pid"]],
        "connections": 0,
        "affected_connections": 0,
        "sockets": [],
        "command": subject.manifest.data["command"],
    }
