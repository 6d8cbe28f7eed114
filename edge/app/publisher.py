"""The one road every TaskManager effect leaves by: commands, cancels and events onto this
device's topics through the durable MQTT outbox, reports to the cloud's report worker."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from edge.channel.topics import Topics
from edge.store.outbound import DurableOutbox
from edge.store.reports import Reports
from taskmanager import TERMINAL_STEP, CancelTask, Command, Message, Report


class TaskPublisher:
    def __init__(
        self,
        *,
        topics: Topics,
        outbox: DurableOutbox,
        reports: Reports,
        after_commit: Callable[[Callable[[], object]], None],
    ) -> None:
        self._topics = topics
        self._outbox = outbox
        self._reports = reports
        self._after_commit = after_commit
        self._never_sent: set[str] = set()  # `_ended`'s tasks whose command never left
        outbox.expire_under(topics.task_command(""))  # commands expire (SPEC 4.2)
        # the agents' rows go ahead of the events committed with them (issue 36)
        outbox.send_first(topics.task_command(""), topics.task_cancel(""))

    def publish(self, message: Message) -> None:
        """Inside the caller's transaction, like every outbox write; a report is owed to the
        cloud from this transaction and queued for it after the commit."""
        if isinstance(message, Report):
            self._reports.settle([message])
            self._after_commit(partial(self._reports.committed, [message]))
            return
        if isinstance(message, Command):
            topic = self._topics.task_command(message.capability_id)
        elif isinstance(message, CancelTask):
            topic = self._topics.task_cancel(message.capability_id)
        else:
            topic = self._topics.workflow_event
            self._ended(message.payload)
        self._outbox.enqueue(topic, message.payload)

    def _ended(self, event: dict[str, Any]) -> None:
        """A task's end: a command of it still owed is never sent (SPEC 4.2: it would start a
        task already TIMEOUT, CANCELLED or FAILED once the broker is back)."""
        task_id = event.get("task_id")
        if isinstance(task_id, str) and event.get("status") in TERMINAL_STEP:
            unsent, handed = self._outbox.drop_commands(task_id)
            if unsent and not handed:
                self._never_sent.add(task_id)

    def never_sent(self) -> set[str]:
        """The tasks ended since the last call whose command rows were dropped never handed to
        the broker (SPEC 4.2: no agent can have it, a cancel of them has nothing to confirm);
        the set is taken, the next call starts empty."""
        taken, self._never_sent = self._never_sent, set()
        return taken

    def owed_cancels(self) -> set[str]:
        """Task ids of cancels still owed (never PUBACKed): their confirmation window has not
        really begun (SPEC 4.2)."""
        rows = self._outbox.rows_under(self._topics.task_cancel(""))
        return {str(payload.get("task_id")) for _, payload in rows}

    def owed_commands(self) -> list[tuple[int, dict[str, Any]]]:
        """Task commands still owed (never PUBACKed), oldest first: (row id, payload). Not a
        safe stop: it is no step to dispatch again, it stays in the outbox as it is and goes
        ahead of everything (SPEC 4.2); a start-up that dropped it never sent it at all."""
        rows = self._outbox.rows_under(self._topics.task_command(""))
        return [(row_id, body) for row_id, body in rows if body.get("safe_stop") is not True]
