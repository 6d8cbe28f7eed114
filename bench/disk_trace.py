"""`bench.disk --trace`: where the bytes go, from the runtime's own write calls.

`strace -f` on the running runtime records every `pwrite64` (its first 24 bytes) and every
`fsync`/`fdatasync`/`ftruncate`. SQLite writes a WAL frame as a 24-byte header (page number,
and the DB size in pages on a transaction's last frame) then the 4 KiB page, and a checkpoint
writes pages into `state.db` at `(page - 1) * page_size`; so the trace gives each commit's
frames, which b-tree each page belongs to (`dbstat`, read at the end: a page freed and reused
meanwhile is counted under its last owner; pages on the freelist under `(free)`), the pages
each checkpoint copies back, and the syncs per file. The WAL index (`-shm`) is written through
a shared mapping, so it never appears here (writeback sends its few dirty pages).
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACE_UNITS = 10
SHAPES = 8  # the commonest commits (the b-trees of their frames) shown per kind
SETTLE_S = 2.5
_CALL = re.compile(
    r"^\d+\s+(pwrite64|fdatasync|fsync|ftruncate)\((\d+)"
    r'(?:, "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, (\d+), (\d+))?'
)


@dataclass
class Trace:
    commits: list[list[int]] = field(default_factory=list)  # the pages of each commit
    checkpointed: list[int] = field(default_factory=list)  # pages written into state.db
    syncs: Counter[str] = field(default_factory=Counter)
    wal_headers: int = 0
    _open: list[int] = field(default_factory=list)

    def frame(self, header: bytes) -> None:
        self._open.append(int.from_bytes(header[:4], "big"))
        if int.from_bytes(header[4:8], "big"):  # the commit frame
            self.commits.append(self._open)
            self._open = []


def files_of(pid: int, state: Path) -> dict[int, str]:
    """fd -> `db` / `wal` / `shm` for the runtime's open state files."""
    names = {"state.db": "db", "state.db-wal": "wal", "state.db-shm": "shm"}
    found = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = Path(fd.readlink())
        except OSError:
            continue
        if target.parent == state and target.name in names:
            found[int(fd.name)] = names[target.name]
    return found


def parse(text: str, fds: dict[int, str], page_size: int) -> Trace:
    trace = Trace()
    for line in text.splitlines():
        match = _CALL.match(line)
        if match is None:
            continue
        call, fd_s, buf, count, offset = match.groups()
        kind = fds.get(int(fd_s))
        if kind is None:
            continue
        if call != "pwrite64":
            trace.syncs[f"{call}({kind})"] += 1
            continue
        data = bytes(int(h, 16) for h in buf.split("\\x")[1:]) if buf else b""
        if kind == "wal" and int(count) == 24:
            trace.frame(data)
        elif kind == "wal" and int(offset) == 0:
            trace.wal_headers += 1
        elif kind == "db" and int(count) == page_size:
            trace.checkpointed.append(int(offset) // page_size + 1)
    return trace


def owners(db_path: Path) -> tuple[dict[int, str], int]:
    """page -> the b-tree (table or index) it belongs to now; and the page size."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        pages = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        conn.close()
    return pages, page_size


def strace(pid: int, out: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["strace", "-f", "-qq", "-xx", "-s", "24", "-o", str(out), "-p", str(pid),
         "-e", "trace=pwrite64,fdatasync,fsync,ftruncate", "-e", "signal=none"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # strace creates the file once it has attached
    time.sleep(0.5)
    return proc


def one_kind(rig: Any, unit: Callable[[], None], out: Path) -> str:
    proc = strace(rig.pid, out)
    try:
        for _ in range(TRACE_UNITS):
            unit()
        time.sleep(SETTLE_S)
    finally:
        proc.terminate()
        proc.wait(10)
    return out.read_text(errors="replace")


def summary(name: str, trace: Trace, pages: dict[int, str], units: int) -> list[str]:
    frames = [page for commit in trace.commits for page in commit]
    commits = max(1, len(trace.commits))
    by_tree = Counter(pages.get(page, "(free)") for page in frames)
    lines = [
        f"  {name}: {len(trace.commits) / units:.1f} commits/unit,"
        f" {len(frames) / commits:.1f} WAL frames/commit, {len(frames) / units:.1f} frames/unit,"
        f" {len(trace.checkpointed) / units:.1f} pages checkpointed/unit",
        "    syncs/unit: "
        + ", ".join(f"{k} {v / units:.1f}" for k, v in sorted(trace.syncs.items())),
        "    frames/unit by b-tree: "
        + ", ".join(f"{tree} {n / units:.1f}" for tree, n in by_tree.most_common(14)),
    ]
    shapes = Counter(
        " ".join(sorted(pages.get(page, "(free)") for page in commit)) for commit in trace.commits
    )
    for shape, n in shapes.most_common(SHAPES):
        lines.append(f"    {n / units:4.1f}/unit: {len(shape.split())} frames: {shape}")
    return lines


def traced_report(rig: Any, work: Path, kinds: dict[str, Callable[[], None]]) -> str:
    state = work / "state"
    fds = files_of(rig.pid, state)
    texts = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, unit in kinds.items():
            texts[name] = one_kind(rig, unit, Path(tmp) / f"{name}.strace")
    pages, page_size = owners(state / "state.db")
    lines = [f"under strace, {TRACE_UNITS} of each, back to back (fds: {sorted(fds.items())})"]
    for name, text in texts.items():
        lines += summary(name, parse(text, fds, page_size), pages, TRACE_UNITS)
    return "\n".join(lines)
