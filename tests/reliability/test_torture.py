"""Crash torture in CI: 12 SIGKILLs of the runtime under a mixed workload (run_full.sh: 200)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.torture import Torture

KILLS = int(os.environ.get("A2A_TORTURE_KILLS", "12"))


def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    torture = Torture(tmp_path)
    try:
        for _ in range(KILLS):
            torture.step()
        torture.settle()
        f = torture.check()
    finally:
        torture.close()
    print(f)
    assert f.kills == KILLS and f.integrity_failures == 0
    assert f.turns_without_pair == 0 and f.duplicate_pairs == 0
    assert f.lost_writes == 0 and f.duplicate_applications == 0
    assert f.stuck_workflows == 0
