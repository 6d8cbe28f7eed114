"""Safety does not wait for storage (SPEC §2.4, §4.2; docs/design.md).

While the state DB refuses writes, a PUI press or a `workflow.cancel` is held like every input
(edge/runtime/intake.py), but it also acts at once from what is in memory: the TaskManager
previews the cancel on its board (nothing written), each `task/cancel` goes to its agent
straight through the MQTT client (the durable outbox cannot be written), and the press gets its
`P/pui/result`. The answer is kept (`early`) so that the held press, applied once the DB takes
writes, records and sends that same answer. Held safety inputs go first when storage is back
(the door's front), so nothing started meanwhile. The cancel-confirm windows (taskmanager/
confirm.py) of these cancels and of those already on disk run here too while the DB refuses
writes: a due re-send or `safe_stop` goes out likewise. A held callback that confirms a stop is
seen here, so no stop is commanded for a body already stopped. Sending again once storage is
back is fine: a cancel and a safe stop are idempotent (agents dedupe on `task_id`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import Clock
from edge.channel.mqtt import Inbound
from edge.channel.topics import AdminRequestMsg, PuiEventMsg, TaskCallbackMsg, Topics, parse
from taskmanager import (
    STOP_SUFFIX,
    Board,
    CancelTask,
    Command,
    TaskManager,
    Unconfirmed,
    Watch,
    Workflow,
    confirm_on_due,
    confirm_verdict,
    confirm_watch_for,
)

log = logging.getLogger(__name__)

Send = Callable[[str, bytes], int | None]  # the MQTT client's plain publish; None: no connection
Answered = Callable[[str], dict[str, Any] | None]  # a committed answer of this dedupe key
MAX_BYTES = 65536


class SafetyLane:
    def __init__(
        self,
        *,
        tm: TaskManager,
        topics: Topics,
        clock: Clock,
        send: Send,
        answered: Answered,
        early: dict[str, dict[str, Any]],
    ) -> None:
        self._tm = tm
        self._topics = topics
        self._clock = clock
        self._send = send
        self._answered = answered
        self.early = early  # dedupe key -> the answer given at once (the app records it)
        self._board: Board | None = None  # the board after the cancels acted on, not recorded
        self._watches: dict[str, Watch] = {}  # confirmation windows advanced here
        self._confirmed: set[str] = set()  # stops a held callback confirmed
        self._acted: set[tuple[int, int, float]] = set()
        self.alarms: set[str] = set()
        self.wake = asyncio.Event()

    # --- which inputs ---------------------------------------------------------------------------
    def urgent(self, msg: Inbound) -> bool:
        """A PUI press or a `workflow.cancel`: acted on at once, applied first."""
        kind = self._topics.kind_of(msg.topic)
        return kind == "pui/event" or (
            kind == "admin/request" and b'"workflow.cancel"' in msg.payload
        )

    def covers(self, msg: Inbound, held: Iterable[Inbound]) -> dict[tuple[str, float], str]:
        """A PUI press covers every workflow request that came before it and waits held (the DB
        refused it): cancel-all every one, a named press the one of that id. Such a request is
        never applied as one: it is recorded rejected (`cancelled_by_pui`, docs/design.md).
        (topic, received_at) of each covered request -> the press's event_id."""
        if self._topics.kind_of(msg.topic) != "pui/event":
            return {}
        press = parse(PuiEventMsg, msg.payload, MAX_BYTES)
        if not isinstance(press, PuiEventMsg):
            return {}
        covered = {}
        for request in held:
            if self._topics.kind_of(request.topic) != "workflow/request":
                continue
            workflow_id = _field(request.payload, "workflow_id")
            if press.workflow_id is None or press.workflow_id == workflow_id:
                covered[(request.topic, request.received_at)] = press.event_id
        return covered

    def held(self, msg: Inbound) -> None:
        """A message the DB could not take: act on it when it is a cancel, look at it when it is
        a callback that may confirm a stop. Never raises (the intake holds it all the same)."""
        key = (msg.generation, msg.mid, msg.received_at)
        if key in self._acted:
            return
        self._acted.add(key)
        kind = self._topics.kind_of(msg.topic) or ""
        try:
            if kind == "pui/event":
                self._press(msg.payload)
            elif kind == "admin/request" and self.urgent(msg):
                self._admin_cancel(msg.payload)
            elif kind.startswith("task/callback"):
                self._callback(msg.payload)
        except Exception:  # the held input is applied as usual once the DB takes writes
            log.exception("acting on a held %s from memory failed", kind)
        self.wake.set()

    # --- a press and a cancel -------------------------------------------------------------------
    def _press(self, payload: bytes) -> None:
        msg = parse(PuiEventMsg, payload, MAX_BYTES)
        if not isinstance(msg, PuiEventMsg):
            return  # refused as usual, once the DB takes writes
        key = f"pui:{msg.event_id}"
        answer = self.early.get(key) or self._answered(key)
        if answer is None:
            ended = self._cancel(msg.workflow_id, "pui")
            if ended is None:
                return
            ids, unknown = ended
            status = "cancelled" if ids else "unknown_workflow" if unknown else "nothing_active"
            answer = {"event_id": msg.event_id, "status": status, "workflow_ids": ids}
            self.early[key] = answer
            log.warning(
                "PUI cancel %s acted on while the state DB refuses writes: %s %s",
                msg.event_id,
                status,
                " ".join(ids) or "(none)",
            )
        self._publish(self._topics.pui_result, answer)

    def _admin_cancel(self, payload: bytes) -> None:
        """`a2a-edge workflows cancel`: its cancels go now and it is answered now, as the
        applied request would be (edge/app/admin_inputs.py records that answer)."""
        msg = parse(AdminRequestMsg, payload, MAX_BYTES)
        if not isinstance(msg, AdminRequestMsg) or msg.command != "workflow.cancel":
            return
        workflow_id = msg.args.get("workflow_id")
        if not isinstance(workflow_id, str) or not workflow_id:
            return  # refused as usual, once the DB takes writes
        key = f"admin:{msg.request_id}"
        answer = self.early.get(key)
        if answer is None:
            if self._answered(key) is not None:
                return  # applied before: its repeat is answered as usual
            ended = self._cancel(workflow_id, "user")
            if ended is None:
                return
            ids = ended[0]
            answer = (
                {"request_id": msg.request_id, "ok": True, "result": {"cancelled": ids}}
                if ids
                else {"request_id": msg.request_id, "ok": False}
                | {"error": f"no active workflow {workflow_id}"}
            )
            self.early[key] = answer
            log.warning("workflow.cancel %s acted on while the DB refuses writes", workflow_id)
        self._publish(self._topics.admin_response, answer)

    def _cancel(self, workflow_id: str | None, reason: str) -> tuple[list[str], bool] | None:
        """The cancel on the board as acted on so far; its task/cancels sent now. None when
        nothing could be sent (no broker connection): the held input acts once applied."""
        board, cancels, ended, unknown = self._tm.preview_cancel(workflow_id, reason, self._board)
        now = self._clock.now()
        for cancel in cancels:
            if (
                self._publish(self._topics.task_cancel(cancel.capability_id), cancel.payload)
                is None
            ):
                return None
        self._board = board
        for cancel in cancels:
            self._watch(cancel, ended, now)
        return [wf.workflow_id for wf in ended], unknown

    def _watch(self, cancel: CancelTask, ended: list[Workflow], now: datetime) -> None:
        task_id = str(cancel.payload["task_id"])
        if task_id in self._tm.watches.watches or task_id in self._watches:
            return  # its window runs already
        workflow_id, _, step_id = task_id.rpartition(":")
        wf = next((w for w in ended if w.workflow_id == workflow_id), None)
        step = wf.step(step_id) if wf else None
        operation, last = (step.operation_id, step.last_seq) if step else ("", 0)
        window = self._tm.watches.window_s
        self._watches[task_id] = confirm_watch_for(cancel, step_id, operation, last, now, window)

    # --- the confirmation windows ---------------------------------------------------------------
    def _all(self) -> dict[str, Watch]:
        watches = {**self._tm.watches.watches, **self._watches}
        return {t: w for t, w in watches.items() if t not in self._confirmed}

    def next_due(self) -> datetime | None:
        return min((w.due_at for w in self._all().values() if w.due_at), default=None)

    def due(self) -> None:
        """Windows that ended unconfirmed: the cancel again, then the safe stop (SPEC 4.2)."""
        now = self._clock.now()
        for task_id, watch in sorted(self._all().items()):
            stop = self._tm.catalog.safe_stop(watch.capability_id)
            new, effects = confirm_on_due(watch, now, self._tm.watches.window_s, stop)
            if new == watch:
                continue
            self._watches[task_id] = new
            # the alarm is said before the stop goes out, as the TaskManager's own watch says
            # it (taskmanager/watch.py) before the shell sends: a log read once the agent has
            # the stop holds its line
            for effect in effects:
                if isinstance(effect, Unconfirmed):
                    self.alarms.add(task_id)
                    log.error(
                        "cancel of %s unconfirmed: safe stop %s commanded while the state DB"
                        " refuses writes",
                        task_id,
                        effect.safe_stop or "(none in the catalog)",
                    )
            for effect in effects:
                if isinstance(effect, CancelTask):
                    self._publish(self._topics.task_cancel(effect.capability_id), effect.payload)
                elif isinstance(effect, Command):  # a safe stop: it never expires
                    self._publish(self._topics.task_command(effect.capability_id), effect.payload)

    def _callback(self, payload: bytes) -> None:
        msg = parse(TaskCallbackMsg, payload, MAX_BYTES)
        if not isinstance(msg, TaskCallbackMsg):
            return
        watch = self._all().get(msg.task_id.removesuffix(STOP_SUFFIX))
        if watch is None:
            return
        if confirm_verdict(watch, msg.task_id, msg.seq, msg.status) == "confirm":
            self._confirmed.add(watch.task_id)
            self.alarms.discard(watch.task_id)

    # --- the episode ends -----------------------------------------------------------------------
    def applied(self) -> None:
        """The held cancels are recorded: the board is the TaskManager's again."""
        self._board = None

    def reset(self) -> None:
        """Storage is back and every held input applied: the TaskManager's own windows run."""
        self._board = None
        self._watches.clear()
        self._confirmed.clear()
        self._acted.clear()
        self.alarms.clear()

    def _publish(self, topic: str, body: dict[str, Any]) -> int | None:
        return self._send(topic, jsonx.dumps(body).encode("utf-8"))


def _field(payload: bytes, name: str) -> str | None:
    """A string field of a JSON object payload, when it can be read."""
    try:
        body = json.loads(payload)
    except ValueError:
        return None
    value = body.get(name) if isinstance(body, dict) else None
    return value if isinstance(value, str) and 0 < len(value) <= 128 else None


def turn_id_of(payload: bytes) -> str | None:
    """The `turn_id` of a turn request, when it can be read."""
    return _field(payload, "turn_id")
