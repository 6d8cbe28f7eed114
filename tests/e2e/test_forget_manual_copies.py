"""A forget reaches every file under the state dir, a copy an operator put in `backups/`
included (SPEC §5.5; issue 34 follow-up), through the real process and the real CLI.

Reproduced on main: the README's own upgrade step wrote `a2a-edge db backup
<state_dir>/backups/before-upgrade.db`; the runtime removed only the copies it named itself
(`state-v*.db`), so after `memory forget --person mom` (or `--pair`) 엄마's words were still
in that file. Now every file under `backups/` is the runtime's copy, and `db backup` into the
state dir is refused (a copy to keep goes outside it)."""

from __future__ import annotations

import shutil
from pathlib import Path

from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, state_dir
from tests.reliability.files import edge_cli

MOM, SON = "mom", "son"
MARK_M, MARK_S = b"QxMcopy1", b"QxScopy1"


def holding(state: Path, needle: bytes) -> list[str]:
    return [
        str(p.relative_to(state))
        for p in sorted(state.rglob("*"))
        if p.is_file() and needle in p.read_bytes()
    ]


def test_a_forget_removes_an_operators_copy_in_backups(
    tmp_path: Path, runtime_factory: RuntimeFactory, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    state = state_dir(tmp_path)
    for who, mark in ((MOM, MARK_M), (SON, MARK_S)):
        speaker = {"id": who, "confidence": 0.95}
        assert probe.turn(f"t-{who}", f"안방 청정해줘 {mark.decode()}", speaker=speaker)["status"]
    outside = tmp_path / "outside.db"
    made = edge_cli("db", "backup", str(outside), "--config", config)
    assert made.returncode == 0, made.stderr
    # the operator's copies in backups/: one beside the runtime's, one in a folder of its own
    (state / "backups" / "old").mkdir(parents=True)
    shutil.copyfile(outside, state / "backups" / "manual.db")
    shutil.copyfile(outside, state / "backups" / "old" / "before-upgrade.db")
    copies = ["backups/manual.db", "backups/old/before-upgrade.db"]
    assert [f for f in holding(state, MARK_M) if f.startswith("backups/")] == copies
    forgot = edge_cli("memory", "forget", "--person", MOM, "--config", config)
    assert forgot.returncode == 0, forgot.stderr
    assert holding(state, MARK_M) == []
    assert holding(state, MARK_S) == ["state.db"]  # the copies went whole, 아들's words too
    assert state_rows("SELECT count(*) FROM pairs WHERE person_id = ?", [SON]) == [(1,)]
    # a pair forgotten by id reaches a copy made after the first forget
    shutil.copyfile(outside, state / "backups" / "manual.db")
    [(pair_id,)] = state_rows("SELECT pair_id FROM pairs WHERE person_id = ?", [SON])
    forgot = edge_cli("memory", "forget", "--pair", pair_id, "--config", config)
    assert forgot.returncode == 0, forgot.stderr
    assert holding(state, MARK_S) == []
    # `db backup` into the state dir is refused: a copy there is the runtime's to remove
    for inside in (state / "backups" / "manual.db", state / "mine.db"):
        refused = edge_cli("db", "backup", str(inside), "--config", config)
        assert refused.returncode == 1, refused
        assert refused.stderr.strip().splitlines() == [
            f"a2a-edge: cannot write {inside}: it is inside the state dir {state}, whose copies"
            " a forget removes; write it outside the state dir"
        ], refused.stderr
        assert not inside.exists()
