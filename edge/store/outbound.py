"""Durable outbound MQTT: rows written in the caller's transaction, deleted on PUBACK.

paho keeps an unacknowledged QoS 1 publish only in RAM; a crash or a broker outage would lose
it. So every QoS 1 message the runtime owes is first a row of `mqtt_outbox`, written in the
same transaction as the state change that caused it. `flush()` hands rows to paho after the
commit; the PUBACK deletes the row. Rows left at a restart are published again (receivers
dedupe on their ids, as QoS 1 requires anyway).

On a real connection (a wire that is a `Link`: edge/channel/mqtt.py) rows wait in the DB, not in
paho's memory (SPEC 4.2): they are handed only while a connection is up, at most `window`
unacknowledged at a time (refilled as PUBACKs come), so a row is handed about when it is written
to the socket and a command's MQTT 5 expiry is computed then. When the connection changes, every
row not PUBACKed is handed again (the channel dropped paho's copies), its expiry computed anew; a
command past its deadline is deleted unsent, whenever it is met, and a command whose task has
ended leaves with that end, in its transaction (`drop_commands`). A `safe_stop` row skips the
window and goes before every other waiting row.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from a2a_common import jsonx
from a2a_common.clock import Clock, iso, parse_iso
from a2a_common.db import Database
from a2a_common.queues import Handed
from a2a_common.sqlite import Migration

if TYPE_CHECKING:
    from a2a_common.queues import DurableQueue

log = logging.getLogger(__name__)
_SAFE_STOP = '"safe_stop":true'  # as jsonx writes it
WINDOW = 16  # rows handed and not PUBACKed, per connection: "handed but not written" stays small


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


def _is_safe_stop(payload: str) -> bool:
    body = json.loads(payload)
    return isinstance(body, dict) and body.get("safe_stop") is True


@runtime_checkable
class Link(Protocol):
    """A wire that says whether a broker connection is up (MqttChannel): the outbox then hands
    rows only on one, a window at a time. A wire without it (a recording stand-in) takes every
    row at once, as if always connected."""

    @property
    def connection(self) -> int | None: ...


@runtime_checkable
class Batching(Protocol):
    """A wire whose `sending()` scope writes what is published in it to the socket in one go,
    as it ends (MqttChannel): the rows one flush hands go out in one send."""

    def sending(self) -> AbstractContextManager[object]: ...


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

    def __init__(self, *, db: Database, clock: Clock, window: int = WINDOW) -> None:
        self._db = db
        self._clock = clock
        self._window = max(1, window)
        self._wire: Wire | None = None
        self._link: Link | None = None
        self._sending: Callable[[], AbstractContextManager[object]] = nullcontext
        self._in_flight: dict[int, int] = {}  # paho mid -> row id, on connection `_connection`
        self._connection: int | None = None  # the connection the rows in flight were handed on
        self._stops: set[int] = set()  # mids of safe stops in flight: outside the window
        self._cursor = 0  # rows up to this id were met in id order on this connection
        # a row may wait past the cursor: one was put since flush() last read to the end, or
        # the cursor went back (a new connection); else flush() asks the table nothing
        self._unread = True
        self._urgent = True  # a safe stop may wait unhanded (at start: rows of an earlier run)
        self._void: set[int] = set()  # rows to drop that the DB would not delete: never sent
        self._last_handed = 0  # `hand_out`'s: rows handed in id order, each once per process
        self._last_id: int | None = None  # the last id given (the table's largest at start)
        self._first_own: int | None = None  # rows from this id on were put by this process
        self._handed: set[int] = set()  # rows handed to a wire in this process, not deleted
        self._acked: list[int] = []
        self._expiring = ""  # topics under it carry a `deadline`: they expire (SPEC 4.2)
        self._first: tuple[str, ...] = ()  # topics handed ahead of the others they were read with

    def expire_under(self, prefix: str) -> None:
        """Rows on topics under `prefix` (task commands) are sent with an MQTT 5 message expiry
        of the time left to their `deadline`, and never once it has passed; a `safe_stop`
        command never expires (SPEC 4.2)."""
        self._expiring = prefix

    def send_first(self, *prefixes: str) -> None:
        """Rows on topics under these prefixes (the agents': commands and cancels) are handed
        ahead of the other rows a flush reads with them, in id order among themselves: a
        callback's batch commits the step's workflow/event rows before the dependant's command,
        which then waited behind their writes to the socket (issue 36: the critical path).
        Only the order across topics changes, and only among rows handed together; on each
        topic rows still go in id order."""
        self._first = prefixes

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
        self._link = wire if isinstance(wire, Link) else None
        self._sending = wire.sending if isinstance(wire, Batching) else nullcontext

    def enqueue(
        self, topic: str, payload: dict[str, Any], *, retain: bool = False, qos: int = 1
    ) -> None:
        """Call inside the transaction whose change this message reports."""
        self.put(Outbound(topic, payload, retain, qos))

    def put(self, item: Outbound) -> int:
        """`enqueue` as a `DurableQueue`: returns the row's id."""
        row_id = self._new_id()
        self._unread = True
        if item.payload.get("safe_stop") is True:
            self._urgent = True
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
            self._first_own = max(self._last_id, self._last_handed) + 1
        self._last_id = max(self._last_id, self._last_handed) + 1
        return self._last_id

    def flush(self) -> int:
        """Hand what is owed while a connection is up: first every safe stop not handed yet
        (whatever the window), then rows in id order while fewer than `window` wait for their
        PUBACK. Returns how many were handed."""
        if self._wire is None or not self._on_connection():
            return 0
        with self._sending():
            return self._flush()

    def _flush(self) -> int:
        sent = self._hand_safe_stops() if self._urgent else 0
        while self._unread and self._window_left() > 0:
            skip = self._handed_ids()
            limit = self._window_left() + len(skip)
            rows = self._db.execute(
                "SELECT id, topic, payload, qos, retain FROM mqtt_outbox WHERE id > ?"
                " ORDER BY id LIMIT ?",
                [self._cursor, limit],
            ).fetchall()
            met: set[int] = set()
            for row in self._in_send_order(rows, skip):
                if self._window_left() <= 0:
                    break
                met.add(row[0])
                if row[0] not in skip:
                    sent += self._hand(*row)
            # the cursor: the last row read before the first one not met (a row handed past
            # it is in flight and skipped when read again)
            for row in rows:
                if row[0] not in met:
                    break
                self._cursor = row[0]
            else:  # every row read was met: fewer than asked means none waits past them
                self._unread = len(rows) == limit
        return sent

    def _in_send_order(self, rows: list[Any], skip: set[int]) -> list[Any]:
        """`send_first`'s rows, then the others, each in id order, when the window has room
        for every row read that is to be handed; else id order (a row never waits behind later
        ones past this flush)."""
        if not self._first or len(rows) < 2:
            return rows
        if sum(row[0] not in skip for row in rows) > self._window_left():
            return rows
        first = [row for row in rows if row[1].startswith(self._first)]
        if not first or len(first) == len(rows):
            return rows
        return first + [row for row in rows if not row[1].startswith(self._first)]

    def _on_connection(self) -> bool:
        """Whether rows may be handed now; a new connection first forgets the rows handed on
        the last one (not PUBACKed: they go again, in order, with a fresh expiry)."""
        current = 0 if self._link is None else self._link.connection
        if current is None:
            return False
        if current != self._connection:
            if self._in_flight:
                log.info("%d outbox rows not PUBACKed: handed again", len(self._in_flight))
            self._in_flight.clear()
            self._stops.clear()
            self._connection, self._cursor, self._urgent = current, 0, True
            self._unread = True
        return True

    def _window_left(self) -> int:
        if self._link is None:  # a stand-in: no window (a batch per SELECT)
            return 1000
        return self._window - len(self._in_flight) + len(self._stops)

    def _handed_ids(self) -> set[int]:
        """Rows not to hand now: in flight, PUBACKed (deleted by the next reap), void."""
        return set(self._in_flight.values()) | set(self._acked) | self._void

    def _hand_safe_stops(self) -> int:
        self._urgent = False
        rows = self._db.execute(
            "SELECT id, topic, payload, qos, retain FROM mqtt_outbox"
            " WHERE instr(payload, ?) > 0 ORDER BY id",
            [_SAFE_STOP],
        ).fetchall()
        skip = self._handed_ids()
        stops = [r for r in rows if r[0] not in skip and _is_safe_stop(r[2])]
        return sum(self._hand(i, t, p, q, r, urgent=True) for i, t, p, q, r in stops)

    def _hand(
        self, row_id: int, topic: str, payload: str, qos: int, retain: int, urgent: bool = False
    ) -> int:
        """One row to the wire (1), or a command past its deadline deleted unsent (0)."""
        assert self._wire is not None
        self._last_handed = max(self._last_handed, row_id)
        send, expiry_s = self._expiry(topic, payload)
        if not send:  # a command past its deadline is never sent (SPEC 4.2)
            log.warning("command on %s dropped unsent: past its deadline", topic)
            self._forget(row_id)
            return 0
        self._handed.add(row_id)  # from here it may reach the broker, PUBACK or not
        mid = self._wire.publish(
            topic, payload.encode("utf-8"), qos=qos, retain=bool(retain), expiry_s=expiry_s
        )
        if qos == 0:
            self._forget(row_id)
        else:
            self._in_flight[mid] = row_id
            if urgent:
                self._stops.add(mid)
        return 1

    def _forget(self, row_id: int) -> None:
        """Delete a row sent once for all (QoS 0) or never to be sent; when the DB refuses the
        delete, the row is skipped from now on (the prune or the next start removes it)."""
        try:
            self._delete(row_id)
        except Exception as exc:  # a full disk, a DB that refuses writes: not sent meanwhile
            log.warning("outbox row %d not deleted (%s): skipped", row_id, type(exc).__name__)
            self._void.add(row_id)

    def on_published(self, mid: int) -> None:
        """A PUBACK arrived; the row is deleted by the next `reap()` (one transaction for all
        PUBACKs that arrived together). On a connection, the window has room: the next rows go
        (when none waits, that costs one SELECT)."""
        if self._link is not None and self._link.connection != self._connection:
            return  # a mid of an older connection: its row goes again on this one
        row_id = self._in_flight.pop(mid, None)
        self._stops.discard(mid)
        if row_id is not None:
            self.ack([row_id])
            if self._link is not None:
                self.flush()

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
            self._handed.update(row[0] for row in rows)
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
            self._handed.difference_update(acked)
        return len(acked)

    def _delete(self, row_id: int) -> None:
        with self._db.atomic():
            self._db.execute("DELETE FROM mqtt_outbox WHERE id = ?", [row_id])
        self._handed.discard(row_id)

    def rows_under(self, prefix: str) -> list[tuple[int, dict[str, Any]]]:
        """Rows still owed (never PUBACKed) on topics under `prefix`, oldest first."""
        rows = self._db.execute(
            "SELECT id, payload FROM mqtt_outbox WHERE topic >= ? AND topic < ? ORDER BY id",
            [prefix, prefix + "\uffff"],
        ).fetchall()
        return [(row_id, json.loads(payload)) for row_id, payload in rows]

    def replace(self, row_id: int, payload: dict[str, Any]) -> None:
        if payload.get("safe_stop") is True:
            self._urgent = True
        self._db.execute(
            "UPDATE mqtt_outbox SET payload = ? WHERE id = ?", [jsonx.dumps(payload), row_id]
        )

    def drop(self, row_id: int) -> None:
        self._db.execute("DELETE FROM mqtt_outbox WHERE id = ?", [row_id])

    def _never_handed(self, row_id: int) -> bool:
        """Put by this process and never handed to a wire: it cannot have reached the broker.
        A row of an earlier run may have been handed before a crash."""
        own = self._first_own is not None and row_id >= self._first_own
        return own and row_id not in self._handed

    def drop_commands(self, task_id: str) -> tuple[int, int]:
        """The task ended (any terminal state, SPEC 4.2): its command rows not PUBACKed leave
        the outbox in the caller's transaction, never sent again — waiting for a connection or
        handed on one (its PUBACK, if it comes, finds no row; a new connection hands only rows).
        A safe stop commanded for it stays. Returns how many (never handed to a wire in this
        process, handed: these may have reached the agent)."""
        if not self._expiring:
            return 0, 0
        rows = self._db.execute(
            "SELECT id, payload FROM mqtt_outbox WHERE topic >= ? AND topic < ?"
            " AND instr(payload, ?) > 0",
            [self._expiring, self._expiring + "\uffff", jsonx.dumps(task_id)],
        ).fetchall()
        void = []
        for row_id, payload in rows:
            body = json.loads(payload)
            if body.get("task_id") == task_id and body.get("safe_stop") is not True:
                void.append((row_id,))
        unsent = sum(self._never_handed(row_id) for (row_id,) in void)
        if void:
            self._db.conn.executemany("DELETE FROM mqtt_outbox WHERE id = ?", void)
        if unsent:
            log.info("command of %s dropped unsent: the task has ended", task_id)
        if len(void) > unsent:
            log.info("command of %s handed, not PUBACKed, dropped: the task has ended", task_id)
        return unsent, len(void) - unsent

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
