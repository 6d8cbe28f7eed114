"""People in the household in the simulator (SPEC §5.7): the voice front-end names who spoke —
a person recognised, a person below the confidence (the household's), a malformed id (refused),
or no one (the household's) — a person is forgotten now and then, and the isolation oracle
checks every body the cloud got: no person's words in another person's snapshot, a household
turn's snapshot holds no person's words, `voice_context.speaker_id` is whose the turn is, and
a sync write says whose its pair is.

Hooks elsewhere: `peers.turn` asks `speaker()` for a turn's speaker; `Model.people` keeps whose
each marker is. Importing this module registers the input and the oracle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a_common.people import HOUSEHOLD
from tests.devicesim.oracles import _text, oracle
from tests.devicesim.peers import INPUTS

if TYPE_CHECKING:
    from tests.devicesim.run import Sim

PEOPLE = ("mom", "son", "grandpa")
REFUSED = "-"  # a marker whose turn was refused: no one's, in no snapshot


def speaker(sim: Sim, marker: str) -> dict[str, Any]:
    """The turn's `speaker` field (none: the household's); notes whose `marker` becomes."""
    pick = sim.rng.random()
    person = sim.rng.choice(PEOPLE)
    body: dict[str, Any] = {}
    whose = HOUSEHOLD
    if pick < 0.55:
        body = {"speaker": {"id": person, "confidence": sim.rng.choice([0.8, 0.93, 1])}}
        whose = person
    elif pick < 0.7:  # below `memory.speaker_min_confidence` (0.8): the household's
        body = {"speaker": {"id": person, "confidence": sim.rng.choice([0.0, 0.5, 0.79])}}
    elif pick < 0.73:  # a malformed id: the turn is refused, nothing kept
        body = {"speaker": {"id": sim.rng.choice([f"{person}/#", "+", "a b"]), "confidence": 1}}
        whose = REFUSED
    if marker:
        sim.model.people[marker] = whose
    return body


def forget_person(sim: Sim) -> str:
    sim.model.forget_no += 1
    request_id = f"fp-{sim.seed}-{sim.model.forget_no}"
    person = sim.rng.choice(PEOPLE)
    spoken = sim.spoken_markers()
    markers = sorted(m for m in spoken if sim.model.people.get(m) == person)
    sim.model.forgets[request_id] = markers
    sim.send("memory/forget", {"request_id": request_id, "scope": "person", "id": person})
    return f"forget {request_id} person {person} ({len(markers)} markers)"


INPUTS["forget_person"] = (2, forget_person)


def _snapshot(body: dict[str, Any]) -> Any:
    return (body.get("voice_context") or {}).get("memory_snapshot")


@oracle("people_apart")
def people_apart(sim: Sim, _before: int) -> list[str]:
    out = []
    people = sim.model.people
    for st, path, body in sim.cloud.requests:
        if st != sim.step:
            continue
        if path.endswith("/turn"):
            whose = str((body.get("voice_context") or {}).get("speaker_id"))
            said = [m for m in people if m in str(body.get("recognized_text", ""))]
            out += [f"turn of {people[m]} sent as {whose}'s" for m in said if people[m] != whose]
            text = _text(_snapshot(body))
            for marker, owner in people.items():
                if owner not in (whose, HOUSEHOLD) and marker in text:
                    out.append(f"{owner}'s {marker} in {whose}'s snapshot")
        elif path.endswith("/sync"):
            for write in body.get("writes") or []:
                payload = write.get("payload") or {}
                if write.get("kind") != "short_term_pair":
                    continue
                for marker, owner in people.items():
                    if marker in str(payload.get("user_text")) and payload["person_id"] != owner:
                        out.append(f"{owner}'s {marker} synced as {payload['person_id']}'s")
    return out
