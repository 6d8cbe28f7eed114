"""The turns answered `error` when the state DB was removed or replaced under the service
(edge/runtime/executor.py `_state_lost`), kept in a file beside it: a DB put back from a backup may
hold those turns as taken in and unanswered, and the next start's recovery then answers them
with the same body again (SPEC §2.4: a turn answered twice gets the same payload), not a
second, different `interrupted`."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)
NAME = "answered-at-loss.json"


def keep(state_dir: Path, turn_ids: list[str]) -> None:
    """Best effort (the state dir may be gone too): written whole, then renamed into place."""
    path = state_dir / NAME
    part = path.with_name(NAME + ".part")
    try:
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"turn_ids": sorted(set(turn_ids) | taken(state_dir))}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, path)
    except OSError as exc:
        log.warning("turns answered at the loss not kept for the next start: %s", exc)


def taken(state_dir: Path) -> set[str]:
    """The turn ids a previous run answered at a loss; empty when none (or unreadable)."""
    try:
        data = json.loads((state_dir / NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        log.warning("%s unreadable, ignored: %s", NAME, exc)
        return set()
    ids = data.get("turn_ids") if isinstance(data, dict) else None
    return {t for t in ids if isinstance(t, str)} if isinstance(ids, list) else set()


def done(state_dir: Path) -> None:
    """Once the recovery that used them committed."""
    try:
        (state_dir / NAME).unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("%s not removed: %s", NAME, exc)
