"""The memory cache as the sync replayer's sink: cloud answers land in the cache's tiers and
sync position, validated at this boundary."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from a2a_common.people import HOUSEHOLD
from cache import Memory, SyncPosition
from cloud_client import SyncUpdates
from sync import Pending, Position

log = logging.getLogger(__name__)


class MemorySyncSink:
    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    def sync_position(self) -> Position:
        current = self._memory.sync_position()
        return Position(current.cursor, current.version)

    def adopt_sync(self, position: Position, *, force: bool) -> None:
        self._memory.adopt_sync(SyncPosition(position.cursor, position.version), force=force)

    def apply_updates(self, updates: dict[str, Any]) -> None:
        try:
            valid = SyncUpdates.model_validate(updates)
        except ValidationError as exc:
            err = exc.errors()[0]
            log.error("sync updates refused at %s: %s", ".".join(map(str, err["loc"])), err["msg"])
            return
        counts = self._memory.tiers.apply_updates(valid.model_dump(mode="json"))
        log.info("sync updates applied: %s", counts)

    def withheld(self, writes: list[Pending]) -> list[str]:
        """Writes whose text the privacy policy keeps on the device: a pair whose categories
        (as they are now: a later candidate may have made it sensitive) are not syncable, a
        profile write of such a category, and any write naming a category in its payload."""
        privacy, out = self._memory.policy.privacy, []
        for write in writes:
            payload = write.payload
            # whose text it is: under that person's consent (SPEC 5.7), the household's else
            consented = self._memory.consented(str(payload.get("person_id") or HOUSEHOLD))
            cats = [payload.get("category")] if payload.get("category") else []
            if isinstance(payload.get("categories"), list):
                cats += payload["categories"]
            if write.kind == "short_term_pair":
                cats += self._memory.labels.of_pair(str(payload.get("pair_id")))
            elif write.kind in ("profile_candidate", "profile_confirmed"):
                cats += self._memory.labels.of_item(str(payload.get("item_id")))
            if any(isinstance(c, str) for c in cats) and privacy.withheld(
                [c for c in cats if isinstance(c, str)], consented
            ):
                out.append(write.write_id)
        return out

    def acked(self, writes: list[Pending]) -> None:
        pairs = [str(w.payload.get("pair_id")) for w in writes if w.kind == "short_term_pair"]
        if pairs:
            self._memory.store.mark_synced(pairs)
