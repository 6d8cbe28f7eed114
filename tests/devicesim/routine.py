"""A routine across days (SPEC §5.4), so memory's promotion is exercised: a day passes and the
user asks for their usual room (mostly one, now and then another: the user changing their
mind), and an acceptance ("응 좋아") of the suggestion the cloud made from what it saw. The
memory oracles (`confirmed_on_evidence`: nothing confirmed from one mention nor on evidence
outside the window; `one_confirmed_value_per_key`) then judge real confirmations.

Drawn on the per-step stream only (`STEP_ONLY`): the seeds found before it replay unchanged on
`--stream one`. Importing this module registers the inputs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.devicesim.peers import INPUTS, ROOMS, STEP_ONLY

if TYPE_CHECKING:
    from tests.devicesim.run import Sim

ASKS = ("{room} 청정해줘", "{room}으로 가서 청정해줘")
ACCEPTS = ("응 좋아", "네 부탁해", "그래")
WHO = ({}, {"speaker": {"id": "mom", "confidence": 1}})  # the household's, or one person's


def _say(sim: Sim, text: str) -> str:
    sim.model.turn_no += 1
    turn_id = f"turn-{sim.seed}-{sim.model.turn_no}"
    body: dict[str, Any] = {"turn_id": turn_id, "recognized_text": text}
    body |= sim.rng.choice(WHO)
    sim.model.turn_bodies[turn_id] = body
    sim.send("turn/request", body)
    return f"turn {turn_id} {text!r}"


def routine(sim: Sim) -> str:
    """The next day (a few hours on, or back from weeks away: the window's evidence ages out),
    the usual room; one time in five another one."""
    sim.clock.advance(sim.rng.choice([86400, 86400, 90000, 4 * 3600, 86400, 15 * 86400]))
    usual = ROOMS[sim.seed % len(ROOMS)]
    room = usual if sim.rng.random() < 0.8 else sim.rng.choice(ROOMS)
    return "routine: " + _say(sim, sim.rng.choice(ASKS).format(room=room))


def accept(sim: Sim) -> str:
    return "accept: " + _say(sim, sim.rng.choice(ACCEPTS))


INPUTS["routine"] = (4, routine)
INPUTS["accept"] = (3, accept)
STEP_ONLY.update({"routine", "accept"})
