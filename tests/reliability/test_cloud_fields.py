"""Fields from the cloud that escaped every bound (issue 16, item 5), through the real process:
a 1.5 MB `last_route` went into the next turn request, outside the 4 KiB snapshot budget; a
huge session summary was stored whole; a sync version `v9999999999` was adopted and no normal
version ever again; category `Health` was not the sensitive `health`, so it was synced."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_common.jsonx import canonical
from edge.config.settings import load_settings
from edge.views import state as views
from sim.cloud import SimCloud
from sim.memory import build_memory_update
from sim.probe import MqttProbe
from tests.conftest import RuntimeFactory, StateRows, eventually
from tests.reliability.sync_peer import SyncPeer, acked_all
from tests.reliability.test_sync_stall import seed_writes

TURN = "/v1/a2a/turn"
FAR = {"cursor": "cur-far", "version": "v9999999999"}
FAST = {"deadline_s": 1.0, "max_backoff_s": 0.3}


def update(**fields: Any) -> dict[str, Any]:
    """A memory update as the sim builds it, with `device_cache_update` fields and `sync`."""
    sync = fields.pop("sync", {"cursor": "cur-1", "version": "v1"})
    candidates = fields.pop("profile_candidates", [])
    body = build_memory_update(
        recognized_text="",
        route_family="DEF",
        workflow_id="",
        sync=sync,
        profile_candidates=candidates,
    )
    body["device_cache_update"].update(fields)
    return body


def voice_context(cloud: SimCloud, index: int) -> dict[str, Any]:
    return cloud.requests(TURN)[index]["body"]["voice_context"]


def test_huge_fields_of_a_turn_answer_stay_bounded(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe, state_rows: StateRows
) -> None:
    runtime_factory(sync=FAST)
    # 1.5 MB: refused by the field's bound (or, with a body cap under 1.5 MB, by the cap)
    cloud.script_turn(memory_update=update(last_route="R" * 1_500_000))
    assert probe.turn("t-1", "안녕", timeout_s=15)["status"] == "error"
    cloud.script_turn(memory_update=update(last_route="R" * 100_000))  # under any body cap
    second = probe.turn("t-2", "안녕", timeout_s=15)
    assert second["status"] == "error" and "last_route" in second["error"], second
    cloud.script_turn(memory_update=update(session_summary="요약" * 100_000, sync=FAR))
    assert probe.turn("t-3", "안녕", timeout_s=15)["status"] == "ok"
    [(summary,)] = state_rows("SELECT max(length(summary)) FROM sessions")
    assert summary <= 4096, summary  # cut where it entered, not only in the snapshot
    assert probe.turn("t-4", "안녕")["status"] == "ok"

    contexts = [voice_context(cloud, n) for n in range(1, 4)]  # after t-1, t-2, t-3
    for context in contexts:
        assert len(context["last_route"]) <= 32, len(context["last_route"])
        assert len(canonical(context["memory_snapshot"])) <= 4096
        assert len(context["active_workflow_id"]) <= 96
    third = contexts[-1]
    assert third["memory_snapshot"]["short_term"]["session_summary"].startswith("요약")
    # v9999999999 was refused; the sim's next normal version was adopted after it
    [(version,)] = state_rows("SELECT version FROM sync_position")
    assert version != FAR["version"] and version.startswith("v"), version
    assert third["memory_snapshot"]["sync"]["version"] != FAR["version"]
    # `Health` is the sensitive `health`: kept on the device, never synced (share: false), and
    # so is the pair it came from (in a session of its own: its summary would be health too)
    health = {"key": "blood_pressure", "value": "높음", "category": "Health"}
    cloud.script_turn(memory_update=update(profile_candidates=[health]))
    assert probe.turn("t-5", "안녕", session_id="session-health")["status"] == "ok"
    probe.turn("t-6", "안녕", session_id="session-health")
    eventually(lambda: "t-6" in {w["payload"].get("turn_id") for w in cloud.synced()}, 10)
    assert "t-5" not in {w["payload"].get("turn_id") for w in cloud.synced()}
    assert not [w for w in cloud.synced() if w["payload"].get("key") == "blood_pressure"]
    rows = state_rows("SELECT category, sensitive FROM profile_items WHERE key = 'blood_pressure'")
    assert rows == [("health", 1)]


@pytest.fixture
def peer() -> Iterator[SyncPeer]:
    server = SyncPeer(acked_all("v3"))
    yield server
    server.close()


def test_a_sync_version_far_ahead_is_refused_and_a_normal_one_adopted_later(
    tmp_path: Path, runtime_factory: RuntimeFactory, peer: SyncPeer, state_rows: StateRows
) -> None:
    seed_writes(tmp_path, 3)
    peer.then(acked_all("v2"), acked_all(FAR["version"]), after=acked_all("v3"))
    runtime = runtime_factory(cloud_url=peer.url, sync={"batch_size": 1, **FAST})
    eventually(lambda: state_rows("SELECT count(*) FROM sync_outbox") == [(0,)], 10)
    assert [body["sync"]["version"] for body in peer.bodies] == ["", "v2", "v2"]
    assert state_rows("SELECT version FROM sync_position") == [("v3",)]
    refusal = views.sync_status(load_settings(runtime.config, environ={}))["last_sync_refusal"]
    assert "v9999999999" in refusal["reason"] and "ceiling" in refusal["reason"], refusal
    assert "sync position refused: version v9999999999" in runtime.log()
