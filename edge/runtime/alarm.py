"""The unconfirmed-cancel alarm (SPEC §4.2): while a cancelled task's body has not been
confirmed stopped, `P/runtime/status` and systemd's `STATUS=` say so, until an agent confirms."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)
CHECK_EVERY_S = 0.1  # a scan of a dict of a few entries: cheap, and the alarm shows at once


def alarm_body(task_ids: list[str]) -> dict[str, object]:
    return {"kind": "cancel_unconfirmed", "task_ids": task_ids}


def alarm_line(task_ids: list[str]) -> str:
    return f"ALARM cancel unconfirmed: {' '.join(task_ids)}; " if task_ids else ""


async def watch_alarms(
    current: Callable[[], list[str]], changed: Callable[[list[str]], None]
) -> None:
    """Calls `changed(task_ids)` whenever the set of unconfirmed cancels changes."""
    shown: list[str] = []
    while True:
        await asyncio.sleep(CHECK_EVERY_S)
        now = current()
        if now != shown:
            if now:
                log.error("alarm: cancel not confirmed for %s", " ".join(now))
            else:
                log.warning("alarm cleared: every cancel is confirmed")
            shown = now
            changed(now)
