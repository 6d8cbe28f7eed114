"""Durable outbound MQTT: rows written in the caller's transaction, deleted on PUBACK.

paho keeps an unacknowledged QoS 1 publish only in RAM; a crash or a broker outage would lose
it. So every QoS 1 message the runtime owes is first a row of `mqtt_outbox`, written in the
same transaction as the state change that caused it. `flush()` hands rows to paho after the
commit; the PUBACK deletes the row. Rows left at a restart are published again (receivers
dedupe on their ids, as QoS 1 requires anyway).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from a2a_common import jsonx
from a2a_common.clock import Clock, iso, parse_iso
from a2a_common.db import Database
from a2a_common.queues import Handed
from a2a_common.sqlite import Migration

if TYPE_CHECKING:
    from a2a_common.queues import DurableQueue

log = logging.getLogger(__name__)
_SAFE_STOP = '"safe_stop":true'  # as jsonx writes it


def _create(db: Database) -> None:
    db.execute(  # AUTOINCREMENT (dropped by edge_0007): raw SQL
        """CREATE TABLE mqtt_outbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            topic TEXT NOT NULL,
            payload TEXT NOT NULL,
            qos INTEGER NOT NULL DEFAULT 1,
            retain INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL)"""
    )
    db.table("inbox_seen").create(
        {"key": str, "topic": str, "seen_at": str}, pk="key", not_null={"topic", "seen_at"}
    )


MIGRATIONS = [Migration("edge_0001_mqtt_outbox_inbox", _create)]


def _v2(db: Database) -> None:
    db.table("inbox_seen").create_index(["seen_at"], index_name="inbox_seen_at")


MIGRATIONS_2 = [Migration("edge_0002_inbox_seen_at_index", _v2)]


def _v3(db: Database) -> None:
    """Plain integer ids (no AUTOINCREMENT): every insert also rewrote `sqlite_sequence`'s
    page, a WAL frame per commit that sends anything (issue 23). The outbox gives the ids
    itself, increasing within a process (`DurableOutbox._new_id`)."""
    db.table("mqtt_outbox_plain").create(
        {"id": int, "topic": str, "payload": str, "qos": int, "retain": int, "created_at": str},
        pk="id",
        not_null={"topic", "payload", "qos", "retain", "created_at"},
        defaults={"qos": 1, "retain": 0},
    )
    db.execute("INSERT INTO mqtt_outbox_plain SELECT * FROM mqtt_outbox")
    db.execute("DROP TABLE mqtt_outbox")  # secure_delete: its freed pages are zeroed
    db.execute("ALTER TABLE mqtt_outbox_plain RENAME TO mqtt_outbox")
    db.execute("DELETE FROM sqlite_sequence WHERE name IN ('mqtt_outbox', 'mqtt_outbox_plain')")


MIGRATIONS_3 = [Migration("edge_0007_mqtt_outbox_plain_ids", _v3)]


class Wire(Protocol):
    def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        expiry_s: int | None = None,
    ) -> int: ...


@dataclass(frozen=True)
class Outbound:
    """A message of the outbox, as `put` takes it and `hand_out` gives it."""

    topic: str
    payload: dict[str, Any] = field(default_factory=dict)
    retain: bool = False
    qos: int = 1


class DurableOutbox:
    """The MQTT outbox; only the loop thread calls it. Also a `DurableQueue` (a2a_common.queues):
    `flush()` and `on_published()` are its hand-out and ack through paho."""

    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._wire: Wire | None = None
        self._in_flight: dict[int, int] = {}  # paho mid -> row id
        self._last_handed = 0  # rows are handed in id order, each once per process
        self._last_id: int | None = None  # the last id given (the table's largest at start)
        self._acked: list[int] = []
        self._expiring = ""  # topics under it carry a `deadline`: they expire (SPEC 4.2)

    def expire_under(self, prefix: str) -> None:
        """Rows on topics under `prefix` (task commands) are sent with an MQTT 5 message expiry
        of the time left to their `deadline`, and never once it has passed; a `safe_stop`
        command never expires (SPEC 4.2)."""
        self._expiring = prefix

    def _expiry(self, topic: str, payload: str) -> tuple[bool, int | None]:
        """(send it, its expiry in whole seconds or None)."""
        if not self._expiring or not topic.startswith(self._expiring):
            return True, None
        body = json.loads(payload)
        if not isinstance(body, dict) or body.get("safe_stop") is True:
            return True, None
        deadline = body.get("deadline")
        if not isinstance(deadline, str):
            return True, None
        left = (parse_iso(deadline) - self._clock.now()).total_seconds()
        return left > 0, max(1, math.ceil(left))

    def attach(self, wire: Wire) -> None:
        self._wire = wire

    def enqueue(
        self, topic: str, payload: dict[str, Any], *, retain: bool = False, qos: int = 1
    ) -> None:
        """Call inside the transaction whose change this message reports."""
        self.put(Outbound(topic, payload, retain, qos))

    def put(self, item: Outbound) -> int:
        """`enqueue` as a `DurableQueue`: returns the row's id."""
        row_id = self._new_id()
        self._db.execute(
            "INSERT INTO mqtt_outbox (id, topic, payload, qos, retain, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                row_id,
                item.topic,
                jsonx.dumps(item.payload),
                item.qos,
                int(item.retain),
                iso(self._clock.now()),
            ],
        )
        return row_id

    def _new_id(self) -> int:
        """Larger than any id given or handed in this process: SQLite's own choice (the
        largest row's + 1) would go back to 1 once the table is empty, under `_last_handed`,
        and `flush()` would never send the row. A rolled-back insert leaves a gap: harmless."""
        if self._last_id is None:
            row = self._db.execute("SELECT coalesce(max(id), 0) FROM mqtt_outbox").fetchone()
            self._last_id = int(row[0])
        self._last_id = max(self._last_id, self._last_handed) + 1
        return self._last_id

    def flush(self) -> int:
        """Hand every committed row not yet handed to paho; returns how many."""
        if self._wire is None:
            return 0
        rows = self._db.execute(
            "SELECT id, topic, payload, qos, retain FROM mqtt_outbox WHERE id > ? ORDER BY id",
            [self._last_handed],
        ).fetchall()
        sent = 0
        rows.sort(key=lambda r: (_SAFE_STOP not in r[2], r[0]))  # safe stops go first
        for row_id, topic, payload, qos, retain in rows:
            self._last_handed = max(self._last_handed, row_id)
            send, expiry_s = self._expiry(topic, payload)
            if not send:  # a command past its deadline is never sent (SPEC 4.2)
                log.warning("command on %s dropped unsent: past its deadline", topic)
                self._delete(row_id)
                continue
            mid = self._wire.publish(
                topic, payload.encode("utf-8"), qos=qos, retain=bool(retain), expiry_s=expiry_s
            )
            if qos == 0:
                self._delete(row_id)
            else:
                self._in_flight[mid] = row_id
            sent += 1
        return sent

    def on_published(self, mid: int) -> None:
        """A PUBACK arrived; the row is deleted by the next `reap()` (one transaction for all
        PUBACKs that arrived together)."""
        row_id = self._in_flight.pop(mid, None)
        if row_id is not None:
            self.ack([row_id])

    def hand_out(self, limit: int) -> list[Handed[int, Outbound]]:
        """Up to `limit` rows not handed yet in this process, oldest first, without a wire (what
        `flush()` does with paho, minus its safe stops first and expiry); each once per
        process, like `flush()`'s."""
        rows = self._db.execute(
            "SELECT id, topic, payload, qos, retain FROM mqtt_outbox WHERE id > ?"
            " ORDER BY id LIMIT ?",
            [self._last_handed, limit],
        ).fetchall()
        if rows:
            self._last_handed = max(self._last_handed, rows[-1][0])
        return [
            Handed(row_id, Outbound(topic, json.loads(payload), bool(retain), qos))
            for row_id, topic, payload, qos, retain in rows
        ]

    def ack(self, ids: Iterable[int]) -> None:
        """These rows were delivered: the next `reap()` deletes them."""
        self._acked.extend(ids)

    @property
    def acked(self) -> int:
        """PUBACKed rows the next `reap()` deletes."""
        return len(self._acked)

    def reap(self) -> int:
        """Delete the PUBACKed rows (inside the caller's transaction, or one of its own); when
        the DB refuses, they stay listed for the next reap."""
        acked = list(self._acked)
        if acked:
            with self._db.atomic():
                self._db.conn.executemany(
                    "DELETE FROM mqtt_outbox WHERE id = ?", [(row_id,) for row_id in acked]
                )
            del self._acked[: len(acked)]
        return len(acked)

    def _delete(self, row_id: int) -> None:
        with self._db.atomic():
            self._db.execute("DELETE FROM mqtt_outbox WHERE id = ?", [row_id])

    def rows_under(self, prefix: str) -> list[tuple[int, dict[str, Any]]]:
        """Rows still owed (never PUBACKed) on topics under `prefix`, oldest first."""
        rows = self._db.execute(
            "SELECT id, payload FROM mqtt_outbox WHERE topic >= ? AND topic < ? ORDER BY id",
            [prefix, prefix + "\uffff"],
        ).fetchall()
        return [(row_id, json.loads(payload)) for row_id, payload in rows]

    def replace(self, row_id: int, payload: dict[str, Any]) -> None:
        self._db.execute(
            "UPDATE mqtt_outbox SET payload = ? WHERE id = ?", [jsonx.dumps(payload), row_id]
        )

    def drop(self, row_id: int) -> None:
        self._db.execute("DELETE FROM mqtt_outbox WHERE id = ?", [row_id])

    def in_flight(self) -> int:
        return len(self._in_flight)

    def pending(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM mqtt_outbox").fetchone()[0])

    def count(self) -> int:
        return self.pending()

    def prune(self, before: str, limit: int) -> int:
        """Up to `limit` rows written before `before` that would never be sent: commands past
        their deadline (`expire_under`; `flush()` drops them too, when it meets them). Inside
        the caller's transaction; returns how many. Every other row waits for its PUBACK."""
        if not self._expiring or limit <= 0:
            return 0
        rows = self._db.execute(
            "SELECT id, topic, payload FROM mqtt_outbox WHERE topic >= ? AND topic < ?"
            " AND created_at < ? ORDER BY id",
            [self._expiring, self._expiring + "\uffff", before],
        ).fetchall()
        void = [(row_id,) for row_id, topic, payload in rows if not self._expiry(topic, payload)[0]]
        void = void[:limit]
        if void:
            with self._db.atomic():
                self._db.conn.executemany("DELETE FROM mqtt_outbox WHERE id = ?", void)
        return len(void)


if TYPE_CHECKING:  # mypy checks that it conforms
    _conforms: type[DurableQueue[Outbound, int]] = DurableOutbox
