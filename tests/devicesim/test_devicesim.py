"""The device simulator (tests/devicesim): a fixed set of seeds runs with no oracle violated, and
a seed replays step for step (the same seed twice gives a byte-identical trace)."""

from __future__ import annotations

import os

import pytest

from tests.devicesim.run import run_seed

SEEDS = [int(s) for s in os.environ.get("A2A_SIM_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
STEPS = int(os.environ.get("A2A_SIM_STEPS", "240"))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_runs_with_every_promise_kept(seed: int) -> None:
    sim = run_seed(seed, STEPS)  # raises SimFailure with the seed and the trace's tail
    assert sim.step == STEPS
    assert sum(sim.checks.values()) > STEPS  # the oracles ran


# agents come and go (devicesim/agents.py): seed 9 found a `wait` task sent to an offline agent
# never re-sent to its new boot; seed 13 has a power cut with moves in flight
AGENT_SEEDS = [int(s) for s in os.environ.get("A2A_SIM_AGENT_SEEDS", "9,13").split(",")]


@pytest.mark.parametrize("seed", AGENT_SEEDS)
def test_agents_come_and_go_with_every_promise_kept(seed: int) -> None:
    sim = run_seed(seed, STEPS)
    assert sim.presence.drawn["agent_death"] + sim.presence.drawn["agent_restart"] > 0
    assert sim.checks["restart_per_policy"] >= STEPS


def test_the_same_seed_replays_step_for_step() -> None:
    first = run_seed(11, 120).trace  # each in a state dir of its own
    second = run_seed(11, 120).trace
    assert first == second
    assert len(first) > 120


def test_a_cancel_cut_by_a_power_cut_owes_no_safe_stop() -> None:
    # seed 834: a pui cancel of a move, then a power cut before the agent confirmed it; the new
    # boot forgot the move and the runtime ended it `agent_restarted` — no safe stop is owed
    sim = run_seed(834, 60)
    assert sim.step == 60
    assert sim.faults["power_cut"] > 0


@pytest.mark.xfail(
    strict=True,
    reason="open bug (found by the long run, seeds 988 and 1094): a callback held unacknowledged "
    "while storage refused writes, then a power cut past its ack deadline; at the start the "
    "recovery's tick fires the deadline before the broker's redelivered callback is taken in, so "
    "a step its agent answered in time ends TIMEOUT. The fix: hold deadline enforcement at start "
    "until the first connection's redelivery has gone through the intake.",
)
def test_a_callback_held_across_a_power_cut_counts_before_its_deadline_fires() -> None:
    run_seed(988, 113)
