"""Helpers of the state-file tests: the CLI as a subprocess, a run expected to stop by itself."""

from __future__ import annotations

import subprocess
import sys
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
