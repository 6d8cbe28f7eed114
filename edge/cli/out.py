"""What the CLI prints: JSON with `--json`, else tables, with colour and progress on a terminal.

`rich` draws the tables (cell widths from Unicode East-Asian width, so Korean lines up), the
colour (only on a terminal; `NO_COLOR` and `TERM=dumb` honoured, `FORCE_COLOR` too) and the
progress bar (only when stderr is a terminal). It is imported inside these functions, never at
module level: `a2a-edge run` must not carry it (tests/e2e/test_cli.py checks the service's
import graph). Tables are plain (no box), one row a line, header first: greppable, and never
wrapped when the output is not a terminal.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from rich.console import Console

STYLES = {  # value -> style, wherever a cell shows exactly this value
    "running": "green",
    "ok": "green",
    "connected": "green",
    "reachable": "green",
    "completed": "green",
    "verified": "green",
    "not running": "bold red",
    "degraded": "yellow",
    "failed": "red",
    "cancelled": "yellow",
    "unreachable": "red",
    "disconnected": "red",
    "NOT verified": "bold red",
    "plain http": "yellow",
}
WIDE = 100_000  # a table written to a pipe or a file is never wrapped


def console(stream: TextIO | None = None) -> Console:
    from rich.console import Console

    out = stream or sys.stdout
    terminal = out.isatty()
    plain = "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb"
    return Console(
        file=out,
        # NO_COLOR/dumb: no escape codes at all (rich alone drops colours but keeps bold)
        color_system=None if plain else "auto",
        highlight=False,
        emoji=False,
        markup=False,
        width=None if terminal else WIDE,
        soft_wrap=not terminal,
    )


def _print(out: Console, *things: Any) -> None:
    """On a terminal as rich draws it; elsewhere without the cells' trailing padding."""
    if out.is_terminal:
        for thing in things:
            out.print(thing)
        return
    with out.capture() as captured:
        for thing in things:
            out.print(thing)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    out.file.write(text + "\n")


def emit_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))


def shown(value: Any) -> str:
    """A cell: None as '-', a dict as `k v, k v`, a list comma-joined, JSON for the rest."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {shown(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple):
        return ", ".join(shown(v) for v in value) or "-"
    return json.dumps(value, ensure_ascii=False)


def _style(text: str) -> str:
    return STYLES.get(text, "")


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    title: str = "",
    stream: TextIO | None = None,
    right: Sequence[str] = (),
    clip: Mapping[str, int] | None = None,
) -> None:
    """A header and one line a row; `right` names the columns aligned right (numbers);
    `clip` cuts a column to so many cells (with an ellipsis) on a terminal only."""
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=None, show_edge=False, pad_edge=False, header_style="bold")
    out = console(stream)
    for name in columns:
        limit = (clip or {}).get(name) if out.is_terminal else None
        grid.add_column(
            name,
            justify="right" if name in right else "left",
            overflow="ellipsis" if limit else "fold",
            no_wrap=bool(limit),
            max_width=limit,
        )
    for row in rows:
        cells = [shown(cell) for cell in row]
        grid.add_row(*(Text(cell, style=_style(cell)) for cell in cells))
    _print(out, *([Text(title, style="bold")] if title else []), grid)


def fields(values: Mapping[str, Any], *, title: str = "", stream: TextIO | None = None) -> None:
    """Key/value lines: the keys are the `--json` names, so one list documents both."""
    from rich.table import Table
    from rich.text import Text

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    for key, value in values.items():
        cell = shown(value)
        grid.add_row(key, Text(cell, style=_style(cell)))
    _print(console(stream), *([Text(title, style="bold")] if title else []), grid)


def error(message: str) -> None:
    """`a2a-edge: message` on stderr (red on a terminal). Under journald (a service's exit 2
    or 3, a refused `ExecReload=`) it is one `<3>` line: `journalctl -p err` shows why."""
    from rich.text import Text

    from edge.host.log import under_journald

    if under_journald(sys.stderr):
        sys.stderr.write(f"<3>a2a-edge: {message}\n")
        sys.stderr.flush()
        return
    console(sys.stderr).print(Text(f"a2a-edge: {message}", style="red"))


@contextmanager
def progress(total: int, what: str, *, show: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A bar on stderr while `update(done, pending)` is called; nothing when stderr is not a
    terminal (a service's journal or a script's log gets no carriage returns)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(sys.stderr),
        disable=not (show and sys.stderr.isatty()),
        transient=False,
    )
    task = bar.add_task(what, total=max(total, 1))

    def update(done: int, pending: int) -> None:
        bar.update(task, completed=done, total=max(total, done + pending, 1))

    with bar:
        yield update
