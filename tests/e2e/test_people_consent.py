"""Consent for one person is never used for another (SPEC §5.6, §5.7; issue 34 follow-up),
through the real process: Mosquitto, the sim cloud, the device agents, the state DB on disk.

Reproduced on main: a grant of `capability:vital_app` given for 엄마 alone started the vital app
for 아들's turn and for a pushed request, and revoking 엄마's grant cancelled 아들's workflow."""

from __future__ import annotations

import json
from typing import Any

from sim.cloud import SimCloud
from sim.devices import Behavior, DeviceAgents
from sim.probe import MqttProbe
from tests.conftest import ROOT, RuntimeFactory, StateRows, eventually, workflow_event
from tests.e2e.test_consent import cli, consent, vital

MOM, SON = "mom", "son"
SCOPE = "capability:vital_app"


def said(who: str | None) -> dict[str, Any]:
    return {} if who is None else {"speaker": {"id": who, "confidence": 0.9}}


def asks_vital(cloud: SimCloud, probe: MqttProbe, turn_id: str, who: str | None) -> Any:
    """A turn whose planner plans `vital_app.start_session` as workflow `wf-<turn_id>`."""
    cloud.script_turn(
        route_family="ODL",
        assistant_text="측정 앱을 시작할게요.",
        device_workflow_requests=[vital(f"wf-{turn_id}")],
    )
    return probe.turn(turn_id, "혈압 좀 재줘", **said(who))


def test_a_persons_capability_grant_covers_only_that_persons_turns(
    runtime_factory: RuntimeFactory,
    cloud: SimCloud,
    probe: MqttProbe,
    devices: DeviceAgents,
    state_rows: StateRows,
) -> None:
    devices.behaviors["vital_app.start_session"] = Behavior("hold")
    runtime_factory()
    mom_grant = {"request_id": "c-m", "action": "grant", "scope": SCOPE, "person": MOM}
    assert consent(probe, "c-m", mom_grant)["ok"] is True
    # 엄마's grant: not 아들's, not the household's, not a pushed request's
    son = asks_vital(cloud, probe, "son-1", SON)
    assert (son["status"], son.get("error")) == ("rejected", "consent_required"), son
    guest = asks_vital(cloud, probe, "guest-1", None)
    assert (guest["status"], guest.get("error")) == ("rejected", "consent_required"), guest
    probe.publish(f"{ROOT}/workflow/request", vital("wf-push"))
    assert workflow_event(probe, "wf-push", "WORKFLOW_REJECTED")["reason"] == "consent_required"
    mom = asks_vital(cloud, probe, "mom-1", MOM)
    assert (mom["status"], mom["workflow_ids"]) == ("ok", ["wf-mom-1"]), mom
    workflow_event(probe, "wf-mom-1", "RUNNING")
    # a household grant (the person at the robot agreed for the device) covers anyone's turn
    household = {"request_id": "c-h", "action": "grant", "scope": SCOPE}
    assert consent(probe, "c-h", household)["ok"] is True
    son = asks_vital(cloud, probe, "son-2", SON)
    assert (son["status"], son["workflow_ids"]) == ("ok", ["wf-son-2"]), son
    # revoking the household's grant ends what only it covered: 아들's, never 엄마's
    revoke = {"request_id": "c-h2", "action": "revoke", "scope": SCOPE}
    assert consent(probe, "c-h2", revoke)["ok"] is True
    ended = workflow_event(probe, "wf-son-2", "WORKFLOW_CANCELLED")
    assert ended["reason"] == "consent_revoked"
    status = "SELECT status FROM workflows WHERE workflow_id = ?"
    assert state_rows(status, ["wf-mom-1"]) == [("running",)]  # one commit with 아들's cancel
    # and revoking 엄마's ends hers
    mine = {"request_id": "c-m2", "action": "revoke", "scope": SCOPE, "person": MOM}
    assert consent(probe, "c-m2", mine)["ok"] is True
    ended = workflow_event(probe, "wf-mom-1", "WORKFLOW_CANCELLED")
    assert ended["reason"] == "consent_revoked"


def test_the_consent_audit_says_whose_grant(
    runtime_factory: RuntimeFactory, cloud: SimCloud, probe: MqttProbe
) -> None:
    runtime = runtime_factory()
    config = ("--config", str(runtime.config))
    grant = {"request_id": "a-m", "action": "grant", "scope": "category:health", "person": MOM}
    assert consent(probe, "a-m", grant)["ok"] is True
    household = {"request_id": "a-h", "action": "grant", "scope": "category:health"}
    assert consent(probe, "a-h", household)["ok"] is True
    revoke = {**grant, "request_id": "a-r", "action": "revoke"}
    assert consent(probe, "a-r", revoke)["ok"] is True
    listed = json.loads(cli("consent", "list", "--json", *config))
    whose = [(a["action"], a["scope"], a.get("person")) for a in reversed(listed["audit"])]
    assert whose == [
        ("grant", "category:health", MOM),
        ("grant", "category:health", "household"),
        ("revoke", "category:health", MOM),
    ], listed["audit"]
    text = cli("consent", "list", *config).splitlines()
    audit = text[next(n for n, line in enumerate(text) if "audit" in line) :]
    assert sum(MOM in line for line in audit) == 2, text  # the table's person column
    eventually(lambda: len([w for w in cloud.synced() if w["kind"] == "consent"]) == 3)
    synced = [(w["payload"]["action"], w["payload"]["person_id"]) for w in cloud.synced()]
    assert synced == [("grant", MOM), ("grant", "household"), ("revoke", MOM)]
