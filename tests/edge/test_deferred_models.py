"""The service builds no validator for a message kind it has not met (issue 36, steady RSS):
the seldom inbound kinds and the cloud's wire models are `defer_build`, built at their first
own validation; a PUI press's model is built at import, so a cancel waits for no schema."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

PROBE = """
import json
import edge.wiring  # what `a2a-edge run` imports before it builds the runtime
from cloud_client import models
from edge.channel import topics

def built(cls):
    return type(cls.__dict__.get("__pydantic_validator__")).__name__ == "SchemaValidator"

names = {
    "topics": ["PuiEventMsg", "ForgetMsg", "ConsentRequestMsg", "AdminRequestMsg",
               "ObservationMsg", "WorkflowRequestMsg", "SpeakerMsg"],
    "models": ["MemorySnapshot", "SyncWire", "SyncUpdates", "TurnResponse"],
}
print(json.dumps({n: built(getattr(topics if m == "topics" else models, n))
                  for m, ns in names.items() for n in ns}))
"""


def test_the_service_imports_build_no_validator_for_seldom_kinds_but_a_pui_press() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    built = json.loads(out)
    assert built.pop("PuiEventMsg") is True
    assert not any(built.values()), built


def test_a_deferred_model_validates_and_refuses_as_before() -> None:
    from edge.channel.topics import ForgetMsg

    msg = ForgetMsg.model_validate({"request_id": "r1", "scope": "pair", "id": "p1", "x": 1})
    assert (msg.scope, msg.id, msg.with_sources) == ("pair", "p1", True)
    with pytest.raises(ValidationError, match="absent for all"):
        ForgetMsg.model_validate({"request_id": "r2", "scope": "all", "id": "p1"})
