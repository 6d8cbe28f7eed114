"""What the input modules beside `DeviceApp` use of it, as Protocols: they are handed the app
(`ConsentInputs(app)`, `AdminInputs(app)`, `Refusals(app)`, `answered_before(app, ...)`) and never
import `edge.app.device`, which imports them."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from a2a_common.clock import Clock
from cache import Memory
from edge.app.consent_ops import ConsentOps
from edge.app.memory_ops import MemoryOps
from edge.channel.topics import Refusal, Topics
from edge.config.settings import Settings
from edge.host.checkpointer import Checkpointer
from edge.host.metrics import Metrics
from edge.store.inbox import InboxDeadLetters, InboxDedupe
from edge.store.outbound import DurableOutbox, Wire
from edge.store.reports import Reports
from edge.store.work import Work
from sync import Replayer, SyncOutbox
from taskmanager import Result, TaskManager


class AppParts(Protocol):
    """The part of `DeviceApp` that a repeat and the consent inputs use (read-only members:
    `DeviceApp` sets them once, in `__init__`)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def topics(self) -> Topics: ...
    @property
    def consent(self) -> ConsentOps: ...
    @property
    def outbox(self) -> DurableOutbox: ...
    @property
    def dedupe(self) -> InboxDedupe: ...
    @property
    def replayer(self) -> Replayer: ...
    @property
    def unit(self) -> Callable[[], AbstractContextManager[Result]]: ...
    @property
    def after_commit(self) -> Callable[[Callable[[], object]], None]: ...

    def refuse(
        self,
        topic: str,
        refusal: Refusal,
        *,
        payload: bytes | None = None,
        ref: dict[str, Any] | None = None,
        logged: bool = False,
    ) -> None: ...


class TurnRejecter(Protocol):
    def reject(self, turn_id: str, refusal: Refusal) -> None: ...


class RefusalParts(AppParts, Protocol):
    """What the refusal path uses besides."""

    @property
    def clock(self) -> Clock: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def dead_letters(self) -> InboxDeadLetters: ...
    @property
    def turns(self) -> TurnRejecter: ...
    @property
    def wire(self) -> Wire | None: ...


class AdminParts(AppParts, Protocol):
    """What the admin inputs use besides."""

    @property
    def clock(self) -> Clock: ...
    @property
    def tm(self) -> TaskManager: ...
    @property
    def memory(self) -> Memory: ...
    @property
    def memory_ops(self) -> MemoryOps: ...
    @property
    def dead_letters(self) -> InboxDeadLetters: ...
    @property
    def checkpointer(self) -> Checkpointer: ...
    @property
    def reports(self) -> Reports: ...
    @property
    def sync(self) -> SyncOutbox: ...
    @property
    def consent_admin(self) -> Callable[[str, dict[str, Any]], dict[str, Any]]: ...
    @property
    def early_answers(self) -> dict[str, dict[str, Any]]: ...
    @property
    def work(self) -> Work: ...
