"""`CloudClient.post_batch` (SPEC §3.3's batch form): how many reports the cloud took, or None
when it does not take the form (404, 400, a 2xx without an `accepted` count) — one HTTP layer,
answered by `httpx.MockTransport`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from cloud_client.client import CloudClient
from cloud_client.errors import CloudRejected

EVENTS = "/v1/a2a/workflow/events"


def batch(n: int) -> dict[str, Any]:
    entries = [
        {"request_id": f"r{i}", "workflow_id": f"wf-{i}", "event": {}, "workflow": {}}
        for i in range(n)
    ]
    return {"request_id": "b1", "device_id": "robot-test", "batch": entries}


def posted(*answers: httpx.Response) -> tuple[int | None, list[bytes]]:
    """`post_batch` of three reports against a cloud answering these in turn."""
    seen: list[bytes] = []
    queue = list(answers)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content)
        return queue.pop(0)

    cloud = CloudClient(base_url="http://cloud.test", transport=httpx.MockTransport(handler))
    taken = asyncio.run(cloud.post_batch(EVENTS, batch(3), deadline_s=5))
    return taken, seen


@pytest.mark.parametrize(
    ("answer", "taken"),
    [
        (httpx.Response(200, json={"accepted": 3}), 3),
        (httpx.Response(200, json={"accepted": 2}), 2),  # a part: the first two
        (httpx.Response(200, json={"accepted": 0}), 0),
        (httpx.Response(200, json={"accepted": 9}), 3),  # never more than were sent
        (httpx.Response(409, json={"error": "duplicate"}), 3),  # a retry it had taken
        (httpx.Response(404, json={"error": "not_found"}), None),
        (httpx.Response(400, json={"error": "bad_request"}), None),
        (httpx.Response(200, json={"decision": None}), None),  # a cloud that ignored the form
        (httpx.Response(200, json={"accepted": "3"}), None),
        (httpx.Response(200, json={"accepted": -1}), None),
        (httpx.Response(200, json={"accepted": True}), None),
        (httpx.Response(200, json=[3]), None),
    ],
)
def test_what_the_answer_to_a_batch_means(answer: httpx.Response, taken: int | None) -> None:
    assert posted(answer)[0] == taken


def test_a_batch_sent_again_after_a_transient_error_keeps_its_request_id() -> None:
    taken, seen = posted(httpx.Response(503), httpx.Response(200, json={"accepted": 3}))
    assert taken == 3
    assert len(seen) == 2 and seen[0] == seen[1]  # the same body, request_id and entries
    assert json.loads(seen[0])["request_id"] == "b1"


def test_another_refusal_is_an_error_not_a_fallback() -> None:
    with pytest.raises(CloudRejected) as info:
        posted(httpx.Response(422, json={"error": "unprocessable"}))
    assert info.value.status == 422
