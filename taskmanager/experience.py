"""Activation of an experience contract (SPEC §4.5, §4.6), a pure function of the contract, the
validated plan and the effect catalog.

A contract is activated only when it binds: its `plan_binding` names the workflow's `plan_id`,
exactly its step ids and their count; every desired effect and success criterion is a known
effect id provided by at least one bound step (a capability operation whose argument constraints
the step meets); its budget and observation policy are well formed. Otherwise it is refused with
one reason and the plan runs plain. An unknown event named in `task_event_policy` does not cost
the whole contract: that event is refused by name (traced), the rest of the contract holds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from taskmanager.effects import EffectCatalog
from taskmanager.model import CALLBACK_STATUSES, Step

EXPERIENCE_CONTRACT = "a2a-experience-policy-v1"
DECISION_EVENTS = frozenset({*CALLBACK_STATUSES, "OBSERVATION", "CRITERIA_UNMET"})
TERMINAL_EVENTS = frozenset({*CALLBACK_STATUSES, "WORKFLOW_COMPLETED"})
KIND = r"^[a-z][a-z0-9_.\-]{0,63}$"
SCOPE_KEYS = ("room", "workflow_id", "capability_id")
MAX_LIST = 32
MAX_SUBSCRIPTIONS = 16
MAX_AGE_S = 86400.0


@dataclass(frozen=True)
class Activation:
    """The contract as kept (None: refused), why not, and what activation found."""

    contract: dict[str, Any] | None
    refusal: str | None = None
    bindings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    subscriptions: list[dict[str, Any]] = field(default_factory=list)
    refused_events: list[str] = field(default_factory=list)
    decision_events: list[str] | None = None
    terminal_events: list[str] | None = None
    max_decisions: int | None = None
    max_replans: int | None = None


_Refused = ValueError  # a refusal's reason, raised inside `activate` only (never escapes it)


def _strings(exp: dict[str, Any], name: str) -> list[str]:
    value = exp.get(name, [])
    if not isinstance(value, list) or len(value) > MAX_LIST:
        raise _Refused(f"experience {name} must be a list of at most {MAX_LIST} strings")
    if not all(isinstance(v, str) and 0 < len(v) <= 128 for v in value):
        raise _Refused(f"experience {name} must hold strings of 1 to 128 characters")
    return list(value)


def _binding(exp: dict[str, Any], plan_id: str, steps: list[Step]) -> None:
    binding = exp.get("plan_binding")
    if not isinstance(binding, dict):
        raise _Refused("experience has no plan_binding")
    if binding.get("plan_id") != plan_id:
        raise _Refused(
            f"experience plan_binding.plan_id {str(binding.get('plan_id'))[:64]!r} is not the"
            f" workflow's plan_id {plan_id!r}"
        )
    ids, wanted = binding.get("step_ids"), [s.step_id for s in steps]
    if (
        not isinstance(ids, list)
        or not all(isinstance(i, str) for i in ids)
        or len(set(ids)) != len(ids)
        or set(ids) != set(wanted)
    ):
        raise _Refused("experience plan_binding.step_ids do not match the workflow's steps")
    count = binding.get("step_count")
    if not isinstance(count, int) or isinstance(count, bool) or count != len(wanted):
        raise _Refused("experience plan_binding.step_count does not match the workflow")


def bind_effects(
    wanted: list[str], steps: list[Step], effects: EffectCatalog
) -> dict[str, list[dict[str, Any]]]:
    """For each task step, the wanted effects it provides and the evidence each needs."""
    bindings: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        if step.kind != "task":
            continue
        for effect in dict.fromkeys(wanted):
            for provider in effects.providers(effect):
                if provider.provides(step.capability_id, step.operation_id, step.args):
                    need = provider.evidence
                    values = None if need is None or need.values is None else list(need.values)
                    bindings.setdefault(step.step_id, []).append(
                        {"effect": effect, "key": need.key if need else None, "values": values}
                    )
                    break
    return bindings


def _effects(exp: dict[str, Any], steps: list[Step], effects: EffectCatalog) -> dict[str, Any]:
    desired, criteria = _strings(exp, "desired_effects"), _strings(exp, "success_criteria")
    _strings(exp, "constraints")
    if not isinstance(exp.get("goal_summary", ""), str):
        raise _Refused("experience goal_summary must be a string")
    for name, listed in (("desired_effects", desired), ("success_criteria", criteria)):
        unknown = [e for e in listed if not effects.known(e)]
        if unknown:
            raise _Refused(f"experience {name} names an unknown effect {unknown[0][:64]!r}")
    bindings = bind_effects(desired + criteria, steps, effects)
    provided = {b["effect"] for bound in bindings.values() for b in bound}
    for name, listed in (("desired_effects", desired), ("success_criteria", criteria)):
        missing = [e for e in listed if e not in provided]
        if missing:
            raise _Refused(f"experience {name} {missing[0]!r}: no step of the plan provides it")
    return bindings


def _budget(exp: dict[str, Any]) -> tuple[int | None, int | None]:
    budget = exp.get("decision_budget", {})
    if not isinstance(budget, dict):
        raise _Refused("experience decision_budget must be an object")
    found: list[int | None] = []
    for name in ("max_decisions", "max_replans"):
        value = budget.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10
        ):
            raise _Refused(f"experience decision_budget.{name} must be an integer 0..10")
        found.append(value)
    return found[0], found[1]


def _events(exp: dict[str, Any]) -> tuple[list[str] | None, list[str] | None, list[str]]:
    policy = exp.get("task_event_policy", {})
    if not isinstance(policy, dict):
        raise _Refused("experience task_event_policy must be an object")
    kept: list[list[str] | None] = []
    refused: list[str] = []
    for name, known in (("decision_events", DECISION_EVENTS), ("terminal_events", TERMINAL_EVENTS)):
        events = policy.get(name)
        if events is None:
            kept.append(None)
            continue
        if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
            raise _Refused(f"experience task_event_policy.{name} must be a list of strings")
        refused += [e[:64] for e in events if e not in known]
        kept.append([e for e in events if e in known])
    return kept[0], kept[1], refused


def _subscription(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict) or set(raw) - {"kind", "scope", "max_age_s"}:
        raise _Refused("a subscription is {kind, scope?, max_age_s}")
    kind, scope, age = raw.get("kind"), raw.get("scope", {}), raw.get("max_age_s")
    if not isinstance(kind, str) or not re.fullmatch(KIND, kind):
        raise _Refused(f"a subscription's kind matches {KIND}")
    if not isinstance(scope, dict) or set(scope) - set(SCOPE_KEYS):
        raise _Refused(f"a subscription's scope names only {', '.join(SCOPE_KEYS)}")
    if not all(isinstance(v, str) and 0 < len(v) <= 96 for v in scope.values()):
        raise _Refused("a subscription's scope values are strings of 1 to 96 characters")
    if isinstance(age, bool) or not isinstance(age, int | float) or not 0 < age <= MAX_AGE_S:
        raise _Refused(f"a subscription's max_age_s is a number in (0, {MAX_AGE_S:g}]")
    return {"kind": kind, "scope": dict(scope), "max_age_s": float(age)}


def _subscriptions(exp: dict[str, Any]) -> list[dict[str, Any]]:
    policy = exp.get("observation_policy")
    if policy is None:
        return []
    subs = policy.get("subscriptions", []) if isinstance(policy, dict) else None
    if not isinstance(subs, list) or len(subs) > MAX_SUBSCRIPTIONS:
        raise _Refused(
            f"experience observation_policy.subscriptions is a list of at most {MAX_SUBSCRIPTIONS}"
        )
    return [_subscription(s) for s in subs]


def activate(exp: object, *, plan_id: str, steps: list[Step], effects: EffectCatalog) -> Activation:
    """Activation per SPEC §4.5 (see the module doc)."""
    try:
        if not isinstance(exp, dict):
            raise _Refused("experience must be an object")
        if exp.get("contract_version") != EXPERIENCE_CONTRACT:
            raise _Refused(f"experience contract_version is not {EXPERIENCE_CONTRACT}")
        _binding(exp, plan_id, steps)
        bindings = _effects(exp, steps, effects)
        max_decisions, max_replans = _budget(exp)
        decision_events, terminal_events, refused = _events(exp)
        subscriptions = _subscriptions(exp)
    except _Refused as exc:
        return Activation(None, str(exc))
    return Activation(
        exp,
        None,
        bindings,
        subscriptions,
        refused,
        decision_events,
        terminal_events,
        max_decisions,
        max_replans,
    )
