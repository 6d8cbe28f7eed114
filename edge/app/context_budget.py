"""The `device_context` a turn forwards to the cloud, within a byte budget (SPEC §3.1, the
sibling of §5.2's snapshot budget; the choice is in docs/design.md): its canonical JSON (UTF-8,
no spaces, `a2a_common.jsonx.canonical`) never exceeds `memory.device_context_budget_bytes`.

What is kept, in this order: the keys the runtime knows (`current_room`, `battery`) when they
have their contract's shape; the device's own `observations`, newest kinds first; then the other
keys, smallest first (ties by name), each whole or not at all. A value is never cut: a text
stays the text the device sent (Korean included), and the JSON stays JSON. The same context and
budget always give the same result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_common import jsonx

KNOWN = ("current_room", "battery")  # P/device/context's contract (edge/channel/topics.py)
OBSERVATIONS = "observations"
ROOM_MAX_CHARS = 64  # DeviceContextMsg's bound on current_room


@dataclass(frozen=True)
class Bounded:
    context: dict[str, Any]
    dropped: tuple[str, ...]  # keys left out (an observation kind as `observations.<kind>`)
    size: int  # bytes of the kept context's canonical JSON


def _size(value: Any) -> int:
    return len(jsonx.canonical(value))


def _entry(key: str, value: Any) -> int:
    """What a key adds to an object's canonical JSON: `"key":value` and a comma."""
    return _size({key: value}) - 2 + 1


def _known_shape(key: str, value: Any) -> bool:
    if key == "current_room":
        return isinstance(value, str) and len(value) <= ROOM_MAX_CHARS
    if key == "battery":
        return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 100
    return False


def bounded_context(context: dict[str, Any], budget: int) -> Bounded:
    """`context` as it may go to the cloud: at most `budget` bytes of canonical JSON."""
    if _size(context) <= budget:
        return Bounded(context, (), _size(context))
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    room = budget - 2  # the braces
    known = [k for k in KNOWN if k in context and _known_shape(k, context[k])]
    for key in known:
        cost = _entry(key, context[key])
        if cost <= room:
            kept[key] = context[key]
            room -= cost
    observed = context.get(OBSERVATIONS)
    if isinstance(observed, dict) and observed:
        kinds: dict[str, Any] = {}
        empty = _entry(OBSERVATIONS, {}) - 2  # `"observations":{}` less the braces' share
        for kind, entry in observed.items():  # newest first, as the device made it
            cost = _entry(str(kind), entry)
            if empty + 2 + cost <= room:
                kinds[kind] = entry
                empty += cost
            else:
                dropped.append(f"{OBSERVATIONS}.{kind}")
        if kinds:
            kept[OBSERVATIONS] = kinds
            room -= _entry(OBSERVATIONS, kinds)
    rest = [k for k in context if k not in kept and k != OBSERVATIONS]
    for key in sorted(rest, key=lambda k: (_entry(k, context[k]), k)):
        cost = _entry(key, context[key])
        if cost <= room:
            kept[key] = context[key]
            room -= cost
        else:
            dropped.append(key)
    ordered = {k: kept[k] for k in context if k in kept}  # the sender's order
    return Bounded(ordered, tuple(dropped), _size(ordered))
