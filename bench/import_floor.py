"""The design card's import floor as a process (issue 36): the least a runtime on the card's
libraries holds and does before READY. It imports pydantic, httpx, paho-mqtt, tenacity and
sqlite-utils, builds one model of each kind (a pydantic model validated, an httpx.Client, a
paho Client, a tenacity Retrying, a sqlite_utils Database opened in WAL with
`synchronous=FULL` and its schema read), connects to the broker and holds one subscription
(SUBACK: what our READY=1 promises), then sends READY=1 to `$NOTIFY_SOCKET` as the runtime
does and idles until SIGTERM.

Run by path with the interpreter under test (`-P`: bench/ is not put on sys.path, and the
runtime-only venv has no `bench` package), as bench/footprint.py does:

    VENV/bin/python -P bench/import_floor.py --db STATE.db --port 1883 --cloud http://…
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import threading
from typing import Any

import httpx
import paho.mqtt.client as mqtt
import pydantic
import sqlite_utils
import tenacity
from paho.mqtt.enums import CallbackAPIVersion


class Turn(pydantic.BaseModel):
    """One model of the card's kind: a turn as it comes in."""

    turn_id: str
    text: str
    device_context: dict[str, Any] = {}


def notify(line: str) -> None:
    """sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET, if set."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(path)
        sock.send(line.encode())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cloud", default="http://127.0.0.1:9")
    parser.add_argument("--root", default="a2a/robot-floor")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Turn.model_validate({"turn_id": "t0", "text": "오늘 날씨 어때?", "device_context": {"a": 1}})
    http = httpx.Client(base_url=args.cloud, timeout=5.0)
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_exponential(max=2), reraise=True
    )
    db = sqlite_utils.Database(args.db)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.table_names()  # the schema read: sqlite opens the file lazily
    subscribed = threading.Event()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="a2a-floor")
    client.on_connect = lambda c, *_a: c.subscribe(f"{args.root}/#", qos=1)
    client.on_subscribe = lambda *_a: subscribed.set()
    client.connect("127.0.0.1", args.port)
    client.loop_start()
    if not subscribed.wait(20):
        raise SystemExit("no SUBACK within 20 s")
    notify("READY=1")
    stop.wait()
    client.disconnect()
    client.loop_stop()
    http.close()
    db.close()
    del retrying


if __name__ == "__main__":
    main()
