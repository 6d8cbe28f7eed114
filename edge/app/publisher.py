"""The TaskManager's messages onto this device's topics, through the durable MQTT outbox."""

from __future__ import annotations

from typing import Any

from edge.channel.topics import Topics
from edge.store.outbound import DurableOutbox
from taskmanager import CancelTask, Command, Message


class TaskPublisher:
    def __init__(self, *, topics: Topics, outbox: DurableOutbox) -> None:
        self._topics = topics
        self._outbox = outbox
        outbox.expire_under(topics.task_command(""))  # commands expire (SPEC 4.2)

    def publish(self, message: Message) -> None:
        """Inside the caller's transaction, like every outbox write."""
        if isinstance(message, Command):
            topic = self._topics.task_command(message.capability_id)
        elif isinstance(message, CancelTask):
            topic = self._topics.task_cancel(message.capability_id)
        else:
            topic = self._topics.workflow_event
        self._outbox.enqueue(topic, message.payload)

    def owed_cancels(self) -> set[str]:
        """Task ids of cancels still owed (never PUBACKed): their confirmation window has not
        really begun (SPEC 4.2)."""
        rows = self._outbox.rows_under(self._topics.task_cancel(""))
        return {str(payload.get("task_id")) for _, payload in rows}

    def owed_commands(self) -> list[tuple[int, dict[str, Any]]]:
        """Task commands still owed (never PUBACKed), oldest first: (row id, payload)."""
        return self._outbox.rows_under(self._topics.task_command(""))
