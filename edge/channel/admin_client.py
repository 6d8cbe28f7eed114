"""The client side of `P/admin/request`: a command for the running service, sent over MQTT
with a deadline, and its answer (SPEC §2.4). The CLI's changes (edge/cli/change.py) and the
console's cancel (edge/console/live.py) both ask through it; the service stays the one writer."""

from __future__ import annotations

import json
import math
import os
import threading
from datetime import timedelta
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from a2a_common.clock import Clock, iso
from a2a_common.ids import new_ulid
from edge.channel.mqtt import secure
from edge.channel.topics import EXPIRY_GRACE_S
from edge.config.errors import ServiceSilent
from edge.config.settings import Secrets, Settings
from edge.host.clock import runtime_clock


def ask_service(
    settings: Settings,
    secrets: Secrets,
    command: str,
    args: dict[str, Any],
    timeout_s: float = 5.0,
    clock: Clock | None = None,
) -> dict[str, Any] | None:
    """The service's answer, or None when no service is online on the broker. The deadline
    (`expires_at`) is stamped on the clock the service runs on (`runtime_clock`, from the same
    environment: a demo's or a test's offset clock), which judges it: on the real clock, a
    demo days ahead refused every request `expired` (issue 30)."""
    clock = clock if clock is not None else runtime_clock(os.environ)
    root = settings.topic_root
    request_id = new_ulid(clock)
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
        expires_at = iso(clock.now() + timedelta(seconds=timeout_s))
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
