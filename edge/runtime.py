"""The executor: channel batches -> route -> the app's input -> ack, and the life cycle.

One asyncio task takes inbound messages a batch at a time in one transaction (group commit),
each validated by its route (a refusal goes to `P/runtime/error`, nothing changes) and applied
in a unit of work of its own. After the commit the messages are acknowledged and what they
caused is handed to the broker. Around that: start-up, signals, the watchdog and heartbeat,
housekeeping (retention, prune) and a bounded shutdown. What an input means is the app's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

from a2a_common import jsonx
from a2a_common.clock import iso, parse_iso
from a2a_common.sqlite import StorageError, StorageUnavailable, schema_version
from cache import relabel_if_changed
from edge import __version__, reload
from edge.alarm import alarm_body, alarm_line, watch_alarms
from edge.app import DeviceApp
from edge.config import Settings, load_settings
from edge.errors import ConfigError
from edge.housekeeping import prune
from edge.intake import Intake
from edge.metrics_server import serve as serve_metrics
from edge.metrics_state import state_reader
from edge.mqtt import ChannelHandlers, LastWill, MqttChannel
from edge.notify import Notifier
from edge.policies import privacy_policy
from edge.routes import Router, route_table
from edge.warmup import Warmup

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 3.0  # for turns waiting on the cloud
SHUTDOWN_BUDGET_S = 8.0  # the whole shutdown (systemd's TimeoutStopSec is 10 s)
WARNINGS_EVERY_S = 30.0
HEARTBEAT_EVERY_S = 5.0
DEBUG_BLOCK_S = 3.0
# PUBACKed rows are deleted with the next group commit or heartbeat, or after this long in a
# commit of their own: one more WAL frame and fsync per turn when turns come seconds apart
# (issue 23; a row left by a crash is only sent again, and receivers dedupe)
REAP_AFTER_S = 2.0
READY_WAITS_FOR_BROKER_S = 1.0  # at most, for the first subscriptions (then READY anyway)
PREPARE_BY_S = 2.0  # the warm-up, when no broker connection came first (edge/warmup.py)


async def _cancel(tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
    """Cancel and wait for them, at most `timeout_s` (a task may swallow a cancellation:
    it is asked again until the time is up)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    pending = {t for t in tasks if not t.done()}
    while pending and loop.time() < end:
        for task in pending:
            task.cancel()
        _done, pending = await asyncio.wait(pending, timeout=min(0.2, end - loop.time()))
    for task in pending:
        log.warning("a task did not stop when cancelled: %s", task.get_name())


def seconds_between(later: str, earlier: str) -> float:
    return (parse_iso(later) - parse_iso(earlier)).total_seconds()


