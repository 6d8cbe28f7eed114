"""CLI commands that change state, when no service is online to ask over `P/admin/request`
(edge/channel/admin_client.py; it stays the one writer): they open the DB for writing
themselves, through the same app the service runs."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from cloud_client import CloudUnavailable
from edge.app.device import DeviceApp
from edge.config.errors import ServiceSilent
from edge.config.settings import Secrets, Settings
from edge.host import statelock
from edge.host.clock import runtime_clock
from edge.wiring import build_app, open_db


def run_offline(
    settings: Settings,
    secrets: Secrets,
    command: str,
    args: dict[str, Any],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """No service answered: this process takes the DB and runs the command through the same
    app the service runs (`DeviceApp.admin`) — only if it can take the state dir's lock, held
    until the DB is closed. A lock held by a service (one that runs but is not reachable over
    MQTT) is `ServiceSilent`: nothing is changed behind a running service. What the command
    owes — task cancels, terminal reports, sync writes — stays in the outboxes for the
    service's next start. A replay sends from here (three tries per batch, then it gives up)."""
    try:
        with statelock.for_cli(settings.state_db_path.parent, command):
            return _run_locked(settings, secrets, command, args, progress)
    except statelock.StateDirLocked as exc:
        if exc.holder.role != statelock.SERVICE:
            why = "(try again when it is done)"
        else:
            broker = f"{settings.mqtt.host}:{settings.mqtt.port}"
            why = f"but did not answer over MQTT (is the broker at {broker} up?)"
        raise ServiceSilent(f"{exc.holder} holds {exc.path} {why}; nothing was changed") from exc


def _run_locked(
    settings: Settings,
    secrets: Secrets,
    command: str,
    args: dict[str, Any],
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    clock = runtime_clock(os.environ)  # the service's clock (a demo's offset clock)
    db = open_db(settings, clock)
    app = build_app(settings, secrets, db=db, clock=clock, live=False, max_backoff_s=2.0)

    async def go() -> dict[str, Any]:
        try:
            app.load()  # the service does this in `recover`
            answer = app.admin(command, args)
            if command == "sync.replay" and answer.get("ok"):
                answer = await _replay(app, answer["result"]["requeued"], progress)
            return answer
        finally:
            await app.close()

    return asyncio.run(go())


async def _replay(
    app: DeviceApp, requeued: int, progress: Callable[[int, int], None] | None
) -> dict[str, Any]:
    try:
        sent = await app.drain_sync(progress)
        error = None
    except CloudUnavailable as exc:
        sent, error = 0, str(exc)
    result = {
        "sent": sent,
        "pending": app.gauges()["sync_outbox"],
        "requeued": requeued,
        "dead": app.gauges()["sync_dead"],
    }
    return {"ok": error is None, "result": result, **({"error": error} if error else {})}
