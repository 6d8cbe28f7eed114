"""The cloud in process: the reference planner (sim/planner.py) behind an
`httpx.MockTransport`, with the simulator's faults: down, slow (held until released), hostile
(a body that is not the contract), 409 on the sync. Records every request body in order."""

from __future__ import annotations

import asyncio
import json
import random
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import httpx

from sim.cloud_state import CloudState
from sim.planner import memory_sync, plan_turn, supervise

HOSTILE = [
    b'{"request_id": "truncated',
    b'{"request_id": 7, "route_family": ["x"], "assistant_text": null}',
    json.dumps({"acked": "everything", "sync": {"cursor": 5}}).encode(),
]


@dataclass
class SimCloud:
    state: CloudState = field(default_factory=CloudState)
    mode: str = "up"  # up | down | slow | hostile
    conflicts: int = 0  # the next sync answers 409 this many times
    requests: list[tuple[int, str, Any]] = field(default_factory=list)  # (step, path, body)
    step: int = 0
    held: list[asyncio.Event] = field(default_factory=list)
    hostile_pick: int = 0
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def release(self) -> None:
        for event in self.held:
            event.set()
        self.held.clear()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        path = request.url.path
        self.requests.append((self.step, path, body))
        if self.mode == "slow":  # answered when the simulator releases it (or it times out)
            event = asyncio.Event()
            self.held.append(event)
            await event.wait()
        if self.mode == "down":
            raise httpx.ConnectError("cloud down (simulated)", request=request)
        if self.mode == "hostile":
            self.hostile_pick += 1
            raw = HOSTILE[self.hostile_pick % len(HOSTILE)]
            return httpx.Response(200, content=raw, headers={"content-type": "application/json"})
        device = str(body.get("device_id", ""))
        if path == "/v1/a2a/turn":
            return httpx.Response(200, json=self._odd_text(plan_turn(self.state, body)))
        if path == "/v1/a2a/memory/sync":
            if self.conflicts > 0:
                self.conflicts -= 1
                self.state.sync_script.append({"status": 409, "updates": {}})
            status, answer = memory_sync(self.state, device, body)
            return httpx.Response(status, json=answer)
        if path == "/v1/a2a/workflow/events":
            return httpx.Response(200, json={"decision": supervise(self.state, body)})
        return httpx.Response(404, json={"error": "not_found"})

    def _odd_text(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A cloud that writes Korean decomposed (NFD) some days, or with a zero-width space in
        a key (issue 30 item 7): the device keeps one form."""
        update = answer.get("memory_update") or {}
        for cand in (update.get("write_candidates") or {}).get("profile_candidates") or []:
            pick = self.rng.random()
            if pick < 0.3 and isinstance(cand.get("value"), str):
                cand["value"] = unicodedata.normalize("NFD", cand["value"])
            elif pick < 0.4 and isinstance(cand.get("key"), str):
                key = cand["key"]
                cand["key"] = key[:3] + "\u200b" + key[3:]
        return answer

    def bodies(self, path_suffix: str, since: int = 0) -> list[Any]:
        return [b for _s, p, b in self.requests[since:] if p.endswith(path_suffix)]
