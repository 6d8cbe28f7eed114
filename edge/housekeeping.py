"""What the runtime keeps only for a while, pruned in bounded batches (edge/runtime.py runs it
at start and every `memory.retention_every_s`)."""

from __future__ import annotations

import logging
from datetime import timedelta

from a2a_common.clock import iso
from edge.app import DeviceApp
from edge.config import Settings

log = logging.getLogger(__name__)


def prune(app: DeviceApp, settings: Settings, limit: int = 500) -> bool:
    """One batch: ended workflows (with their traces), inbound dedupe marks and dead letters
    past their keep. True when it removed something."""
    now = app.clock.now()
    keep_ended = timedelta(days=settings.taskmanager.keep_ended_days)
    keep_marks = timedelta(days=settings.mqtt.dedupe_keep_days)
    keep_dead = timedelta(days=settings.mqtt.dead_letters_keep_days)
    with app.unit():
        workflows = app.tm.store.prune_ended(iso(now - keep_ended), limit)
        marks = app.dedupe.prune(iso(now - keep_marks), limit)
        dead = app.dead_letters.prune(iso(now - keep_dead), limit)
    if workflows or marks:
        log.info("pruned %d ended workflows and %d dedupe marks", workflows, marks)
    if dead:
        log.info("pruned %d inbound dead letters", dead)
    return bool(workflows or marks or dead)
