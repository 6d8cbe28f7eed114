"""CLI commands that change state: ask the running service over `P/admin/request` (it stays the
one writer); only when no service is online do they open the DB for writing themselves."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from a2a_common.clock import SystemClock
from a2a_common.ids import new_ulid
from cache.memory import Memory
from edge.config import Secrets, Settings
from edge.mqtt import no_delay
from edge.outbound import DurableOutbox
from edge.wiring import cloud_client, open_db, replayer_for
from sync.outbox import SyncOutbox
from taskmanager.catalog import load_catalog
from taskmanager.service import TaskManager


class ServiceSilent(Exception):
    """The service said it is online but did not answer in time."""


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
    client.on_socket_open = no_delay
    if settings.mqtt.username:
        client.username_pw_set(settings.mqtt.username, secrets.mqtt_password)
    if settings.mqtt.tls_ca_file:
        client.tls_set(
            ca_certs=settings.mqtt.tls_ca_file,
            certfile=settings.mqtt.tls_cert_file or None,
            keyfile=settings.mqtt.tls_key_file or None,
            cert_reqs=ssl.CERT_REQUIRED,
        )
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
        payload = json.dumps(
            {"request_id": request_id, "command": command, "args": args}, ensure_ascii=False
        )
        client.publish(f"{root}/admin/request", payload, qos=1)
        with cond:
            if not cond.wait_for(lambda: "answer" in seen, timeout_s):
                raise ServiceSilent(f"the service did not answer {command} in {timeout_s:g}s")
            answer: dict[str, Any] = seen["answer"]
            return answer
    finally:
        client.disconnect()
        client.loop_stop()


def cancel_offline(settings: Settings, workflow_id: str) -> dict[str, Any]:
    """No service runs: cancel in the DB; the task cancels go out when the service next runs."""
    clock = SystemClock()
    db = open_db(settings)
    try:
        tm = TaskManager(
            db=db,
            clock=clock,
            catalog=load_catalog(settings.taskmanager.catalog_file),
            outbound=DurableOutbox(db=db, clock=clock),
            topic_root=settings.topic_root,
        )
        tm.reload()
        result = tm.cancel(workflow_id, "user")
        if result.ignored:
            return {"ok": False, "error": f"no active workflow {workflow_id}"}
        return {"ok": True, "result": {"cancelled": [w.workflow_id for w in result.finished]}}
    finally:
        db.close()


def replay_offline(
    settings: Settings,
    secrets: Secrets,
    *,
    requeue_dead: bool,
    progress: Callable[[int, int], None],
) -> dict[str, Any]:
    """No service runs: replay from this process (three tries per batch, then give up)."""
    from cloud_client.errors import CloudUnavailable
    from edge.policies import memory_policy

    clock = SystemClock()
    db = open_db(settings)
    outbox = SyncOutbox(db=db, clock=clock)
    cloud = cloud_client(settings, secrets)
    memory = Memory(db=db, clock=clock, policy=memory_policy(settings))
    replayer = replayer_for(
        settings, db=db, clock=clock, memory=memory, outbox=outbox, cloud=cloud, max_backoff_s=2.0
    )

    async def go() -> dict[str, Any]:
        try:
            requeued = 0
            if requeue_dead:
                with db.atomic():
                    requeued = outbox.requeue_dead()
            try:
                sent = await replayer.drain(attempts=3, progress=progress)
                error = None
            except CloudUnavailable as exc:
                sent, error = 0, str(exc)
            result = {
                "sent": sent,
                "pending": outbox.pending(),
                "requeued": requeued,
                "dead": outbox.dead_count(),
            }
            return {"ok": error is None, "result": result, **({"error": error} if error else {})}
        finally:
            await cloud.aclose()

    try:
        return asyncio.run(go())
    finally:
        db.close()


def memory_offline(settings: Settings, command: str, args: dict[str, Any]) -> dict[str, Any]:
    """No service runs: forget or revoke in the DB directly (then checkpoint the WAL)."""
    from edge.memory_ops import MemoryOps
    from edge.policies import memory_policy

    clock = SystemClock()
    db = open_db(settings)
    try:
        ops = MemoryOps(
            db=db,
            memory=Memory(db=db, clock=clock, policy=memory_policy(settings)),
            sync_outbox=SyncOutbox(db=db, clock=clock),
            clock=clock,
        )
        with db.atomic():
            if command == "memory.forget":
                result: dict[str, Any] = {"removed": ops.forget(args["scope"], args.get("id"))}
            else:
                result = ops.revoke(args["key"])
        ops.checkpoint()
        return {"ok": True, "result": result}
    finally:
        db.close()
