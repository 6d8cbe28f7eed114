"""What `a2a-edge demo` prints: the timeline (text, coloured on a terminal, or JSON lines), the
runtime's log as it is written (`--verbose`) and the summary table.

`rich` draws the colour (a terminal only; `NO_COLOR` honoured) and the summary table, whose
cells it measures in terminal cells (Korean is two cells wide), so the columns line up."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

STYLES = {
    "scene": "bold cyan",
    "user": "bold yellow",
    "robot": "bold green",
    "step": "white",
    "info": "magenta",
    "wait": "italic magenta",
    "warn": "bold red",
    "log": "dim",
}


class Timeline:
    def __init__(self, *, as_json: bool, out: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out or sys.stdout
        self.console = Console(file=self.out, highlight=False, markup=False, emoji=False)
        self.t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # the log tail prints from its own thread

    def line(self, kind: str, ko: str, en: str = "", **data: Any) -> None:
        event = {"t": round(time.monotonic() - self.t0, 2), "kind": kind, "ko": ko, "en": en}
        event.update(data)
        self.events.append(event)
        if self.as_json:
            with self._lock:
                print(json.dumps(event, ensure_ascii=False), file=self.out, flush=True)
            return
        text = f"{ko}" + (f"  · {en}" if en else "")
        text = f"\n== {text}" if kind == "scene" else f"{event['t']:6.1f}s  {text}"
        self.print(text, kind)

    def print(self, text: str, kind: str) -> None:
        with self._lock:
            self.console.print(Text(text, style=STYLES.get(kind, "")), soft_wrap=True)
            self.out.flush()


class LogTail:
    """`--verbose`: the runtime's log lines as they are written, between the timeline's lines
    (on stderr with `--json`, so stdout stays JSON lines)."""

    def __init__(self, path: Path, timeline: Timeline) -> None:
        self.path = path
        self.timeline = timeline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-log-tail", daemon=True)
        self._offset = 0

    def start(self) -> LogTail:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._drain()
        self._drain()

    def _drain(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return
        end = chunk.rfind(b"\n") + 1  # whole lines only; the rest next time
        self._offset += end
        for raw in chunk[:end].splitlines():
            line = raw.decode("utf-8", "replace")
            if self.timeline.as_json:
                print(f"runtime │ {line}", file=sys.stderr, flush=True)
            else:
                self.timeline.print(f"        runtime │ {line}", "log")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    def shown(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k} {v}" for k, v in value.items())
        return str(value)

    names = (
        ("turns / 대화", "turns"),
        ("workflows / 워크플로", "workflows"),
        ("writes synced / 동기화된 쓰기", "writes_synced"),
        ("sync pending / 대기", "sync_pending"),
        ("snapshot bytes / 스냅샷 크기", "snapshot_bytes"),
        ("preferred_room / 선호 방", "preferred_room"),
    )
    return [(name, shown(summary[key])) for name, key in names]


def print_summary(summary: dict[str, Any], timeline: Timeline) -> None:
    if timeline.as_json:
        print(json.dumps({"kind": "summary", **summary}, ensure_ascii=False), flush=True)
        return
    table = Table(title="summary / 요약", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in summary_rows(summary):
        table.add_row(name, value)
    with timeline._lock:
        timeline.console.print()
        timeline.console.print(table)
