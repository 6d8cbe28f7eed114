"""JSON the way the contract wants it: UTF-8 text kept as is, canonical where bytes count."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def canonical(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the bytes the snapshot budget is measured in."""
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    ).encode("utf-8")