class Runtime:
    def __init__(
        self,
        *,
        app: DeviceApp,
        channel: MqttChannel,
        notifier: Notifier,
        settings: Settings,
        config_path: Path | None = None,
    ) -> None:
        self._app = app
        self._channel = channel
        self._notifier = notifier
        self._settings = settings
        self._config_path = config_path
        self._router = Router(app.topics, route_table(app))
        self._started_at = iso(app.clock.now())
        self._stop = asyncio.Event()
        self._broker_up = False
        self._reap_scheduled = False
        self._warmup = Warmup(
            app.metrics, (app.cloud.prepare, app.memory.policy.privacy.lexicon.prepare)
        )
        self._warnings: list[str] = []
        self._loop_lag = 0.0
        self._relabel_owed = False  # a lexicon change whose relabel the DB refused
        self._servers: list[asyncio.Server] = []
        self._last_broker_error = ""
        self._debug = os.environ.get("A2A_DEBUG_HOOKS") == "1"  # tests: faults on purpose
        self._intake = Intake(
            app=app,
            channel=channel,
            router=self._router,
            max_payload_bytes=settings.mqtt.max_payload_bytes,
            fatal=self._fatal,
        )
        self._heartbeat_error = ""
        self._published_problems: list[str] = []
        self._alarms: list[str] = []  # unconfirmed cancels (edge/alarm.py)
        self._exit_code = 0
        self._intake_task: asyncio.Task[None] | None = None
        self._ready = False  # READY=1 sent

    # --- life cycle -------------------------------------------------------------------------
    def _status(self, state: str) -> bytes:
        body: dict[str, Any] = {
            "state": state,
            "version": __version__,
            "started_at": self._started_at,
        }
        if state == "online" and self._warnings:
            body["warnings"] = self._warnings
        if state == "online" and self._alarms:
            body["alarm"] = alarm_body(self._alarms)
        if state == "online" and self._problems():
            body["health"] = "degraded"
            body["problems"] = self._problems()
        return jsonx.dumps(body).encode("utf-8")

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        if self._debug:  # tests: wedge the loop on purpose
            loop.add_signal_handler(signal.SIGUSR2, lambda: time.sleep(DEBUG_BLOCK_S))
        app = self._app
        files = app.checkpointer.files  # SPEC §6: DB or WAL removed/replaced -> stop, exit 1
        if files is not None:
            files.when_lost(lambda reason: loop.call_soon_threadsafe(self._state_lost, reason))
        recovered = app.recover()
        self._relabel()  # a new lexicon (upgrade, lexicon_file): before READY
        app.attach(self._channel)
        self._channel.start(
            subscriptions=self._router.subscriptions(),
            will=LastWill(app.topics.runtime_status, self._status("offline")),
            handlers=ChannelHandlers(
                connected=self._on_connected,
                disconnected=self._on_disconnected,
                published=self._on_published,
            ),
        )
        self._log_started(recovered)
        # READY once the broker holds our subscriptions (a kept session, our SUBACK): a message
        # sent right after READY is not dropped (or after READY_WAITS_FOR_BROKER_S, no broker)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._channel.receiving.wait(), READY_WAITS_FOR_BROKER_S)
        self._notifier.ready(self._status_line())
        if self._settings.metrics.enabled:
            metrics = self._app.metrics
            metrics.read_at_scrape(
                state_reader(self._app, lambda: self._loop_lag, lambda: self._broker_up)
            )
            server = await serve_metrics(self._settings.metrics, metrics.render, metrics)
            self._servers.append(server)
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
            asyncio.create_task(app.run_timer()),
            asyncio.create_task(app.run_reporter()),
            asyncio.create_task(app.replayer.run()),
            asyncio.create_task(self._retention()),
            asyncio.create_task(app.checkpointer.run()),
            asyncio.create_task(watch_alarms(app.tm.alarms, self._on_alarm)),
        ]
        await self._stop.wait()
        self._intake.stop()  # held messages stay unacked: the broker keeps them
        await self._shutdown(background)
        return self._exit_code

    def _log_started(self, recovered: dict[str, int]) -> None:
        for warning in self._settings.cloud.warnings():  # every start, as long as it holds
            log.warning("%s", warning)
        log.info(
            "started: device %s, schema v%d, %d interrupted turns answered, %d active"
            " workflows (deadlines re-armed), %d commands re-sent, %d MQTT messages and %d sync"
            " writes to send",
            self._settings.device_id,
            schema_version(self._app.memory.db),
            recovered["interrupted_turns"],
            recovered["active_workflows"],
            recovered["commands_resent"],
            self._app.outbox.pending(),
            self._app.sync.pending(),
        )

    def _reload(self) -> None:
        """SIGHUP: the log level and the privacy policy from the config file, again; systemd
        is told it began and ended, and `a2a-edge reload` finds the mark (edge/reload.py)."""
        handled = reload.monotonic_usec()
        self._notifier.reloading(handled)
        error = ""
        try:
            self._apply_reload()
        except ConfigError as exc:
            error = str(exc)
            log.warning("reload refused, keeping the running config: %s", exc)
        self._notifier.ready(self._status_line())  # before the mark: systemd hears it first
        try:
            reload.write_mark(self._settings.state_db_path.parent, handled, error)
        except OSError as exc:
            log.warning("reload mark not written (a2a-edge reload waits in vain): %s", exc)

    def _apply_reload(self) -> None:
        fresh = load_settings(self._config_path)
        privacy = privacy_policy(fresh)  # reads privacy.lexicon_file again
        logging.getLogger().setLevel(fresh.log.level)
        self._app.memory.set_privacy(privacy)
        self._relabel()  # a term added: what is stored has it too
        log.info(
            "reloaded: log level %s, privacy policy with %d categories, %d consented",
            fresh.log.level,
            len(fresh.privacy.categories),
            len(fresh.privacy.consented_categories),
        )
        self._reload_experience(fresh.experience.mode)
        stale = reload.needs_restart(self._settings, fresh)
        if stale:  # `systemctl reload` succeeds; the operator must hear that these wait
            log.warning(
                "reload: %s changed in the file, applied only at a restart"
                " (systemctl restart a2a-edge); running with the values it started with",
                ", ".join(stale),
            )
        try:
            self._app.reload_consent(
                fresh.privacy.consented_categories, fresh.privacy.consented_capabilities
            )
        except StorageUnavailable as exc:  # the standing set is new; the cancels wait a tick
            log.warning("consent reload: the state DB refused the cancels: %s", exc)

    def _reload_experience(self, mode: str) -> None:
        """SPEC §4.7: the kill switch; `status` shows the mode from the next heartbeat (now)."""
        old = self._app.tm.mode
        try:
            self._app.set_experience_mode(mode)
        except StorageUnavailable as exc:
            log.warning("experience mode: the state DB refused the step down: %s", exc)
        log.info("reloaded: experience mode %s (was %s)", mode, old)
        self._heartbeat()

    async def _shutdown(self, background: list[asyncio.Task[None]]) -> None:
        """Bounded (SPEC §6: within 10 s whatever the cloud, the broker or TLS do): each step
        gets what is left of SHUTDOWN_BUDGET_S. Every write is committed as it happens, so
        nothing is lost by cutting a step short; what was owed goes out on the next start."""
        clock = self._app.clock
        deadline = clock.monotonic() + SHUTDOWN_BUDGET_S

        def left(cap: float) -> float:
            return max(0.0, min(cap, deadline - clock.monotonic()))

        self._notifier.stopping()
        for server in self._servers:
            server.close()
        turns = set(self._app.turns_in_flight)
        log.info("stopping: %d turns in flight", len(turns))
        if turns:
            await asyncio.wait(turns, timeout=left(SHUTDOWN_GRACE_S))
        await _cancel(list(turns) + background, left(1.0))
        if self._broker_up:
            answered = await self._channel.publish_and_wait(
                self._app.topics.runtime_status,
                self._status("offline"),
                retain=True,
                timeout_s=left(1.0),
            )
            # let PUBACKs of owed messages arrive, for at most 1.5 s — none when the broker
            # did not answer the status (frozen, or gone meanwhile): those rows go next start
            settle_by = clock.monotonic() + (left(1.5) if answered else 0.0)
            while self._app.outbox.in_flight() and clock.monotonic() < settle_by - 0.02:
                await asyncio.sleep(0.02)
        self._channel.stop()  # on the loop, bounded: it never waits on the network
        self._warmup.stop()
        await self._app.close(timeout_s=max(left(2.0), 0.5))
        log.info("stopped")

    # --- health -----------------------------------------------------------------------------
    def _heartbeat(self) -> None:
        """What `a2a-edge status` reads to tell the service's health."""
        app = self._app
        beat = {
            "ts": iso(app.clock.now()),
            "pid": os.getpid(),
            "broker": "connected" if self._broker_up else "disconnected",
            "cloud": "unreachable" if app.cloud.unreachable else "reachable",
            "loop_lag_ms": round(self._loop_lag * 1000, 1),
            "active_workflows": len(app.tm.active_ids()),
            "sync_in_flight": app.replayer.in_flight,  # writes in the request being sent
            "experience_mode": app.tm.mode,
            # SPEC 4.2: a standing cancel alarm degrades the service until an agent confirms
            "health": "degraded" if self._problems() or self._alarms else "ok",
            "problems": self._problems(),
            "alarm": alarm_body(self._alarms) if self._alarms else None,
            **app.checkpointer.health(),  # wal_bytes, wal_residue, wal_blocked_s
        }
        try:
            with app.unit():
                app.memory.store.set_state("runtime_heartbeat", beat)
                app.reap_rows()  # the PUBACKed rows, delivered reports, go in the same commit
        except StorageUnavailable as exc:
            self._heartbeat_error = str(exc)
        else:
            self._heartbeat_error = ""

    def _check_warnings(self) -> None:
        """Re-publish the retained status when the sync outbox crosses its limits or the
        service becomes degraded or healthy again."""
        sync = self._settings.sync
        warnings = self._app.sync.warnings(
            iso(self._app.clock.now()),
            warn_pending=sync.warn_pending,
            warn_age_s=sync.warn_age_s,
            age_of=seconds_between,
        )
        problems = self._problems()
        if warnings != self._warnings or problems != self._published_problems:
            self._warnings, self._published_problems = warnings, problems
            for line in warnings:
                log.warning("%s", line)
            if self._broker_up:
                self._channel.publish(
                    self._app.topics.runtime_status, self._status("online"), retain=True
                )

    def _relabel(self) -> None:
        """Stored texts labelled with the current lexicon. A DB that refuses the write (full
        disk) does not stop the service: rolled back, the old fingerprint stays and the
        heartbeat tries again until it is done."""
        try:
            relabel_if_changed(self._app.memory)
            self._relabel_owed = False
        except (sqlite3.Error, StorageError) as exc:
            if not self._relabel_owed:
                log.error("stored texts not labelled with the new lexicon yet (retried): %s", exc)
            self._relabel_owed = True

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
            self._loop_lag = max(0.0, clock.monotonic() - started - tick)
            now = clock.monotonic()
            try:
                self._app.ping()
            except Exception:  # a DB that does not answer means unhealthy: no ping
                log.exception("watchdog: state DB does not answer")
                continue
            stopping = self._stop.is_set()  # the intake ends first at a stop: no alarm then
            if self._intake_task is not None and self._intake_task.done() and not stopping:
                log.error("watchdog: the inbound intake stopped; no ping (systemd restarts)")
                continue
            if now - beat >= HEARTBEAT_EVERY_S:
                beat = now
                self._heartbeat()  # degraded (not unhealthy) when the DB refuses writes
                if self._relabel_owed:
                    self._relabel()
            if now - checked >= WARNINGS_EVERY_S or self._problems() != self._published_problems:
                checked = now
                self._check_warnings()
            if interval is not None:
                self._notifier.watchdog()
                self._notifier.status(self._status_line())

    def _status_line(self) -> str:
        broker = "connected" if self._broker_up else "disconnected"
        cloud = "unreachable" if self._app.cloud.unreachable else "reachable"
        line = (
            f"broker {broker}; cloud {cloud}; mqtt outbox {self._app.outbox.pending()};"
            f" sync outbox {self._app.sync.pending()}{self._app.checkpointer.note()}"
        )
        problems = self._problems()
        line = f"degraded: {'; '.join(problems)}; {line}" if problems else line
        return alarm_line(self._alarms) + line

    def _on_alarm(self, task_ids: list[str]) -> None:
        """SPEC 4.2: the retained status and STATUS= carry the alarm until an agent confirms."""
        self._alarms = task_ids
        self._heartbeat()  # `a2a-edge status` shows it now, not a beat later
        if self._broker_up:
            self._channel.publish(
                self._app.topics.runtime_status, self._status("online"), retain=True
            )
        self._notifier.status(self._status_line())

    # --- channel events (loop thread) -------------------------------------------------------
    def _on_connected(self, session_present: bool) -> None:
        self._broker_up = True
        self._channel.publish(self._app.topics.runtime_status, self._status("online"), retain=True)
        log.info("broker connected (session %s)", "kept" if session_present else "new")
        if not session_present:
            self._app.session_lost()
        self._app.outbox.flush()  # what was owed before this connection
        self._notifier.status(self._status_line())  # `systemctl status` now, not at the next tick
        if self._ready:  # before READY it would delay READY (edge/warmup.py)
            asyncio.get_running_loop().call_soon(self._warmup.run)

    def _on_published(self, mid: int) -> None:
        self._app.outbox.on_published(mid)
        if not self._reap_scheduled:
            self._reap_scheduled = True
            asyncio.get_running_loop().call_later(REAP_AFTER_S, self._reap)

    def _reap(self) -> None:
        self._reap_scheduled = False
        self._app.reap()  # nothing once the app closed (it reaps in `close`)

    def _on_disconnected(self, reason: str) -> None:
        if self._stop.is_set():  # our own disconnect at a stop: expected, not a warning
            log.info("broker disconnected: %s", reason)
        elif self._broker_up or reason != self._last_broker_error:
            log.warning("broker disconnected: %s", reason)  # once per reason, not per retry
        self._last_broker_error = reason
        self._broker_up = False
        self._notifier.status(self._status_line())

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
        the turns already acknowledged answered first (edge/app_turns.py `answer_lost`)."""
        files = self._app.checkpointer.files
        if files is not None and files.db_gone:  # a removed WAL is copied back: answers kept
            self._app.turns.answer_lost(self._channel.publish, self._settings.state_db_path.parent)
        self._fatal(reason, logged=True)

    def _problems(self) -> list[str]:
        """What makes the service degraded now (empty: healthy)."""
        problems = []
        if self._intake_task is not None and self._intake_task.done() and not self._stop.is_set():
            problems.append("inbound intake stopped: nothing more is taken in")
        if self._intake.failures:
            problems.append(f"{self._intake.failures} inbound batches failed (see the log)")
        if self._intake.held:
            problems.append(f"state DB refuses writes: {self._intake.held} inbound messages held")
        if self._heartbeat_error:
            problems.append(f"heartbeat not written: {self._heartbeat_error}")
        if self._app.replayer.stalled_since is not None:
            problems.append(f"sync makes no progress since {self._app.replayer.stalled_since}")
        return problems

    # --- housekeeping -----------------------------------------------------------------------
    async def _retention(self) -> None:
        """At start and every `memory.retention_every_s`: bounded batches of the memory sweep
        and the prune, both each time, the loop between, until neither finds anything."""
        while True:
            try:
                while True:
                    swept = self._app.sweep()
                    pruned = prune(self._app, self._settings)
                    if not (swept or pruned):
                        break
                    await asyncio.sleep(0)
            except Exception:
                log.exception("retention sweep failed")
            await asyncio.sleep(self._settings.memory.retention_every_s)
