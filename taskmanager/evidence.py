"""The evidence allowlist (SPEC §2.2, §4.5): what of a callback's `evidence` the runtime keeps.

`screen_evidence(operation, raw)` is the one gate, applied on the callback path before anything
is stored, evented, traced or reported: keys outside the operation's `terminal_evidence` are
dropped; values must be bounded scalars (a string of at most 256 characters, a finite number, a
bool), and one of the listed values where the catalog restricts them. Evidence that is not an
object is dropped as a whole; the callback's status still applies (an agent's extra key must not
cost the robot a transition). What was dropped is named by key only — never a value — and only
keys on the allowlist are written down by name: an off-list key is the agent's own string, it
may itself carry data (`systolic_142`), so the trace counts it and the log names it once.

A callback's `reason` is a machine code too (SPEC §4.5, §5.5: traces, events and reports carry
no user words or readings): `screen_reason` keeps it only when it matches `REASON_CODE`
(`path_blocked`, `e.bus:timeout-3`); any other text ("혈압 150 VR2 measured") is replaced by
`agent_reason_withheld` before it is stored, evented or reported, and warned once per
(capability, operation), without the text.

Evidence must agree with the command it answers (SPEC §4.5): a kept key whose catalog entry
names an `arg` (`arrived_room` ↔ `room`, `purifier_mode` ↔ `mode`) contradicts the command when
the command has that argument and the value is another one. Texts are compared as people read
them (a2a_common/text.py: NFC, format characters removed — 안방 composed, decomposed or with a
zero-width space inside is one room); a string is never the number it spells,
`true` is never `1`. A contradicted key is kept (it is an allowlisted scalar, the operator sees
where the robot went) and named in `Screened.contradicted`; what it means is taskmanager/goal.py's.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from a2a_common.text import same_text
from taskmanager.catalog import EvidenceKey, Operation

MAX_TEXT = 256
REASON_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")
REASON_WITHHELD = "agent_reason_withheld"

log = logging.getLogger("taskmanager.evidence")

NOT_AN_OBJECT = "not_an_object"
NOT_ALLOWED = "not_allowed"
NOT_SCALAR = "not_scalar"
TOO_LONG = "too_long"
NOT_FINITE = "not_finite"
VALUE_NOT_ALLOWED = "value_not_allowed"


@dataclass(frozen=True)
class Dropped:
    key: str | None  # None: the evidence as a whole (it was not an object)
    why: str
    listed: bool = False  # the key is on the allowlist: a catalog name, safe to write down


@dataclass(frozen=True)
class Screened:
    kept: dict[str, Any] | None  # None when nothing is left
    dropped: tuple[Dropped, ...] = ()
    contradicted: tuple[str, ...] = ()  # kept keys naming another target than the command's


def _value_fault(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else NOT_FINITE
    if isinstance(value, str):
        return None if len(value) <= MAX_TEXT else TOO_LONG
    return NOT_SCALAR


def _same(a: object, b: object) -> bool:
    """Equal as JSON values: `true` is not `1`, `"1"` is not `1`."""
    return (
        isinstance(a, bool) == isinstance(b, bool)
        and isinstance(a, str) == isinstance(b, str)
        and a == b
    )


def agrees(value: object, commanded: object) -> bool:
    """Evidence `value` names the target the command's argument `commanded` names."""
    if isinstance(value, str) and isinstance(commanded, str):
        return same_text(value, commanded)
    return _same(value, commanded)


def _fault(entry: EvidenceKey, value: object) -> str | None:
    fault = _value_fault(value)
    listed = entry.values is None or any(_same(value, v) for v in entry.values)
    return fault if fault is not None or listed else VALUE_NOT_ALLOWED


def screen_evidence(
    operation: Operation | None, raw: object, args: dict[str, Any] | None = None
) -> Screened:
    """The evidence to keep of `raw` under `operation`'s allowlist (None: an empty list), what
    was dropped and why, and which kept keys contradict the command's `args`."""
    if raw is None:
        return Screened(None)
    if not isinstance(raw, dict):
        return Screened(None, (Dropped(None, NOT_AN_OBJECT),))
    kept: dict[str, Any] = {}
    dropped: list[Dropped] = []
    contradicted: list[str] = []
    for key, value in raw.items():
        entry = operation.evidence_key(key) if operation is not None else None
        if entry is None:
            dropped.append(Dropped(str(key), NOT_ALLOWED))
            continue
        fault = _fault(entry, value)
        if fault is not None:
            dropped.append(Dropped(key, fault, listed=True))
            continue
        kept[key] = value
        if (
            entry.arg is not None
            and args
            and entry.arg in args
            and not agrees(value, args[entry.arg])
        ):
            contradicted.append(key)
    return Screened(kept or None, tuple(dropped), tuple(contradicted))


def dropped_detail(dropped: tuple[Dropped, ...]) -> dict[str, Any]:
    """What a trace row says of dropped evidence: how many, why, and the listed keys by name."""
    return {
        "count": len(dropped),
        "why": dict(sorted(Counter(d.why for d in dropped).items())),
        "keys": sorted({d.key for d in dropped if d.listed and d.key is not None}),
    }


def screen_reason(reason: object) -> str | None:
    """The reason as kept: a machine code as it came, None as None, anything else withheld."""
    if reason is None or (isinstance(reason, str) and REASON_CODE.fullmatch(reason)):
        return reason
    return REASON_WITHHELD


class ReasonWarnings:
    """One WARNING per (capability, operation) whose agent sent a reason that is not a code;
    bounded, and never with the reason's text."""

    def __init__(self, limit: int = 1024) -> None:
        self._said: set[tuple[str, str]] = set()
        self._limit = limit

    def warn(self, task_id: str, operation: Operation | None) -> None:
        said = (operation.capability_id, operation.operation_id) if operation else ("?", "?")
        if said in self._said or len(self._said) >= self._limit:
            return
        self._said.add(said)
        log.warning(
            "task %s: a callback reason of %s.%s is not a code; kept as %s (once per operation)",
            task_id,
            *said,
            REASON_WITHHELD,
        )
