"""A state dir that others can write is warned about at start, one line naming the dir and its
mode (whoever can write it can replace state.db or its WAL). Before: a 0777 state dir started
without a word (issue 30, 16c)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import RuntimeFactory, state_dir


def dir_warnings(log: str) -> list[str]:
    return [line for line in log.splitlines() if " WARNING " in line and "state dir " in line]


@pytest.mark.parametrize(("mode", "who"), [(0o777, "group and others"), (0o770, "group")])
def test_a_state_dir_others_can_write_is_warned_at_start(
    tmp_path: Path, runtime_factory: RuntimeFactory, mode: int, who: str
) -> None:
    state = state_dir(tmp_path)
    state.mkdir()
    state.chmod(mode)
    runtime = runtime_factory()
    lines = dir_warnings(runtime.log())
    assert len(lines) == 1, runtime.log()[-3000:]
    assert f"state dir {state} is mode {mode:o}: {who} can write it" in lines[0]
    assert (state / "state.db").stat().st_mode & 0o777 == 0o600  # the files stay private


def test_a_private_state_dir_starts_without_that_warning(
    tmp_path: Path, runtime_factory: RuntimeFactory
) -> None:
    state = state_dir(tmp_path)
    state.mkdir()
    state.chmod(0o700)
    runtime = runtime_factory()
    assert "READY=1" in (runtime.notify.lines if runtime.notify else [])
    assert dir_warnings(runtime.log()) == []
