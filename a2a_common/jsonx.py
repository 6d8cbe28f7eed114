"""JSON the way the contract wants it: UTF-8 text kept as is, canonical where bytes count."""

from __future__ import annotations

import json
import math
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the bytes the snapshot budget is measured in."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    ).encode("utf-8")


MAX_DEPTH = 32  # how deep a message may nest: the MQTT gate's cap, and a command's (SPEC 2.4)


def finite(value: Any, depth: int = 0) -> bool:
    """Every number in `value` finite and nothing nested deeper than `MAX_DEPTH`, `value` itself
    sitting `depth` levels down in its message (a command's `args` sit one down). The one rule
    for what comes in (edge/channel/topics.py) and for what the runtime will send
    (taskmanager/validate.py): what it accepts it can also dispatch."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(finite(v, depth + 1) for v in value)
    return True
