"""Forgetting through the real process: MQTT, the sim cloud, the SQLite file and its WAL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from sim.cloud import SimCloud
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually

SECRET = "우리 집 현관 비밀번호는 장미꽃 이천이십육이야"
# no category the lexicon knows: it would be synced, so a forget has an unsent write to drop
PLAIN_SECRET = "내 자전거 자물쇠 조합은 장미꽃 이천이십육이야"


def residue(tmp_path: Path, needles: list[bytes]) -> list[str]:
    found = []
    for path in [*(tmp_path / "state").glob("state.db*"), tmp_path / "runtime.log"]:
        data = path.read_bytes() if path.exists() else b""
        found += [f"{path.name}: {n.decode()}" for n in needles if n in data]
    return found


def test_forgotten_words_leave_no_residue(
    tmp_path: Path,
    state_rows: StateRows,
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
) -> None:
    runtime_factory()  # log level DEBUG: the strictest place to look
    probe.turn("t-secret", SECRET)
    probe.turn("t-other", "안녕")
    pair = state_rows("SELECT pair_id FROM pairs WHERE turn_id = ?", ["t-secret"])[0][0]
    needles = [SECRET.encode(), "장미꽃".encode()]
    assert residue(tmp_path, needles)  # it is there before the forget
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-1", "scope": "pair", "id": pair})
    result = probe.wait_for(f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-1")
    assert result["removed"]["pairs"] == 1
    eventually(lambda: not residue(tmp_path, needles), 10)
    tombstones = eventually(lambda: [w for w in cloud.synced() if w["kind"] == "memory_deletion"])
    assert tombstones[0]["payload"]["pair_ids"] == [pair]
    assert SECRET not in json.dumps(tombstones, ensure_ascii=False)
    snapshot = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edge",
                "memory",
                "snapshot",
                "--json",
                "--config",
                str(tmp_path / "config.toml"),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert "장미꽃" not in json.dumps(snapshot, ensure_ascii=False)
    assert [p["user"] for p in snapshot["snapshot"]["short_term"]["recent_pairs"]] == ["안녕"]


def test_forget_while_offline_the_pair_never_leaves_the_device(
    state_rows: StateRows, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime_factory(sync={"deadline_s": 1.0, "max_backoff_s": 30.0})
    cloud.set_faults(drop=True)
    assert probe.turn("t-off", PLAIN_SECRET)["status"] == "offline"
    pair = state_rows("SELECT pair_id FROM pairs WHERE turn_id = ?", ["t-off"])[0][0]
    # the replayer has tried once and is backing off: the cloud is away, not just slow
    eventually(lambda: any(r["body"]["writes"] for r in cloud.requests("/v1/a2a/memory/sync")))
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-2", "scope": "pair", "id": pair})
    result = probe.wait_for(f"{ROOT}/memory/forget/result", lambda b: b.get("request_id") == "f-2")
    assert result["removed"]["outbox"] == 1  # the unsent pair write was dropped
    left = state_rows("SELECT kind, payload FROM sync_outbox")
    assert [k for k, _ in left] == ["memory_deletion"], left
    cloud.set_faults()
    assert probe.turn("t-back", "안녕")["status"] == "ok"
    eventually(lambda: any(w["kind"] == "memory_deletion" for w in cloud.synced()))
    pairs = eventually(
        lambda: [
            w["payload"].get("turn_id") for w in cloud.synced() if w["kind"] == "short_term_pair"
        ]
    )
    assert pairs == ["t-back"]
    assert PLAIN_SECRET not in json.dumps(cloud.synced(), ensure_ascii=False)


def test_bad_forget_requests_are_refused(runtime_factory: RuntimeFactory, probe: MqttProbe) -> None:
    runtime_factory()
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-3", "scope": "pair"})
    refusal = probe.wait_for(
        f"{ROOT}/runtime/error", lambda b: b.get("topic") == f"{ROOT}/memory/forget"
    )
    assert refusal["error"] == "invalid_field" and "id is required" in refusal["detail"]
    probe.publish(f"{ROOT}/memory/forget", {"request_id": "f-4", "scope": "everything"})
    probe.wait_for(f"{ROOT}/runtime/error", lambda b: "scope" in b.get("detail", ""))


def test_cli_forget_and_revoke_with_and_without_the_service(
    tmp_path: Path, runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    config = str(runtime.config)
    probe.turn("t-1", "안녕")

    def cli(*args: str, code: int = 0) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "edge", "memory", *args, "--json", "--config", config],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == code, done.stderr
        return json.loads(done.stdout)

    # nothing matched: exit 1 and "ok": false (the JSON agrees with the exit code since c1ee6fe,
    # docs/cli.md), with the service's result as it gave it
    online = cli("forget", "--session", "nope", code=1)
    assert online == {
        "request_id": online["request_id"],
        "ok": False,
        "error": "nothing matched: no session nope",
        "result": {
            "removed": {"pairs": 0, "sessions": 0, "profile_items": 0, "summaries": 0, "outbox": 0}
        },
    }
    assert runtime.terminate() == 0
    offline = cli("forget", "--all", "--yes")
    assert offline["ok"] and offline["result"]["removed"]["pairs"] == 1
    revoked = cli("revoke", "--key", "preferred_room", code=1)  # nothing matched
    assert revoked == {
        "ok": False,
        "error": "nothing matched: no profile item preferred_room",
        "result": {"revoked": [], "profile_items": 0, "outbox": 0},
    }
