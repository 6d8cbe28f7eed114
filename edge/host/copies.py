"""The copies of the state DB the runtime keeps beside it (SPEC §5.5 "the state DB file"):
every file under `<state_dir>/backups/` — the pre-migration backups (`state-v<N>-<UTC>Z.db`,
and the `.state-v….tmp` a crash in the middle of one may leave), and whatever else is there (an
operator's copy put there by hand: `backups/` is the runtime's, a copy to keep goes outside the
state dir, and `a2a-edge db backup` refuses to write inside it) — and the WALs set aside after
a fault (`state.db-wal.orphaned-<time>`, edge/host/statefiles.py). Each holds the user's words
as they were when it was made, so none outlives what it copied:

- a forget (any scope) removes them all: a copy cannot be trusted to be rewritten with the same
  forget applied (an older schema; a WAL of raw pages is not a database), and one kept would
  hold the forgotten text after the forget returned;
- retention and the 30-day cap likewise: a retention pass that removed anything from the state
  DB removes every copy made before it (a copy holds what was just removed);
- whatever happens, a copy older than `storage.backup_keep_days` (default 7) goes.

Removing is `unlink` (the runtime keeps no other name of them); the ages come from the names
(the injected clock decides, not the files' times): a file whose name has no time in it goes
at the next forget or retention pass that removed anything, not by age.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from a2a_common.clock import Clock

log = logging.getLogger(__name__)

BACKUPS = "backups"
_BACKUP = re.compile(r"^state-v\d+-(\d{8}T\d{6})Z\.db$")
_ORPHANED = re.compile(r"^state\.db-wal\.orphaned-(\d{8}T\d{6})(Z?)$")


@dataclass(frozen=True)
class Copy:
    path: Path
    made: datetime | None  # None: a temporary file, no time in its name


def _files(directory: Path) -> list[Path]:
    """Every file under `directory` (sub-directories too; symbolic links are not followed,
    a link itself is a file to remove); none when it is not there."""

    def raised(exc: OSError) -> None:
        raise exc

    if not directory.is_dir():
        return []
    found = []
    for root, _dirs, names in os.walk(directory, onerror=raised):
        found += [Path(root) / name for name in names]
    return sorted(found)


def _stamp(text: str, utc: bool) -> datetime | None:
    try:
        when = datetime.strptime(text, "%Y%m%dT%H%M%S")
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if utc else when.astimezone(UTC)  # old names: local time


class Copies:
    def __init__(self, state_dir: Path, clock: Clock, keep_days: int) -> None:
        self.state_dir = state_dir
        self._clock = clock
        self._keep = timedelta(days=keep_days)

    def listing(self) -> list[Copy]:
        """The copies there are; a directory that cannot be read is logged, never raised (a
        forget or a retention pass is not refused for it; the next one tries again)."""
        found: list[Copy] = []
        backups = self.state_dir / BACKUPS
        try:
            for path in _files(backups):
                match = _BACKUP.match(path.name) if path.parent == backups else None
                found.append(Copy(path, _stamp(match[1], True) if match else None))
            for path in sorted(self.state_dir.glob("state.db-wal.orphaned-*")):
                if match := _ORPHANED.match(path.name):
                    found.append(Copy(path, _stamp(match[1], bool(match[2]))))
        except OSError as exc:
            log.error("could not list the copies of the state DB: %s", exc.strerror or exc)
        return found

    def forgotten(self) -> int:
        """After a forget: every copy goes. Returns how many."""
        return self._remove(self.listing(), "a forget")

    def outlived(self, removed_anything: bool) -> int:
        """After a retention pass: every copy when it removed anything from the state DB,
        else those older than `storage.backup_keep_days`. Returns how many."""
        copies = self.listing()
        if removed_anything:
            return self._remove(copies, "retention removed what it holds")
        horizon = self._clock.now().astimezone(UTC) - self._keep
        old = [c for c in copies if c.made is not None and c.made < horizon]
        return self._remove(old, f"older than {self._keep.days} days")

    def _remove(self, copies: list[Copy], why: str) -> int:
        gone = 0
        for copy in copies:
            try:
                copy.path.unlink(missing_ok=True)
            except OSError as exc:  # said, and tried again at the next forget or pass
                log.error("could not remove %s (%s): %s", copy.path, why, exc.strerror or exc)
                continue
            gone += 1
            log.info("removed %s (%s)", copy.path, why)
        return gone
