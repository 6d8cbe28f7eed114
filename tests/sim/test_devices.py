"""The device simulator's behaviours, each on its own (the runtime's tests lean on them)."""

from __future__ import annotations

from sim.world import World


def test_travel_time_battery_and_docking() -> None:
    world = World(current_room="거실", battery=50.0, time_scale=1.0)
    plan = world.plan(
        {"capability_id": "mobility", "operation_id": "move_to_room", "args": {"room": "안방"}}
    )
    assert plan.fail_reason is None and 12 < plan.duration_s < 13.5  # 6.3 m at 0.5 m/s
    assert plan.evidence == {"arrived_room": "안방"}
    assert world.context()["current_room"] == "거실"  # not applied yet
    plan.apply()
    context = world.context()
    assert context["current_room"] == "안방" and context["battery"] < 50
    dock = world.plan({"capability_id": "mobility", "operation_id": "return_to_dock"})
    dock.apply()
    assert world.context()["docked"] and world.context()["battery"] == 100


def test_low_battery_and_unknown_room_fail() -> None:
    world = World(battery=6.0)
    far = world.plan(
        {"capability_id": "mobility", "operation_id": "move_to_room", "args": {"room": "현관"}}
    )
    assert far.fail_reason == "battery_low"
    nowhere = world.plan(
        {"capability_id": "mobility", "operation_id": "move_to_room", "args": {"room": "지하실"}}
    )
    assert nowhere.fail_reason == "unknown_room"


def test_purifier_modes_and_sessions() -> None:
    world = World(time_scale=0.5)
    world.plan(
        {"capability_id": "air_purifier", "operation_id": "start", "args": {"mode": "turbo"}}
    ).apply()
    assert world.context()["purifier_mode"] == "turbo"
    world.plan({"capability_id": "air_purifier", "operation_id": "stop"}).apply()
    assert world.context()["purifier_mode"] == "off"
    guide = world.plan(
        {"capability_id": "content", "operation_id": "play_guidance", "args": {"minutes": 10}}
    )
    assert guide.duration_s == 300.0
    vital = world.plan({"capability_id": "vital_app", "operation_id": "start_session"})
    assert vital.evidence == {"vital_interaction_ended": "completed"}  # never "measured"
