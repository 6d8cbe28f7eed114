"""The console's live side: it follows `P/workflow/event` and `P/runtime/status` on the broker
(read only: it subscribes, never publishes there) and wakes the page's event streams; and it
sends the one write the page has, a cancel, to the service over `P/admin/request`.

What goes to the page is only *that* something changed (which workflow, which status word):
the page then reads the state DB's view again, where the privacy policy is applied. A broker
that is down or goes away is retried by paho; the page says the console is not following."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from edge.channel.mqtt import secure
from edge.config.errors import ServiceSilent
from edge.config.settings import Secrets, Settings

log = logging.getLogger(__name__)
ID_MAX = 200  # a workflow id longer than this is not one of ours


class Changes:
    """A change counter the event streams wait on; `last` describes the newest change."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.seq = 0
        self.last: dict[str, Any] = {}
        self.following = False
        self.service: str = "unknown"

    def bump(self, what: dict[str, Any]) -> None:
        with self._cond:
            self.seq += 1
            self.last = what
            self._cond.notify_all()

    def wait(self, seen: int, timeout_s: float) -> int:
        """The counter once it moved past `seen`, or after `timeout_s` whatever it is."""
        with self._cond:
            self._cond.wait_for(lambda: self.seq != seen, timeout_s)
            return self.seq


def _change_of(topic: str, payload: bytes) -> dict[str, Any] | None:
    """Ids and status words of an event — never its payload's other fields."""
    try:
        body = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    if topic.endswith("/runtime/status"):
        state = body.get("state")
        return {"what": "status", "state": state if isinstance(state, str) else "unknown"}
    wf, status = body.get("workflow_id"), body.get("status")
    if not isinstance(wf, str) or len(wf) > ID_MAX:
        return None
    return {"what": "workflow", "workflow_id": wf, "status": str(status)[:40]}


class Follower:
    """One MQTT connection for the console's lifetime."""

    def __init__(self, settings: Settings, secrets: Secrets, changes: Changes) -> None:
        self._root = settings.topic_root
        self._changes = changes
        self._client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            protocol=MQTTProtocolVersion.MQTTv5
            if settings.mqtt.protocol == "5"
            else MQTTProtocolVersion.MQTTv311,
        )
        self._client.suppress_exceptions = True
        self._client.reconnect_delay_set(1, 5)
        self._client.on_connect = self._on_connect
        self._client.on_disconnect = self._on_disconnect
        self._client.on_message = self._on_message
        secure(self._client, settings.mqtt, secrets.mqtt_password)
        self._host, self._port = settings.mqtt.host, settings.mqtt.port

    def start(self) -> None:
        self._client.connect_async(self._host, self._port, keepalive=30)
        self._client.loop_start()

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def _on_connect(self, client: paho.Client, _u: Any, _f: Any, rc: Any, _p: Any = None) -> None:
        if getattr(rc, "is_failure", False):
            return
        client.subscribe([(f"{self._root}/workflow/event", 1), (f"{self._root}/runtime/status", 1)])
        self._changes.following = True
        self._changes.bump({"what": "console", "following": True})

    def _on_disconnect(self, _c: paho.Client, _u: Any, _f: Any, _rc: Any, _p: Any = None) -> None:
        self._changes.following = False
        self._changes.bump({"what": "console", "following": False})

    def _on_message(self, _c: paho.Client, _u: Any, msg: paho.MQTTMessage) -> None:
        change = _change_of(msg.topic, bytes(msg.payload))
        if change is None:
            return
        if change["what"] == "status":
            self._changes.service = change["state"]
        self._changes.bump(change)


class Canceller:
    """The page's one write, through the service (it stays the one writer): one at a time."""

    def __init__(self, settings: Settings, secrets: Secrets) -> None:
        self._settings, self._secrets = settings, secrets
        self._busy = threading.Lock()

    def cancel(self, workflow_id: str) -> tuple[int, dict[str, Any]]:
        """(HTTP status, answer): 200 with the service's answer, 409 for no such active
        workflow, 429 while another cancel is on its way, 503 when no service answers."""
        from edge.channel import admin_client

        if not self._busy.acquire(blocking=False):
            return 429, {"ok": False, "error": "another cancel is on its way"}
        try:
            answer = admin_client.ask_service(
                self._settings, self._secrets, "workflow.cancel", {"workflow_id": workflow_id}
            )
        except ServiceSilent as exc:
            return 504, {"ok": False, "error": str(exc)}
        finally:
            self._busy.release()
        if answer is None:
            return 503, {"ok": False, "error": "the service is not running: nothing was changed"}
        if answer.get("ok") and not answer.get("result", {}).get("cancelled"):
            return 409, {"ok": False, "error": f"no active workflow {workflow_id}"}
        return (200 if answer.get("ok") else 409), answer
