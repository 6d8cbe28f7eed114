from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from cloud_client.client import CloudClient
from cloud_client.errors import CloudBadResponse, CloudRejected, CloudUnavailable
from cloud_client.models import TurnRequest, VoiceContext
from sim.cloud_state import CloudState
from sim.planner import plan_turn


def request() -> TurnRequest:
    return TurnRequest(
        request_id="req-1",
        device_id="robot-1",
        recognized_text="안녕",
        voice_context=VoiceContext(
            recognized_text="안녕",
            session_id="s",
            last_route="",
            active_workflow_id="",
            memory_snapshot={},
        ),
        device_context={},
    )


def client(handler: Any) -> tuple[CloudClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        result: httpx.Response = handler(req, len(seen))
        return result

    return CloudClient(
        base_url="http://cloud.test", token="tok", transport=httpx.MockTransport(record)
    ), seen


def ok(req: httpx.Request, _n: int) -> httpx.Response:
    body = json.loads(req.content)
    return httpx.Response(200, json=plan_turn(CloudState(), body))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_turn_ok_sends_utf8_json_and_the_token() -> None:
    cloud, seen = client(ok)
    response = run(cloud.turn(request(), deadline_s=2))
    assert response.route_family == "DEF"
    assert response.memory_update is not None
    assert seen[0].headers["authorization"] == "Bearer tok"
    assert "안녕".encode() in seen[0].content  # not \uXXXX escapes


def test_5xx_and_429_are_retried() -> None:
    def flaky(req: httpx.Request, n: int) -> httpx.Response:
        return httpx.Response(503 if n == 1 else 429) if n < 3 else ok(req, n)

    cloud, seen = client(flaky)
    assert run(cloud.turn(request(), deadline_s=4)).route_family == "DEF"
    assert len(seen) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(status: int) -> None:
    cloud, seen = client(lambda _r, _n: httpx.Response(status, json={"error": "no"}))
    with pytest.raises(CloudRejected) as info:
        run(cloud.turn(request(), deadline_s=2))
    assert info.value.status == status
    assert len(seen) == 1


def test_connect_errors_become_unavailable_within_the_deadline() -> None:
    def down(req: httpx.Request, _n: int) -> httpx.Response:
        raise httpx.ConnectError("refused", request=req)

    cloud, seen = client(down)
    with pytest.raises(CloudUnavailable):
        run(cloud.turn(request(), deadline_s=0.5))
    assert len(seen) >= 2


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"request_id": "req-1"}',
        b'["a"]',
        b'{"request_id": "other", "route_family": "DEF", "assistant_text": "x"}',
    ],
)
def test_bad_bodies_are_bad_responses(body: bytes) -> None:
    cloud, _ = client(lambda _r, _n: httpx.Response(200, content=body))
    with pytest.raises(CloudBadResponse):
        run(cloud.turn(request(), deadline_s=2))


def test_unknown_fields_are_kept() -> None:
    def extra(req: httpx.Request, n: int) -> httpx.Response:
        body = json.loads(ok(req, n).content)
        body["planner_trace"] = {"took_ms": 12}
        return httpx.Response(200, json=body)

    cloud, _ = client(extra)
    response = run(cloud.turn(request(), deadline_s=2))
    assert response.model_extra == {"planner_trace": {"took_ms": 12}}


def test_the_turn_body_is_the_json_the_device_has_always_written() -> None:
    """pydantic writes the request (not json.dumps of a dumped copy): the same bytes, UTF-8
    as is, no spaces, the snapshot's order kept."""
    from a2a_common import jsonx

    snapshot = {
        "source": "ondevice_cache",
        "short_term": {"recent_pairs": [{"user": '거실 "청정"\n', "assistant": "네"}]},
        "long_term": {"profile_items": [{"key": "k", "value": [1, True, None, 0.5]}]},
        "sync": {"cursor": "c", "version": "v1"},
    }
    sent = request().model_copy(
        update={
            "voice_context": request().voice_context.model_copy(
                update={"memory_snapshot": snapshot}
            ),
            "device_context": {"current_room": "안방", "battery": 0.81, "rooms": ["거실"]},
        }
    )
    cloud, seen = client(ok)
    run(cloud.turn(sent, deadline_s=2))
    assert seen[0].content == jsonx.dumps(sent.model_dump(mode="json")).encode("utf-8")


def test_httpx_is_imported_when_the_client_is_prepared_not_before() -> None:
    """The cold path to READY does not pay httpx's ~90 ms of imports (edge/runtime/warmup.py
    prepares the client after READY)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from edge import wiring\n"
        "from edge.cli import service as cli_service\n"
        "from edge.runtime import executor as runtime\n"
        "from cloud_client.client import CloudClient\n"
        "client = CloudClient(base_url='http://127.0.0.1:18080')\n"
        "print('httpx' in sys.modules)\n"
        "client.prepare()\n"
        "print('httpx' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_paths_go_under_a_base_url_with_a_path_every_time() -> None:
    seen: list[httpx.Request] = []

    def record(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return ok(req, len(seen))

    cloud = CloudClient(
        base_url="http://cloud.test/edge/api", transport=httpx.MockTransport(record)
    )
    run(cloud.turn(request(), deadline_s=2))
    run(cloud.turn(request(), deadline_s=2))
    run(cloud.post_json("/v1/a2a/memory/sync", {"writes": []}, deadline_s=2))
    assert [str(r.url) for r in seen] == [
        "http://cloud.test/edge/api/v1/a2a/turn",
        "http://cloud.test/edge/api/v1/a2a/turn",
        "http://cloud.test/edge/api/v1/a2a/memory/sync",
    ]
