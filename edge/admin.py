"""CLI commands that change state: ask the running service over `P/admin/request` (it stays the
one writer); only when no service is online do they open the DB for writing themselves, through
the same app the service runs."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from a2a_common.clock import SystemClock, iso
from a2a_common.ids import new_ulid
from cloud_client import CloudUnavailable
from edge import statelock
from edge.app import DeviceApp
from edge.config import Secrets, Settings
from edge.errors import ServiceSilent
from edge.mqtt import secure
from edge.repeats import EXPIRY_GRACE_S
from edge.wiring import build_app, open_db


def ask_service(
    settings: Settings, secrets: Secrets, command: str, args: dict[str, Any], timeout_s: float = 5.0
) -> dict[str, Any] | None:
    """The service's answer, or None when no service is online on the broker."""
    root = settings.topic_root
    request_id = new_ulid(SystemClock())
    cond = threading.Condition()
    seen: dict[str, Any] = {}

    def on_message(_c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except ValueError:
            return
        with cond:
            if msg.topic.endswith("/runtime/status"):
                seen["status"] = body.get("state") if isinstance(body, dict) else None
            elif isinstance(body, dict) and body.get("request_id") == request_id:
                seen["answer"] = body
            cond.notify_all()

    client = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        protocol=MQTTProtocolVersion.MQTTv5
        if settings.mqtt.protocol == "5"
        else MQTTProtocolVersion.MQTTv311,
    )
    client.suppress_exceptions = True
    client.on_message = on_message
    secure(client, settings.mqtt, secrets.mqtt_password)
    try:
        client.connect(settings.mqtt.host, settings.mqtt.port, keepalive=10)
    except OSError:
        return None
    client.loop_start()
    try:
        client.subscribe([(f"{root}/runtime/status", 1), (f"{root}/admin/response", 1)])
        with cond:
            cond.wait_for(lambda: "status" in seen, 1.0)
            if seen.get("status") != "online":
                return None
        # a deadline: a request the service takes only after the CLI gave up is refused
        # `expired`, never applied behind a "did not answer" (README, docs/cli.md)
        expires_at = iso(datetime.now(UTC) + timedelta(seconds=timeout_s))
        body = {"request_id": request_id, "command": command, "args": args}
        payload = json.dumps({**body, "expires_at": expires_at}, ensure_ascii=False)
        props = None
        if settings.mqtt.protocol == "5":
            props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
            props.MessageExpiryInterval = math.ceil(timeout_s)
        client.publish(f"{root}/admin/request", payload, qos=1, properties=props)
        with cond:  # the service may take it up to the grace past the deadline: wait for that
            if not cond.wait_for(lambda: "answer" in seen, timeout_s + EXPIRY_GRACE_S + 1):
                raise ServiceSilent(f"the service did not answer {command} in {timeout_s:g}s")
            answer: dict[str, Any] = seen["answer"]
            return answer
    finally:
        client.disconnect()
        client.loop_stop()


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
    clock = SystemClock()
    db = open_db(settings, clock)
    app = build_app(settings, secrets, db=db, clock=clock, live=False, max_backoff_s=2.0)

    async def go() -> dict[str, Any]:
        try:
            app.tm.reload()  # the service does this in `recover`
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
        sent = await app.replayer.drain(attempts=3, progress=progress)
        error = None
    except CloudUnavailable as exc:
        sent, error = 0, str(exc)
    result = {
        "sent": sent,
        "pending": app.sync.pending(),
        "requeued": requeued,
        "dead": app.sync.dead_count(),
    }
    return {"ok": error is None, "result": result, **({"error": error} if error else {})}
