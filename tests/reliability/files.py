"""Helpers of the state-file tests: the CLI as a subprocess, a run expected to stop by itself,
damage done to a DB file, and a read-only state dir made the way this machine allows."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from sim.processes import RuntimeProcess
from tests.conftest import RuntimeFactory


def edge_cli(*args: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge", *args], capture_output=True, text=True, timeout=timeout_s
    )


def run_to_exit(
    tmp_path: Path, runtime_factory: RuntimeFactory, timeout_s: float = 20
) -> tuple[int, list[str], RuntimeProcess]:
    """Start `a2a-edge run` on this test's config expecting it to stop by itself: its exit code
    and the lines it wrote (this run's only). A run that does not stop in time fails the test."""
    log = tmp_path / "runtime.log"
    offset = log.stat().st_size if log.exists() else 0
    runtime = runtime_factory(wait_ready=False)
    assert runtime.proc is not None
    try:
        code = runtime.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        runtime.kill()
        pytest.fail(f"the run did not stop within {timeout_s}s:\n{runtime.log()[offset:]}")
    with log.open("rb") as stream:
        stream.seek(offset)
        text = stream.read().decode("utf-8", "replace")
    return code, [line for line in text.splitlines() if line.strip()], runtime


def table_pages(db: Path, name: str) -> list[int]:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT pageno FROM dbstat WHERE name = ?", (name,)).fetchall()
    return [int(row[0]) for row in rows]


def page_size(db: Path) -> int:
    """The DB's page size, from its header (bytes 16-17; 1 stands for 65536)."""
    with db.open("rb") as stream:
        stream.seek(16)
        size = int.from_bytes(stream.read(2), "big")
    return 65536 if size == 1 else size


def smash_page(db: Path, page: int, seed: int = 15) -> None:
    """Write one page of random bytes over page `page` (1-based) of `db`, at the DB's own
    page size (a new state DB's pages are 1 KiB: a2a_common.sqlite.PAGE_SIZE)."""
    size = page_size(db)
    noise = random.Random(seed).randbytes(size)
    with db.open("r+b") as stream:
        stream.seek((page - 1) * size)
        stream.write(noise)


def _run(*cmd: str) -> bool:
    if shutil.which(cmd[0]) is None:
        return False
    return subprocess.run(cmd, capture_output=True).returncode == 0


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`chattr +i path` for the block (root, and a filesystem with the flag), else a skip."""
    if os.geteuid() != 0:
        pytest.skip("chattr +i needs root")
    if not _run("chattr", "+i", str(path)):
        pytest.skip("chattr +i is not available here (no chattr, or the filesystem refuses)")
    try:
        yield
    finally:
        _run("chattr", "-i", str(path))


@contextlib.contextmanager
def read_only_dir(directory: Path, how: str) -> Iterator[None]:
    """The directory cannot be written, by `how`: "chmod" (not root: root writes anyway),
    "mount" (a read-only bind mount over it) or "chattr" (immutable: no new files)."""
    if how == "chmod":
        if os.geteuid() == 0:
            pytest.skip("root writes into a chmod 500 directory; the root cases cover this")
        directory.chmod(0o500)
        try:
            yield
        finally:
            directory.chmod(0o700)
        return
    if how == "chattr":
        with immutable(directory):
            yield
        return
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    if not _run("mount", "--bind", str(directory), str(directory)):
        pytest.skip("cannot bind-mount here (no mount, or no CAP_SYS_ADMIN)")
    try:
        if not _run("mount", "-o", "remount,bind,ro", str(directory)):
            pytest.skip("cannot remount a bind mount read-only here")
        yield
    finally:
        _run("umount", str(directory))
