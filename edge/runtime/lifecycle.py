"""The parts of the service's life cycle that are not inputs: the start-up line, SIGHUP's
reload of the config file, and the bounded shutdown (SPEC §6)."""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

from a2a_common.clock import Clock
from a2a_common.sqlite import StorageUnavailable
from edge.app.device import DeviceApp
from edge.config.errors import ConfigError
from edge.config.settings import Settings, load_settings
from edge.host import reload
from edge.host.notify import Notifier
from edge.store.door import Door

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 3.0  # for turns waiting on the cloud
SHUTDOWN_BUDGET_S = 8.0  # the whole shutdown (systemd's TimeoutStopSec is 10 s)


async def cancel_all(tasks: list[asyncio.Task[None]], timeout_s: float) -> None:
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


def log_started(settings: Settings, app: DeviceApp, recovered: dict[str, int]) -> None:
    for warning in settings.cloud.warnings():  # every start, as long as it holds
        log.warning("%s", warning)
    state = app.health()
    log.info(
        "started: device %s, schema v%d, %d interrupted turns answered, %d active"
        " workflows (deadlines re-armed), %d commands re-sent, %d MQTT messages and %d sync"
        " writes to send",
        settings.device_id,
        state["schema_version"],
        recovered["interrupted_turns"],
        recovered["active_workflows"],
        recovered["commands_resent"],
        state["mqtt_outbox"],
        state["sync_outbox"],
    )


DEVICE_ID_KEY = "device_id"  # device_state: the id the state dir's DB was kept under


def claim_device_id(settings: Settings, app: DeviceApp, door: Door) -> None:
    """At start, before anything is recovered or sent: the state dir's DB was kept under one
    device_id (`device_state.device_id`); a config that names another is refused (exit 2, one
    line naming both) unless `accept_new_device_id` says the new id is meant. A DB from before
    this key (or a new one) adopts the configured id without a word. The id is written through
    the door: on a full disk it is held like any write."""
    configured = settings.device_id
    kept = app.memory.store.state(DEVICE_ID_KEY)
    if kept == configured:
        return
    if isinstance(kept, str) and kept:
        if not settings.accept_new_device_id:
            raise ConfigError(
                "device_id",
                f"{configured!r}, but the state in {settings.state_dir} was kept by {kept!r}:"
                f" set device_id back to {kept!r}, or start once with --accept-new-device-id"
                " (A2A_EDGE_ACCEPT_NEW_DEVICE_ID=1) if this robot is meant to be"
                f" {configured!r} now",
            )
        log.warning(
            "device_id changed from %s to %s over the same state (accepted): the memory,"
            " workflows and outboxes kept under %s are now %s's",
            kept,
            configured,
            kept,
            configured,
        )
    door.run("recovery", partial(app.memory.store.set_state, DEVICE_ID_KEY, configured))


def read_for_reload(running: Settings, config_path: Path | None) -> tuple[Settings, list[str]]:
    """SIGHUP: the config file again (raises ConfigError: the running config stays), and the
    keys changed in it that only a restart applies (the reload's mark names them)."""
    fresh = load_settings(config_path)
    logging.getLogger().setLevel(fresh.log.level)
    log.info(
        "reloaded: log level %s, privacy policy with %d categories, %d consented",
        fresh.log.level,
        len(fresh.privacy.categories),
        len(fresh.privacy.consented_categories),
    )
    stale = reload.needs_restart(running, fresh)
    if stale:  # `systemctl reload` succeeds; the operator must hear that these wait
        log.warning(
            "reload: %s changed in the file, applied only at a restart"
            " (systemctl restart a2a-edge); running with the values it started with",
            ", ".join(stale),
        )
    return fresh, stale


def begin_reload(notifier: Notifier) -> int:
    """SIGHUP taken: systemd hears RELOADING=1; the instant is what the mark will carry."""
    handled = reload.monotonic_usec()
    notifier.reloading(handled)
    return handled


# a mark that cannot be written for want of space is held like any write the disk refuses
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO)


def finish_reload(
    notifier: Notifier,
    state_dir: Path,
    handled: int,
    error: str,
    status_line: Callable[[], str],
    restart: Sequence[str] = (),
) -> None:
    """Once every step of the reload is applied: READY=1 for systemd, then the mark that
    `a2a-edge reload` waits for (edge/host/reload.py), naming the keys that wait for a restart
    (`restart`: the command exits 4 with them). A disk that refuses the mark holds it
    (`StorageUnavailable`, the door tries again): the command must not hear of a reload before
    it is applied, nor wait for one that was."""
    notifier.ready(status_line())  # before the mark: systemd hears it first
    try:
        reload.write_mark(state_dir, handled, error, restart)
    except OSError as exc:
        if exc.errno in _NO_ROOM:
            raise StorageUnavailable(f"reload mark not written: {exc}") from exc
        log.warning("reload mark not written (a2a-edge reload waits in vain): %s", exc)


async def shutdown(
    *,
    app: DeviceApp,
    clock: Clock,
    background: list[asyncio.Task[None]],
    say_offline: Callable[[float], Awaitable[bool]] | None,
    stop_channel: Callable[[], None],
    before_close: Callable[[], None],
) -> None:
    """Bounded (SPEC §6: within 10 s whatever the cloud, the broker or TLS do): each step
    gets what is left of SHUTDOWN_BUDGET_S. Every write is committed as it happens, so
    nothing is lost by cutting a step short; what was owed goes out on the next start."""
    deadline = clock.monotonic() + SHUTDOWN_BUDGET_S

    def left(cap: float) -> float:
        return max(0.0, min(cap, deadline - clock.monotonic()))

    turns = set(app.turns_in_flight)
    log.info("stopping: %d turns in flight", len(turns))
    if turns:
        await asyncio.wait(turns, timeout=left(SHUTDOWN_GRACE_S))
    await cancel_all(list(turns) + background, left(1.0))
    if say_offline is not None:
        answered = await say_offline(left(1.0))
        # let PUBACKs of owed messages arrive, for at most 1.5 s — none when the broker
        # did not answer the status (frozen, or gone meanwhile): those rows go next start
        settle_by = clock.monotonic() + (left(1.5) if answered else 0.0)
        while app.outbox_in_flight() and clock.monotonic() < settle_by - 0.02:
            await asyncio.sleep(0.02)
    stop_channel()  # on the loop, bounded: it never waits on the network
    before_close()
    await app.close(timeout_s=max(left(2.0), 0.5))
    log.info("stopped")
