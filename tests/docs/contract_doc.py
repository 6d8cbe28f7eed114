"""docs/contract.md as data: each fenced ```json example with the `<!-- check: … -->` comments
above it (what it must agree with), and the section numbers its headings carry. Shared by the
static test (tests/docs/test_contract_doc.py) and the real run
(tests/e2e/test_run_it_yourself.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "docs" / "contract.md"
_BLOCK = re.compile(r"((?:<!-- check: [^\n]*-->\n)*)```json\n(.*?)^```", re.M | re.S)
_CHECK = re.compile(r"<!-- check: (\S+) ?([^\n]*?) ?-->")
_HEADING = re.compile(r"^#{2,3} §(\d+(?:\.\d+)?) ", re.M)


@dataclass(frozen=True)
class Check:
    kind: str  # model | emitted | columns | none
    target: str  # a dotted model, `mqtt:<kind>` / `http:<path>` / `write:<kind>`, a table
    options: dict[str, set[str]]  # optional=a,b / extra=a,b


@dataclass(frozen=True)
class Example:
    line: int
    body: Any
    checks: tuple[Check, ...]


def _check(kind: str, rest: str) -> Check:
    kind = kind.rstrip(":")  # `none: why` reads as a sentence
    words = rest.split()
    target = words[0] if words and kind != "none" else ""
    options = {
        name: set(value.split(","))
        for name, _, value in (w.partition("=") for w in words[1:])
        if kind != "none" and value
    }
    return Check(kind, target, options)


def examples(text: str | None = None) -> list[Example]:
    text = CONTRACT.read_text(encoding="utf-8") if text is None else text
    out = []
    for match in _BLOCK.finditer(text):
        line = text.count("\n", 0, match.start(2)) + 1
        checks = tuple(_check(k, r) for k, r in _CHECK.findall(match.group(1)))
        out.append(Example(line, json.loads(match.group(2)), checks))
    return out


def emitted(target_prefix: str) -> dict[str, tuple[Example, Check]]:
    """The examples checked against what the real process sends, by target."""
    return {
        c.target: (e, c)
        for e in examples()
        for c in e.checks
        if c.kind == "emitted" and c.target.startswith(target_prefix)
    }


def sections() -> set[str]:
    return set(_HEADING.findall(CONTRACT.read_text(encoding="utf-8")))


def key_drift(
    example: Any, real: Any, optional: set[str], where: str = "", free: frozenset[str] = frozenset()
) -> list[str]:
    """Where the documented object and a real one disagree on keys: a real key the page does
    not show, or a shown key the real one lacks (unless `optional`). Nested objects are
    compared too (lists by their first element), except under a `free` key (a free-form
    object: a command's `args`, an admin `result`); values are not."""
    if not isinstance(example, dict) or not isinstance(real, dict):
        return []
    if set(example) == {"…"}:  # "described below"
        return []
    drift = [f"{where}{k}: sent, not documented" for k in real if k not in example]
    drift += [
        f"{where}{k}: documented, not sent" for k in example if k not in real and k not in optional
    ]
    for key in (set(example) & set(real)) - free:
        a, b = example[key], real[key]
        if isinstance(a, list) and isinstance(b, list) and a and b:
            a, b = a[0], b[0]
        drift += key_drift(a, b, optional, f"{where}{key}.", free)
    return drift


def drift_of(example: Example, check: Check, real: Any) -> list[str]:
    """`key_drift` with the check's own `optional=` and `free=` keys."""
    optional = check.options.get("optional", set())
    free = frozenset(check.options.get("free", set()))
    return key_drift(example.body, real, optional, free=free)
