"""One boot of the device: the real graph of edge/wiring.py over the state dir, the executor
around it (its `take_*` inputs, the one door, the safety lane) on the simulator's wire. A crash
drops the boot (every object, every task) without a word; the next boot opens the file again
and recovers as the service does at start."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from a2a_common.clock import ManualClock
from edge.app.device import DeviceApp
from edge.channel.mqtt import Inbound
from edge.config.settings import Secrets, Settings
from edge.host.notify import Notifier
from edge.runtime.executor import Runtime
from edge.wiring import build_app, open_db
from tests.devicesim.cloud import SimCloud
from tests.devicesim.wire import SimWire


@dataclass
class Boot:
    app: DeviceApp
    runtime: Runtime
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    deadline: asyncio.Task[Any] | None = None
    sync: asyncio.Task[Any] | None = None
    sweep: asyncio.Task[Any] | None = None

    @property
    def door(self) -> Any:
        return self.app.door

    def take(self, messages: list[Inbound]) -> None:
        """Inbound messages as paho hands them over (arrival stamped now)."""
        fresh = [
            Inbound(m.topic, m.payload, m.qos, m.mid, m.generation, m.retained, time.perf_counter())
            for m in messages
        ]
        self.runtime._intake.take(fresh)

    def refuse_writes(self, on: bool) -> None:
        self.app.memory.db.execute(f"PRAGMA query_only={int(on)}")

    def background(self) -> None:
        """The loops the service runs that the simulator drives itself, started on demand."""
        app, runtime = self.app, self.runtime
        due = app.next_due()
        if due is not None and due <= app.clock.now() and _idle(self.deadline):
            self.deadline = asyncio.create_task(_quiet(runtime.take_deadline()))
        if _idle(self.sync) and app.sync.pending():
            self.sync = asyncio.create_task(_quiet(app.replayer.drain(attempts=1)))

    def housekeeping(self) -> None:
        if _idle(self.sweep):
            self.sweep = asyncio.create_task(_quiet(self.runtime.take_sweep()))

    def crash(self) -> None:
        """Power cut: nothing more runs, nothing is written, the file stays as it is."""
        self.app.door.close()
        for task in [*self.tasks, self.deadline, self.sync, self.sweep, *self.app.turns_in_flight]:
            if task is not None:
                task.cancel()
        with contextlib.suppress(Exception):
            self.app.memory.db.close()
        with contextlib.suppress(Exception):
            self.app.checkpointer.close()


def _idle(task: asyncio.Task[Any] | None) -> bool:
    return task is None or task.done()


async def _quiet(job: Any) -> None:
    with contextlib.suppress(Exception):
        await job


def boot(
    settings: Settings, clock: ManualClock, wire: SimWire, cloud: SimCloud, config: Path
) -> Boot:
    db = open_db(settings, clock)
    app = build_app(settings, Secrets(), db=db, clock=clock, live=True, transport=cloud.transport())
    runtime = Runtime(
        app=app,
        door=app.door,
        channel=wire,  # type: ignore[arg-type]
        notifier=Notifier({}),
        settings=settings,
        config_path=config,
    )
    runtime._recover(presence_first=True)  # as the service starts (SPEC 4.8)
    runtime._door.run("reload", app.relabel, key="relabel")
    app.attach(wire)
    started = Boot(app=app, runtime=runtime)
    started.tasks.append(asyncio.create_task(app.run_reporter(app.door)))
    started.tasks.append(asyncio.create_task(runtime._rearm()))  # after the agents' statuses
    return started
