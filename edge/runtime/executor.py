"""The executor: every kind of input through one door, and the life cycle around it.

Each kind of input has its `take_<kind>` here — inbound messages (the intake's batches), a
deadline, a report's answer, a turn's answer (edge/app/turn_inputs.py awaits the door), a PUBACK, a
connection change, a reload, a housekeeping sweep, the heartbeat — and each goes through the
one door (edge/store/door.py): the outermost unit of work, storage faults held and tried again in
order, corruption a fatal stop, anything else counted. What an input means is the app's
(edge/app/device.py); the executor only asks the app, never reaches through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso, seconds_between
from a2a_common.sqlite import StorageUnavailable
from edge.app.device import DeviceApp
from edge.app.turn_inputs import fingerprint, unanswered_body
from edge.channel.mqtt import ChannelHandlers, Inbound, LastWill, MqttChannel
from edge.config.errors import ConfigError
from edge.config.settings import Settings
from edge.host.metrics_server import serve as serve_metrics
from edge.host.notify import Notifier
from edge.host.reserve import Reserve
from edge.runtime.alarm import watch_alarms
from edge.runtime.health import Health
from edge.runtime.intake import Intake
from edge.runtime.lifecycle import (
    begin_reload,
    claim_device_id,
    finish_reload,
    log_started,
    read_for_reload,
    shutdown,
)
from edge.runtime.metrics_state import state_reader
from edge.runtime.routes import Router, route_table
from edge.runtime.safety import SafetyLane, turn_id_of
from edge.runtime.warmup import Warmup
from edge.store.door import Door

log = logging.getLogger(__name__)

WARNINGS_EVERY_S = 30.0
HEARTBEAT_EVERY_S = 5.0
DEBUG_BLOCK_S = 3.0
# PUBACKed rows are deleted with the next group commit or heartbeat, or after this long in a
# commit of their own: one more WAL frame and fsync per turn when turns come seconds apart
# (issue 23; a row left by a crash is only sent again, and receivers dedupe)
REAP_AFTER_S = 2.0
READY_WAITS_FOR_BROKER_S = 1.0  # at most, for the first subscriptions (then READY anyway)
PREPARE_BY_S = 2.0  # the warm-up, when no broker connection came first (edge/runtime/warmup.py)
# SPEC 4.8: at start, how long the agents' retained statuses are waited for after the SUBACK
# (each bound; a broker sends retained messages right after the SUBACK, in milliseconds)
PRESENCE_WAIT_S = 1.0
PRESENCE_POLL_S = 0.02
FAILED_TICK_RETRY_S = 1.0  # a deadline whose tick failed with a bug is tried again this late
STORAGE_FULL = "storage_full"  # a turn's error while the disk is full (SPEC 2.4)


class Runtime:
    def __init__(
        self,
        *,
        app: DeviceApp,
        door: Door,
        channel: MqttChannel,
        notifier: Notifier,
        settings: Settings,
        config_path: Path | None = None,
        reserve: Reserve | None = None,
    ) -> None:
        self._app = app
        self._door = door
        door.on_fatal = self._fatal
        self._channel = channel
        self._notifier = notifier
        self._settings = settings
        self._config_path = config_path
        self._topics = app.topics
        self._router = Router(app.topics, route_table(app))
        self._stop = asyncio.Event()
        self._reap_scheduled = False
        self._warmup = Warmup(app.metrics, app.warmups())
        self._servers: list[asyncio.Server] = []
        self._last_broker_error = ""
        self._debug = os.environ.get("A2A_DEBUG_HOOKS") == "1"  # tests: faults on purpose
        # SPEC 2.4: safety does not wait for storage (edge/runtime/safety.py, edge/host/reserve.py)
        self._reserve = reserve or Reserve(settings.state_db_path.parent, 0)
        self._lane = SafetyLane(
            tm=app.tm,
            topics=app.topics,
            clock=app.clock,
            send=self._send_now,
            answered=self._answered,
            early=app.early_answers,
        )
        door.on_refused = self._storage_refused
        door.on_back = self._lane.reset
        self._turns_refused = 0
        self._intake = Intake(
            app=app,
            door=door,
            channel=channel,
            router=self._router,
            max_payload_bytes=settings.mqtt.max_payload_bytes,
            lane=self._lane,
            refuse_now=self._refuse_turn,
        )
        self._intake_task: asyncio.Task[None] | None = None
        self.health = Health(
            app=app,
            door=door,
            started_at=iso(app.clock.now()),
            intake_held=lambda: self._intake.held,
            intake_stopped=self._intake_stopped,
            storage=self._reserve.line,
        )
        self._exit_code = 0
        self._ready = False  # READY=1 sent
        # SPEC 4.8: nothing left in flight is re-armed before the agents' retained statuses
        self._presence_first = False
        # set, except from a start with `presence_first` until `_rearm` ran: deadlines wait on
        # it, so a callback the broker redelivers at start counts before its deadline fires
        self._rearmed = asyncio.Event()
        self._rearmed.set()
        self._session_lost_at_start = False

    # --- life cycle -------------------------------------------------------------------------
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self.take_reload)
        if self._debug:  # tests: wedge the loop on purpose
            loop.add_signal_handler(signal.SIGUSR2, lambda: time.sleep(DEBUG_BLOCK_S))
        app = self._app
        # SPEC §6: DB or WAL removed/replaced -> stop, exit 1
        app.when_state_lost(lambda reason: loop.call_soon_threadsafe(self._state_lost, reason))
        claim_device_id(self._settings, app, self._door)  # another's state: exit 2, nothing sent
        recovered = self._recover(presence_first=True)
        self._door.run("reload", app.relabel, key="relabel")  # a new lexicon: before READY
        app.attach(self._channel)
        self._channel.start(
            subscriptions=self._router.subscriptions(),
            will=LastWill(self._topics.runtime_status, self.health.status("offline")),
            handlers=ChannelHandlers(
                connected=self.take_connection,
                disconnected=self._on_disconnected,
                published=self.take_puback,
            ),
        )
        log_started(self._settings, app, recovered)
        # READY once the broker holds our subscriptions (a kept session, our SUBACK): a message
        # sent right after READY is not dropped (or after READY_WAITS_FOR_BROKER_S, no broker)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._channel.receiving.wait(), READY_WAITS_FOR_BROKER_S)
        self._notifier.ready(self.health.line())
        self.health.ready = True
        self._beat()  # `a2a-edge status --wait-ready` sees READY now, not a beat later
        if self._settings.metrics.enabled:
            metrics = app.metrics
            lag, broker = (lambda: self.health.loop_lag), (lambda: self.health.broker_up)
            metrics.read_at_scrape(state_reader(app, lag, broker))
            self._servers.append(
                await serve_metrics(self._settings.metrics, metrics.render, metrics)
            )
        # the warm-up: at once when the broker holds our subscriptions (READY waited for
        # them), else at the first connection or PREPARE_BY_S after READY, whichever first
        self._ready = True
        if self._channel.receiving.is_set():
            loop.call_soon(self._warmup.run)
        else:
            loop.call_later(PREPARE_BY_S, self._warmup.run)
        self._intake_task = asyncio.create_task(self._intake.run())
        background = [
            self._intake_task,
            asyncio.create_task(self._watchdog()),
            asyncio.create_task(self._deadlines()),
            asyncio.create_task(app.run_reporter(self._door)),
            asyncio.create_task(self._housekeeping()),
            asyncio.create_task(watch_alarms(self._alarms, self._on_alarm)),
            asyncio.create_task(self._safety()),
            asyncio.create_task(self._rearm()),
            *(asyncio.create_task(self._guarded(job)) for job in app.background()),
        ]
        await self._stop.wait()
        self._intake.stop()  # held messages stay unacked: the broker keeps them
        self._door.close()
        self._notifier.stopping()
        for server in self._servers:
            server.close()
        await shutdown(
            app=app,
            clock=app.clock,
            background=background,
            say_offline=self._say_offline if self.health.broker_up else None,
            stop_channel=self._channel.stop,
            before_close=self._warmup.stop,
        )
        return self._exit_code

    async def _guarded(self, job: Coroutine[Any, Any, None]) -> None:
        """An app loop; one that ends with an error says so at once (on a DB opened read-only
        on a full disk the checkpointer cannot open its connection: expected until the
        restart)."""
        name = getattr(job, "__qualname__", "an app loop")
        try:
            await job
        except Exception as exc:
            if self._reserve.read_only:
                log.warning("%s not running: the state DB is read-only (%s)", name, exc)
            else:
                log.exception("%s ended with an error", name)

    def _recover(self, presence_first: bool = False) -> dict[str, int]:
        """The start-up recovery; on a full disk (SPEC 2.4) the board is loaded all the same
        (a press acts on it) and the recovery's writes are held like any input's.
        `presence_first`: commands owed wait for `_rearm` (the agents' statuses, SPEC 4.8)."""
        app = self._app
        self._presence_first = presence_first
        if presence_first:
            self._rearmed.clear()
        try:
            return app.recover(presence_first)
        except StorageUnavailable as exc:
            log.error("state DB refuses writes at start (%s): recovery held", exc)
            app.load()
            if not self._reserve.read_only:  # read-only: done after the restart, not here
                self._door.run("recovery", app.recover, key="recovery")
            active = len(app.tm.active_ids())
            return {
                "reports_kept": 0,
                "interrupted_turns": 0,
                "active_workflows": active,
                "commands_resent": 0,
            }

    async def _say_offline(self, timeout_s: float) -> bool:
        return await self._channel.publish_and_wait(
            self._topics.runtime_status,
            self.health.status("offline"),
            retain=True,
            timeout_s=timeout_s,
        )

    async def _rearm(self) -> None:
        """SPEC 4.8, a restart: once the broker holds our subscriptions, the retained status of
        every agent with a task left in flight is read (each through the intake, its rules
        applied) — or PRESENCE_WAIT_S has passed — and only then are the commands the last run
        owed sent, and every active one again if the broker kept no session of ours."""
        app, loop = self._app, asyncio.get_running_loop()
        began = loop.time()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._channel.receiving.wait(), PRESENCE_WAIT_S)
            deadline = loop.time() + PRESENCE_WAIT_S
            while (missing := app.tm.held_by_agents()) and loop.time() < deadline:
                await asyncio.sleep(PRESENCE_POLL_S)
        finally:
            self._rearmed.set()  # the deadlines run from now (take_deadline)
        if missing:
            log.info(
                "no status from the agents of %s: their tasks keep their deadlines",
                ", ".join(sorted(missing)),
            )
        if not self._presence_first:
            return
        session_lost, self._session_lost_at_start = self._session_lost_at_start, False
        try:
            sent = await self._door.until_done("recovery", partial(app.rearm, session_lost))
        except Exception:  # the door logged and counted it
            return
        log.info(
            "re-armed after the agents' statuses (%.2f s): %d commands sent",
            loop.time() - began,
            sent or 0,
        )

    # --- the inputs, each through the door ------------------------------------------------------
    async def take_deadline(self) -> None:
        """Deadlines that have passed fire; consent grants that have expired end. Held while
        the DB refuses writes, and fired once it takes them (no deadline is skipped). At start
        not before the agents' statuses were read (`_rearm`, at most 2 x PRESENCE_WAIT_S): by
        then the broker has redelivered what the last run left unacknowledged (it comes before
        the retained statuses), so an answer an agent gave in time counts before its deadline
        fires (the device simulator's seeds 988 and 1094)."""
        await self._rearmed.wait()
        await self._door.until_done("deadline", self._app.tick)

    def take_reload(self) -> None:
        """SIGHUP: the log level, the privacy policy, consent and the Experience mode from the
        config file again; what the DB refuses now is held and applied when it is back."""

        handled = begin_reload(self._notifier)
        error, restart = "", list[str]()
        try:
            fresh, restart = read_for_reload(self._settings, self._config_path)
            steps = self._app.reload_steps(fresh)
        except ConfigError as exc:
            error, steps = str(exc), []
            log.warning("reload refused, keeping the running config: %s", exc)
        for step in steps:
            self._door.run("reload", step)
        self._beat()  # `status` shows the mode now, not a beat later
        state_dir = self._settings.state_db_path.parent
        done = partial(
            finish_reload, self._notifier, state_dir, handled, error, self.health.line, restart
        )
        self._door.run("reload", done)  # after the steps: held behind them when they are

    def take_connection(self, session_present: bool) -> None:
        """The broker connected: our status, the commands to send again when it kept no
        session of ours (held while the DB refuses writes), what was owed before."""
        self.health.broker_up = True
        self._publish_status()
        log.info("broker connected (session %s)", "kept" if session_present else "new")
        if not session_present and not self._rearmed.is_set():
            self._session_lost_at_start = True  # after the agents' statuses (SPEC 4.8)
        elif not session_present:
            self._door.run("connection", self._app.session_lost, key="session_lost")
        self._app.flush()  # what was owed before this connection, whatever the DB says now
        self._notifier.status(self.health.line())  # `systemctl status` now, not at a tick
        if self._ready:  # before READY it would delay READY (edge/runtime/warmup.py)
            asyncio.get_running_loop().call_soon(self._warmup.run)

    def take_puback(self, mid: int) -> None:
        self._app.on_published(mid)
        if not self._reap_scheduled:
            self._reap_scheduled = True
            asyncio.get_running_loop().call_later(REAP_AFTER_S, self._reap)

    def _reap(self) -> None:
        self._reap_scheduled = False
        if self._app.reapable():  # none when a group commit or the heartbeat took them
            self._door.run("puback", self._app.reap_rows, key="puback")

    async def take_sweep(self) -> bool:
        """One bounded batch of retention and prune; True when it removed something."""
        return await self._door.until_done("housekeeping", self._app.sweep)

    def _beat(self) -> None:
        """The heartbeat (not held: the next one supersedes it)."""
        beat = self.health.beat()
        attempt = self._door.attempt("heartbeat", lambda: self._app.heartbeat(beat))
        self.health.heartbeat_error = "" if attempt.done else attempt.detail()

    # --- loops that produce inputs --------------------------------------------------------------
    async def _deadlines(self) -> None:
        app = self._app
        while True:
            app.wake.clear()
            due = app.next_due()
            if due is not None:
                delay = (due - app.clock.now()).total_seconds()
                if delay <= 0:
                    try:
                        await self.take_deadline()
                    except Exception:  # a bug (the door logged and counted it): the loop lives
                        await asyncio.sleep(FAILED_TICK_RETRY_S)
                    continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(app.wake.wait(), None if due is None else delay)

    async def _housekeeping(self) -> None:
        """At start and every `memory.retention_every_s`: bounded batches of the memory sweep
        and the prune, the loop between, until neither finds anything."""
        while True:
            with contextlib.suppress(Exception):  # a failure is counted and logged by the door
                while await self.take_sweep():
                    await asyncio.sleep(0)
            await asyncio.sleep(self._settings.memory.retention_every_s)

    async def _watchdog(self) -> None:
        """Pings only while this loop turns and the DB answers; also the heartbeat, the
        status line and the outbox warnings."""
        interval = self._notifier.watchdog_interval_s
        tick = min(interval or HEARTBEAT_EVERY_S, HEARTBEAT_EVERY_S)
        checked = beat = -WARNINGS_EVERY_S
        clock = self._app.clock
        while True:
            started = clock.monotonic()
            await asyncio.sleep(tick)
            self.health.loop_lag = max(0.0, clock.monotonic() - started - tick)
            now = clock.monotonic()
            self._check_reserve()
            try:
                self._app.ping()
            except Exception:  # a DB that does not answer means unhealthy: no ping
                log.exception("watchdog: state DB does not answer")
                continue
            if self._intake_stopped():
                log.error("watchdog: the inbound intake stopped; no ping (systemd restarts)")
                continue
            if now - beat >= HEARTBEAT_EVERY_S:
                beat = now
                self._beat()  # degraded (not unhealthy) when the DB refuses writes
            problems = self.health.problems()
            if now - checked >= WARNINGS_EVERY_S or problems != self.health.published_problems:
                checked = now
                self._check_warnings()
            if interval is not None:
                self._notifier.watchdog()
                self._notifier.status(self.health.line())

    def _check_warnings(self) -> None:
        """Re-publish the retained status when the sync outbox crosses its limits or the
        service becomes degraded or healthy again."""
        sync = self._settings.sync
        warnings = self._app.sync_warnings(
            warn_pending=sync.warn_pending, warn_age_s=sync.warn_age_s, age_of=seconds_between
        )
        problems = self.health.problems()
        if warnings != self.health.warnings or problems != self.health.published_problems:
            self.health.warnings, self.health.published_problems = warnings, problems
            for line in warnings:
                log.warning("%s", line)
            self._publish_status()

    def _on_alarm(self, task_ids: list[str]) -> None:
        """SPEC 4.2: the retained status and STATUS= carry the alarm until an agent confirms."""
        self.health.alarms = task_ids
        self._beat()  # `a2a-edge status` shows it now, not a beat later
        self._publish_status()
        self._notifier.status(self.health.line())

    def _publish_status(self) -> None:
        if self.health.broker_up:
            status = self.health.status("online")
            self._channel.publish(self._topics.runtime_status, status, retain=True)

    # --- safety while the DB refuses writes (SPEC 2.4) -------------------------------------------
    def _send_now(self, topic: str, payload: bytes) -> int | None:
        return self._channel.publish_now(topic, payload)

    def _answered(self, key: str) -> dict[str, Any] | None:
        """The committed answer of an input (a press seen before), when the DB can be read."""
        try:
            seen = self._app.dedupe.seen(key)
        except Exception:
            return None
        return None if seen is None else seen.answer

    def _alarms(self) -> list[str]:
        return sorted(set(self._app.unconfirmed_cancels()) | self._lane.alarms)

    async def _safety(self) -> None:
        """While the DB refuses writes, the cancel-confirm windows run from memory (the
        lane's): a due re-send or safe stop goes out at once."""
        lane, clock = self._lane, self._app.clock
        while True:
            lane.wake.clear()
            due = None
            if self._door.storage_error:
                lane.due()
                due = lane.next_due()
            delay = None if due is None else max(0.05, (due - clock.now()).total_seconds())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lane.wake.wait(), delay)

    def _storage_refused(self, _exc: StorageUnavailable) -> None:
        """A write refused: on a full disk the reserve is given back and what is held is tried
        again at once."""
        self._lane.wake.set()
        if self._reserve.full() and self._reserve.release("a write was refused"):
            asyncio.get_running_loop().call_soon(self._door.retry_now)
            self._storage_changed()

    def _stored_answer(self, turn_id: str, payload: bytes) -> dict[str, Any] | None:
        """SPEC 2.4: a repeat of an answered turn (same words) gets its stored answer, also on a
        full disk."""
        try:
            seen = self._app.dedupe.seen(f"turn:{turn_id}")
            text = json.loads(payload).get("recognized_text")
        except Exception:
            return None
        if seen is None or seen.answer is None or not isinstance(text, str):
            return None
        return seen.answer if seen.fingerprint in (None, fingerprint(text)) else None

    def _check_reserve(self) -> None:
        """Every watchdog tick: given back when the disk is full, made again once space is."""
        reserve = self._reserve
        if reserve.read_only and not reserve.full():  # opened read-only on a full disk
            log.warning("space is back: stopping so the state DB opens for writing (restart)")
            self._fatal("the state DB was opened read-only on a full disk", logged=True)
            return
        if reserve.full():
            if reserve.release("the disk is full"):
                self._door.retry_now()
                self._storage_changed()
        elif not reserve.present() and reserve.make():  # given back, or never made yet
            self._storage_changed()

    def _storage_changed(self) -> None:
        self._publish_status()
        self._notifier.status(self.health.line())

    def _refuse_turn(self, msg: Inbound) -> bool:
        """A turn on a full disk is answered `error` (storage_full) at once, straight to the
        broker, and acknowledged: its writes would take the last space, kept for safety."""
        if self._topics.kind_of(msg.topic) != "turn/request" or not self._reserve.full():
            return False
        if self._reserve.release("a turn came on a full disk") and not self._reserve.full():
            self._storage_changed()
            return False
        turn_id = turn_id_of(msg.payload)
        if turn_id is None:
            return False  # refused as usual (held until the DB takes writes)
        body = self._stored_answer(turn_id, msg.payload) or unanswered_body(
            turn_id, "error", STORAGE_FULL
        )
        if self._send_now(self._topics.turn_response, jsonx.dumps(body).encode("utf-8")) is None:
            return False
        status = str(body.get("status"))
        self._app.metrics.inc("a2a_turns_total", "turn responses sent, by status", status=status)
        if body.get("error") == STORAGE_FULL:
            self._turns_refused += 1
            if self._turns_refused == 1 or self._turns_refused % 100 == 0:  # not one a turn
                log.warning(
                    "storage full: %d turns answered error storage_full", self._turns_refused
                )
        return True

    # --- the channel and stops ------------------------------------------------------------------
    def _on_disconnected(self, reason: str) -> None:
        if self._stop.is_set():  # at a stop: ours, or a broker stopping with us; not a warning
            log.info("broker disconnected while stopping: %s", reason)
        elif self.health.broker_up or reason != self._last_broker_error:
            log.warning("broker disconnected: %s", reason)  # once per reason, not per retry
        self._last_broker_error = reason
        self.health.broker_up = False
        self._notifier.status(self.health.line())

    def _intake_stopped(self) -> bool:
        task = self._intake_task
        return task is not None and task.done() and not self._stop.is_set()

    def _fatal(self, reason: str, *, logged: bool = False) -> None:
        """Stop with exit 1 (systemd restarts; the start-up check decides what next) without
        acknowledging what may not be on disk."""
        if self._exit_code == 0 and not logged:
            log.error("stopping: %s", reason)
        self._exit_code = 1
        self._intake.stop()
        self._stop.set()

    def _state_lost(self, reason: str) -> None:
        """The DB or WAL was removed or replaced (statefiles logged why): the stop (exit 1),
        the turns already acknowledged answered first (edge/app/turn_inputs.py `answer_lost`)."""
        self._app.answer_lost(self._channel.publish)
        self._fatal(reason, logged=True)
