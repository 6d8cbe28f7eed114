"""`DeviceAgent`: the MQTT side of a device agent (SPEC §2, §2.1, §2.2, §2.4), so a device team
writes only what its device does.

Threads, and why: paho's network thread runs none of a team's code, so nothing a team writes
can stall or kill it (Mosquitto stops sending after 20 unacknowledged messages). It keeps the
subscriptions itself — the SUBSCRIBE must leave in the CONNACK callback, before paho re-sends
the callbacks it kept while disconnected: a COMPLETED that reached the runtime first would have
it send the next command to a session without subscriptions, and that command would be lost —
and hands every message to one dispatcher thread. The dispatcher takes inbound messages one at
a time, in arrival order — dedupe, the RUNNING sent on receipt, a cancel after its command —
and runs handlers and cancel hooks on a small pool the agent owns, so a handler that blocks for
the whole task delays neither the next command nor the ack of another.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from a2a_agent.presence import Presence, new_boot_id
from a2a_agent.session import Subscriptions
from a2a_agent.task import STOPPING, Refusal, Task

log = logging.getLogger("a2a_agent")

Handler = Callable[[Task], object]  # what it returns is ignored
RefusalHook = Callable[[Refusal, Task | None], None]
InboundHook = Callable[[str, dict[str, Any], Task | None], None]
ConnectHook = Callable[[bool], None]
ANY = "*"


@dataclass(frozen=True)
class _Route:
    handler: Handler
    on_cancel: Handler | None
    evidence: frozenset[str] | None
    inline: bool


def _no_delay(_client: paho.Client, _userdata: Any, sock: Any) -> None:
    """Nagle off: a PUBACK then a PUBLISH would otherwise wait ~40 ms for a delayed ACK."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class DeviceAgent:
    """Serves the capabilities registered with `handle()` for the robot whose topic root is
    `root` (`P = <topic_prefix>/<device_id>`, e.g. `a2a/robot-001`).

    `client_id` names the persistent session (MQTT 5 clean_start=false with
    `session_expiry_s`, or 3.1.1 clean_session=false): commands sent while the agent restarts
    wait in the broker. `auto_running` sends RUNNING the moment a command arrives, well within
    its `ack_deadline`; turn it off to send RUNNING yourself. Commands past their `deadline`
    are dropped (`drop_expired`; MQTT 3.1.1 brokers keep them), never a `safe_stop` one.
    `history` bounds how many ended tasks are remembered for dedupe. `name` goes in every
    callback as `agent` (default: `client_id`), so `a2a-edge workflows trace` says which agent
    answered.
    """

    def __init__(
        self,
        root: str,
        *,
        client_id: str,
        host: str = "127.0.0.1",
        port: int = 1883,
        protocol: str = "5",
        session_expiry_s: int = 86400,
        keepalive_s: int = 10,
        reconnect_max_s: float = 5.0,
        tls: tuple[str, str | None, str | None] | None = None,
        auth: tuple[str, str | None] | None = None,
        auto_running: bool = True,
        drop_expired: bool = True,
        workers: int = 4,
        history: int = 1000,
        on_refusal: RefusalHook | None = None,
        on_inbound: InboundHook | None = None,
        on_connect: ConnectHook | None = None,
        clock: Callable[[], datetime] = _utcnow,
        name: str | None = None,
        presence: Iterable[str] | None = None,
    ) -> None:
        self.root = root.rstrip("/")
        self.name = name or client_id
        # SPEC 4.8: the capabilities whose retained status this agent keeps (None: those it
        # handles, named at start(); `"*"` names none); a new boot id per process start
        self._presence_caps = None if presence is None else list(presence)
        self._presence_args = (client_id, host, port, keepalive_s, protocol, tls, auth)
        self.boot_id = new_boot_id()
        self._presence: Presence | None = None
        self._host, self._port, self._keepalive = host, port, keepalive_s
        self._session_expiry_s = session_expiry_s
        self._auto_running, self._drop_expired = auto_running, drop_expired
        self._history = history
        self._hooks = (on_refusal, on_inbound, on_connect)
        self._clock = clock
        self._lock = threading.RLock()
        self._routes: dict[tuple[str, str], _Route] = {}
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._events: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self._subs = Subscriptions(self.root)  # paho's thread and handle()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="a2a-agent")
        # cancel and refusal hooks never queue behind handlers that block: a stop must not
        # wait for the very work it stops (every worker busy with a long task)
        self._urgent = ThreadPoolExecutor(2, thread_name_prefix="a2a-agent-cancel")
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="a2a-agent-dispatch", daemon=True
        )
        self._client = self._make_client(client_id, protocol, tls, auth, reconnect_max_s)

    def _make_client(
        self,
        client_id: str,
        protocol: str,
        tls: tuple[str, str | None, str | None] | None,
        auth: tuple[str, str | None] | None,
        reconnect_max_s: float,
    ) -> paho.Client:
        v5 = protocol == "5"
        client = paho.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5 if v5 else MQTTProtocolVersion.MQTTv311,
            clean_session=None if v5 else False,
        )
        client.suppress_exceptions = True
        if tls is not None:
            client.tls_set(ca_certs=tls[0], certfile=tls[1], keyfile=tls[2])
        if auth is not None:
            client.username_pw_set(*auth)
        client.reconnect_delay_set(1, max(1, round(reconnect_max_s)))
        client.on_socket_open = _no_delay
        put = self._events.put
        client.on_connect = lambda _c, _u, flags, rc, _p: self._on_connect(flags, rc)
        client.on_subscribe = lambda _c, _u, mid, codes, _p: self._subs.on_suback(mid, codes)
        client.on_disconnect = lambda _c, _u, _f, _rc, _p: self._subs.on_disconnect()
        client.on_message = lambda _c, _u, m: put(("message", m.topic, m.payload, time.monotonic()))
        self._v5 = v5
        return client

    # --- the team's side ----------------------------------------------------------------------
    def handle(
        self,
        capability_id: str,
        operation_id: str,
        handler: Handler,
        *,
        on_cancel: Handler | None = None,
        evidence: Iterable[str] | None = None,
        inline: bool = False,
    ) -> None:
        """Serve `capability_id.operation_id` (`"*"` for any) with `handler(task)`, run on the
        agent's pool once per task_id. The handler may report everything and return, or return
        at once and report later from any thread. `on_cancel(task)` runs when the runtime
        cancels the task; CANCELLED is reported when it returns (not when it raises: the
        runtime then escalates to the capability's safe_stop). `evidence` is the operation's
        `terminal_evidence` allowlist (catalog.json): other keys are dropped before sending.
        `inline` runs a handler that never blocks (it reports at once or hands the work to its
        own thread) on the dispatcher itself, a thread hop sooner; one that blocks there holds
        up every command and cancel behind it."""
        keys = None if evidence is None else frozenset(evidence)
        route = _Route(handler, on_cancel, keys, inline)
        with self._lock:
            self._routes[(capability_id, operation_id)] = route
        if self._subs.connected:
            self._subscribe()

    def start(self, timeout_s: float = 10.0) -> DeviceAgent:
        """Connect and wait until subscribed; raises ConnectionError when the broker refuses
        (bad credentials, an ACL that denies a topic) or cannot be reached in time."""
        if not self._dispatcher.is_alive():
            self._dispatcher.start()
            props = None
            if self._v5:
                props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
                props.SessionExpiryInterval = self._session_expiry_s
            self._client.connect_async(
                self._host,
                self._port,
                self._keepalive,
                clean_start=False if self._v5 else paho.MQTT_CLEAN_START_FIRST_ONLY,
                properties=props,
            )
            self._client.loop_start()
        if not self._subs.ready.wait(timeout_s) or self._subs.refused:
            why = self._subs.refused or f"not connected and subscribed within {timeout_s}s"
            raise ConnectionError(f"device agent {self.root}: {why}")
        self._announce()
        return self

    def _announce(self) -> None:
        """`online` on each capability's status, once the session holds the subscriptions: a
        runtime that sees it may command at once (SPEC 4.8)."""
        if self._presence is None:
            with self._lock:
                named = {capability for capability, _op in self._routes} - {ANY}
            caps = named if self._presence_caps is None else set(self._presence_caps) - {ANY}
            client_id, host, port, keepalive, protocol, tls, auth = self._presence_args
            self._presence = Presence(
                self.root,
                caps,
                client_id=client_id,
                host=host,
                port=port,
                keepalive_s=keepalive,
                protocol=protocol,
                tls=tls,
                auth=auth,
                held=self.held_tasks,
                clock=self._clock,
                boot_id=self.boot_id,
            )
            self._presence.start()
        self._presence.announce()

    def held_tasks(self) -> list[str]:
        """The task ids this process still works on (not ended): its `online` status lists
        them, so a runtime that saw it go away and come back knows they are still its."""
        with self._lock:
            return [task_id for task_id, task in self._tasks.items() if not task.terminal]

    def wait_ready(self, timeout_s: float) -> bool:
        """Until connected with every subscription acknowledged (again after a reconnect
        that lost the session); False when that did not happen within `timeout_s` or the
        broker refused."""
        return self._subs.ready.wait(timeout_s) and self._subs.refused is None

    def __enter__(self) -> DeviceAgent:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect (the session stays for `session_expiry_s`) and stop the threads; handlers
        still running are not waited for. Each capability's status says `offline` first."""
        if self._presence is not None:
            self._presence.stop()
        self._client.disconnect()
        self._client.loop_stop()
        self._events.put(None)
        if self._dispatcher.is_alive():
            self._dispatcher.join(5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._urgent.shutdown(wait=False, cancel_futures=True)

    @property
    def connected(self) -> bool:
        return self._subs.connected

    def task(self, task_id: str) -> Task | None:
        with self._lock:
            return self._tasks.get(task_id)

    def publish_callback(self, body: Mapping[str, Any], capability_id: str | None = None) -> None:
        """Send a callback body as it is, with no `seq` bookkeeping: `Task` reports use it;
        call it yourself only to break the protocol on purpose (tests of the runtime). It goes
        on its capability's own topic, `P/task/callback/<capability_id>` (SPEC §2: the broker's
        ACL lets an agent write only its own): `capability_id`, else that of the task it names;
        the shared `P/task/callback` of the first contract only for a task this agent never
        took."""
        if capability_id is None:
            task = self.task(str(body.get("task_id")))
            capability_id = task.capability_id if task is not None else None
        self.publish(f"task/callback/{capability_id}" if capability_id else "task/callback", body)

    def publish(
        self, kind: str, body: Mapping[str, Any], *, qos: int = 1, retain: bool = False
    ) -> None:
        """Publish JSON on `P/<kind>` (e.g. `device/context`, retained). Thread-safe; while
        disconnected paho keeps QoS 1 messages and sends them on reconnect."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self._client.publish(f"{self.root}/{kind}", data, qos=qos, retain=retain)

    # --- the dispatcher -----------------------------------------------------------------------
    def _dispatch(self) -> None:
        while (event := self._events.get()) is not None:
            try:
                self._take(event)
            except Exception:  # a bug here must not end the agent
                log.exception("device agent: %s not handled", event[0])

    def _take(self, event: tuple[Any, ...]) -> None:
        if event[0] == "message":
            self._take_message(event[1], bytes(event[2]), event[3])
        elif event[0] == "connected":
            self._call(self._hooks[2], event[1])

    # --- the session's subscriptions (paho's thread; a2a_agent.session) ----------------------
    def _on_connect(self, flags: Any, reason: Any) -> None:
        if self._subs.on_connect(flags, reason):
            self._subscribe()
            self._events.put(("connected", bool(flags.session_present)))

    def _wanted(self) -> list[str]:
        with self._lock:
            capabilities = {capability for capability, _op in self._routes}
        names = ["+"] if ANY in capabilities else sorted(capabilities)
        topics = [f"{self.root}/task/{k}/{name}" for name in names for k in ("command", "cancel")]
        return [*topics, f"{self.root}/runtime/error"]

    def _subscribe(self) -> None:
        self._subs.subscribe(self._client, self._wanted())

    def _take_message(self, topic: str, payload: bytes, received_at: float) -> None:
        try:
            body = json.loads(payload.decode("utf-8"))
        except ValueError:
            log.warning("device agent: %s is not JSON; ignored", topic)
            return
        if not isinstance(body, dict):
            log.warning("device agent: %s is not a JSON object; ignored", topic)
        elif topic == f"{self.root}/runtime/error":
            self._take_refusal(body)
        elif topic.startswith(f"{self.root}/task/command/"):
            self._take_command(topic, body, received_at)
        elif topic.startswith(f"{self.root}/task/cancel/"):
            self._take_cancel(body)

    def _take_command(self, topic: str, body: dict[str, Any], received_at: float) -> None:
        task_id = body.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            log.warning("device agent: command without task_id on %s; ignored", topic)
            return
        if self._redelivered(task_id, body):
            return
        body.setdefault("capability_id", topic.rsplit("/", 1)[-1])
        capability = str(body["capability_id"])  # its callbacks go to this one's topic
        route = self._route(str(body["capability_id"]), str(body.get("operation_id")))
        task = Task(
            body,
            lock=self._lock,
            send=partial(self.publish_callback, capability_id=capability),
            clock=self._clock,
            evidence_keys=route.evidence if route else None,
            received_at=received_at,
            agent=self.name,
        )
        if self._expired(task, body):
            log.info("device agent: command %s arrived past its deadline; dropped", task_id)
            return
        self._remember(task)
        self._call(self._hooks[1], "command", body, task)
        if self._auto_running:
            task.running()
        if route is None:
            task.failed("unsupported_operation")
        elif route.inline:
            self._run(route.handler, task)
        else:
            self._pool.submit(self._run, route.handler, task)

    def _expired(self, task: Task, body: dict[str, Any]) -> bool:
        """A command past its `deadline` is stale (SPEC 4.2; 3.1.1 brokers keep them); a
        `safe_stop` command never expires: a stop is always carried out."""
        if not self._drop_expired or body.get("safe_stop") is True or task.deadline is None:
            return False
        return task.deadline <= self._clock()

    def _redelivered(self, task_id: str, body: dict[str, Any]) -> bool:
        """A command seen before (same task_id; a re-dispatch has a higher `attempt`) is not
        executed again: its latest callback goes out once more, in case the runtime lost it."""
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return False
            task.deliveries += 1
            attempt = body.get("attempt")
            if isinstance(attempt, int) and attempt > task.attempt:
                task.attempt = attempt
            if task.last is not None:
                self.publish_callback(task.last, task.capability_id)
        self._call(self._hooks[1], "command", body, task)
        return True

    def _remember(self, task: Task) -> None:
        with self._lock:
            self._tasks[task.task_id] = task
            if len(self._tasks) > self._history:
                ended = [t for t, known in self._tasks.items() if known.terminal]
                for task_id in ended[: len(self._tasks) - self._history]:
                    del self._tasks[task_id]

    def _route(self, capability_id: str, operation_id: str) -> _Route | None:
        with self._lock:
            for key in ((capability_id, operation_id), (capability_id, ANY), (ANY, ANY)):
                if key in self._routes:
                    return self._routes[key]
        return None

    def _run(self, handler: Handler, task: Task) -> None:
        try:
            handler(task)
        except Exception as exc:
            # the message may carry what the device saw: it stays in the local log
            log.exception("handler of %s raised", task.task_id)
            task.failed(f"handler_error:{type(exc).__name__}")

    def _take_cancel(self, body: dict[str, Any]) -> None:
        task = self.task(str(body.get("task_id")))
        self._call(self._hooks[1], "cancel", body, task)
        if task is None:
            log.info("device agent: cancel for unknown task %s", body.get("task_id"))
            return
        with self._lock:
            if task.terminal or task.cancel_requested:
                if task.last is not None and task.terminal:
                    self.publish_callback(task.last, task.capability_id)  # the end it missed
                return
            reason = body.get("reason")
            task._request_cancel(reason if isinstance(reason, str) else None)
        route = self._route(task.capability_id, task.operation_id)
        self._urgent.submit(self._cancel, route.on_cancel if route else None, task)

    def _cancel(self, hook: Handler | None, task: Task) -> None:
        if hook is not None:
            try:
                hook(task)
            except Exception:
                log.exception("cancel hook of %s raised: CANCELLED not reported", task.task_id)
                return
        task.cancelled()

    def _take_refusal(self, body: dict[str, Any]) -> None:
        """A refusal of a callback: `ref` names the task and seq (SPEC §2.4). One without `ref`
        (older runtimes) may be any agent's; it is passed on with no task."""
        topic = body.get("topic")
        if not isinstance(topic, str) or not self._callback_topic(topic):
            return
        ref = body.get("ref") if isinstance(body.get("ref"), dict) else None
        task_id = ref.get("task_id") if ref else None
        task = self.task(task_id) if isinstance(task_id, str) else None
        if ref is not None and task is None:
            return  # another agent's task
        seq = ref.get("seq") if ref else None
        refusal = Refusal(
            error=str(body.get("error", "")),
            detail=str(body.get("detail", "")),
            task_id=task_id if isinstance(task_id, str) else None,
            seq=seq if isinstance(seq, int) else None,
            body=body,
        )
        log.warning("device agent: callback refused: %s (%s)", refusal.error, refusal.detail)
        if task is not None:
            with self._lock:
                task.refusals.append(refusal)
            if self._stops(refusal, task, topic) and task._stop(refusal.error):
                route = self._route(task.capability_id, task.operation_id)  # stop the device
                self._urgent.submit(self._cancel, route.on_cancel if route else None, task)
        if self._hooks[0] is not None:
            self._urgent.submit(self._call, self._hooks[0], refusal, task)

    def _stops(self, refusal: Refusal, task: Task, topic: str) -> bool:
        """A `STOPPING` refusal of a callback this agent sent for the task (its own topic, a
        seq it used): another client's forged callback never stops the real task."""
        own = topic == f"{self.root}/task/callback/{task.capability_id}"
        sent = refusal.seq is not None and 1 <= refusal.seq <= task.seq
        return refusal.error in STOPPING and own and sent

    def _callback_topic(self, topic: str) -> bool:
        """One of the callback topics this agent writes: the shared one, or its own
        capabilities' (`+` served: any capability's)."""
        shared = f"{self.root}/task/callback"
        if topic == shared:
            return True
        if not topic.startswith(shared + "/"):
            return False
        with self._lock:
            capabilities = {capability for capability, _op in self._routes}
        return ANY in capabilities or topic[len(shared) + 1 :] in capabilities

    def _call(self, hook: Callable[..., None] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("device agent hook %r raised", hook)
