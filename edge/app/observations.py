"""Semantic observations at the device's edge (SPEC §4.6): what `P/observation` may cost, and the
latest value of each kind that the next turn carries in `device_context.observations`.

- A flood is bounded per kind: a token bucket of `[experience] observations_per_s` (burst twice
  that); past it an observation is refused `rate_limited` (with `ref`), nothing is written.
- An observation whose id was taken lately (or is the stored latest of its kind) is a repeat:
  applied once, silently, like any redelivered message.
- The latest value per kind is kept in the state DB (`observations` in the cache's state table),
  at most `observation_kinds` kinds (the least recently observed goes); an observation older than
  the stored one, or more than 5 s ahead of the clock, does not replace it. A turn carries the
  kinds observed within `TURN_MAX_AGE_S`, newest first.
- What goes to the cloud is screened (SPEC §5.5): a string in an observation's value or scope
  whose text the lexicon labels with a sensitive or a `share = false` category is left out (a
  whole string value, a key of an object, an item of a list); the other values go as they are.
  Consent does not lift it: an observation is the device's reading, not a memory the user chose
  to share. The device keeps the observation as it came; a WARNING (once per observation, the
  kind and the categories, never the text) says what was withheld.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from a2a_common.clock import Clock, iso, parse_iso
from cache import PrivacyPolicy

log = logging.getLogger("edge.app.observations")

STATE_KEY = "observations"
RECENT_IDS = 1024
TURN_MAX_AGE_S = 600.0
FUTURE_S = 5.0


_GONE = object()


def _screen(value: Any, blocked: Callable[[str], list[str]], found: set[str]) -> Any:
    """`value` without its blocked strings (`_GONE` when it is one); `found` gets their
    categories."""
    if isinstance(value, str):
        cats = blocked(value)
        found.update(cats)
        return _GONE if cats else value
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            kept = _screen(item, blocked, found)
            if kept is not _GONE and _screen(str(key), blocked, found) is not _GONE:
                out[key] = kept
        return out
    if isinstance(value, list):
        return [k for k in (_screen(v, blocked, found) for v in value) if k is not _GONE]
    return value


def blocked_by(privacy: PrivacyPolicy) -> Callable[[str], list[str]]:
    """The categories of a text that keep it from the cloud: sensitive or `share = false`."""

    def blocked(text: str) -> list[str]:
        return [
            c for c in privacy.categorize(text) if privacy.is_sensitive(c) or not privacy.shared(c)
        ]

    return blocked


@dataclass
class _Bucket:
    tokens: float
    at: float


class ObservationGate:
    def __init__(
        self,
        *,
        clock: Clock,
        per_s: float,
        kinds: int,
        latest: dict[str, Any],
        privacy: Callable[[], PrivacyPolicy] = PrivacyPolicy,
    ) -> None:
        self._clock = clock
        self._privacy = privacy
        self._warned: OrderedDict[str, None] = OrderedDict()
        self._per_s = per_s
        self._kinds = kinds
        self._buckets: dict[str, _Bucket] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()
        self.latest: dict[str, Any] = dict(latest)

    def allow(self, kind: str) -> bool:
        """One token of the kind's bucket, if there is one."""
        now = self._clock.monotonic()
        burst = 2 * self._per_s
        bucket = self._buckets.setdefault(kind, _Bucket(burst, now))
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.at) * self._per_s)
        bucket.at = now
        if len(self._buckets) > 4 * self._kinds:  # kinds are the sender's words: bounded too
            self._buckets = {kind: bucket}
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def repeat(self, kind: str, observation_id: str) -> bool:
        known = self.latest.get(kind, {}).get("observation_id") == observation_id
        return known or observation_id in self._recent

    def remember(self, observation_id: str) -> None:
        self._recent[observation_id] = None
        while len(self._recent) > RECENT_IDS:
            self._recent.popitem(last=False)

    def newer(
        self, kind: str, observation_id: str, observed_at: datetime, entry: dict[str, Any]
    ) -> dict[str, Any] | None:
        """The latest values with this one in, or None when it does not replace the stored."""
        if (observed_at - self._clock.now()).total_seconds() > FUTURE_S:
            return None
        held = self.latest.get(kind)
        if held is not None and parse_iso(held["observed_at"]) >= observed_at:
            return None
        fresh = {k: v for k, v in self.latest.items() if k != kind}
        fresh[kind] = {"observation_id": observation_id, "observed_at": iso(observed_at), **entry}
        while len(fresh) > self._kinds:
            oldest = min(fresh, key=lambda k: str(fresh[k]["observed_at"]))
            fresh.pop(oldest)
        return fresh

    def for_turn(self) -> dict[str, Any]:
        """`device_context.observations`: kind -> {value, scope, observed_at}, recent ones."""
        now = self._clock.now()
        recent = [
            (kind, entry)
            for kind, entry in self.latest.items()
            if (now - parse_iso(entry["observed_at"])).total_seconds() <= TURN_MAX_AGE_S
        ]
        recent.sort(key=lambda item: str(item[1]["observed_at"]), reverse=True)
        blocked = blocked_by(self._privacy())
        return {kind: self._screened(kind, entry, blocked) for kind, entry in recent}

    def _screened(
        self, kind: str, entry: dict[str, Any], blocked: Callable[[str], list[str]]
    ) -> dict[str, Any]:
        found: set[str] = set()
        out: dict[str, Any] = {}
        for k in ("value", "scope", "observed_at"):
            if k in entry:
                kept = entry[k] if k == "observed_at" else _screen(entry[k], blocked, found)
                if kept is not _GONE:
                    out[k] = kept
        said = str(entry.get("observation_id"))
        if found and said not in self._warned:
            self._warned[said] = None
            while len(self._warned) > RECENT_IDS:
                self._warned.popitem(last=False)
            cats = ", ".join(sorted(found))
            log.warning("observation of kind %r: text withheld from the cloud (%s)", kind, cats)
        return out
