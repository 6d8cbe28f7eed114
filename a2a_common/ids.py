"""Sortable unique ids (ULID text form), monotonic within one process.

A ULID is 48 bits of milliseconds and 80 random bits in Crockford base32; ids made in the same
millisecond increment the random part, so sorting by id is sorting by creation.
"""

from __future__ import annotations

import secrets
import threading
from datetime import datetime

from a2a_common.clock import Clock

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last: list[int] = [0, 0]


def _encode(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_ulid(clock: Clock) -> str:
    millis = int(clock.now().timestamp() * 1000)
    with _lock:
        last_ms, last_rand = _last
        if millis <= last_ms:
            millis, rand = last_ms, last_rand + 1
        else:
            rand = secrets.randbits(80)
        _last[0], _last[1] = millis, rand
    return _encode(millis, 10) + _encode(rand & ((1 << 80) - 1), 16)


def ulid_floor(when: datetime) -> str:
    """The smallest ULID of `when`'s millisecond: every id made before it sorts below it."""
    return _encode(int(when.timestamp() * 1000), 10) + _ALPHABET[0] * 16


def new_id(prefix: str, clock: Clock) -> str:
    return f"{prefix}-{new_ulid(clock).lower()}"
