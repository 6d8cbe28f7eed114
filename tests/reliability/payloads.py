"""Hostile MQTT payloads: random JSON, wrong types, huge strings, deep nesting, invalid UTF-8,
enormous numbers, NaN — each one something the runtime must refuse."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

INBOUND = (
    "turn/request",
    "task/callback",
    "pui/event",
    "workflow/request",
    "admin/request",
    "memory/forget",
    "consent/request",
    "device/context",
    "observation",
)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=50)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)
not_strings = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(max_size=5), scalars, max_size=3),
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


garbage = st.one_of(
    st.binary(max_size=200).filter(lambda b: not _is_object(b)),  # random bytes
    json_values.filter(lambda v: not isinstance(v, dict)).map(_dumps),  # JSON, not an object
    st.integers(min_value=70_000, max_value=120_000).map(lambda n: b'{"x":"' + b"a" * n + b'"}'),
    st.integers(min_value=200, max_value=5000).map(lambda n: b"[" * n + b"]" * n),
    st.sampled_from(
        [
            b'{"turn_id": NaN}',
            b'{"seq": Infinity}',
            b"\xff\xfe\x00{}",
            b'{"n": ' + b"9" * 5000 + b"}",
            b'{"a": 1e999}',
            b"{",
            b"",
        ]
    ),
)


def _is_object(data: bytes) -> bool:
    try:
        return isinstance(json.loads(data.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def wrong_fields(topic: str) -> st.SearchStrategy[bytes]:
    """Objects whose required fields are missing or of the wrong type for `topic`."""
    required = {
        "turn/request": {
            "turn_id": st.text(min_size=1, max_size=20),
            "recognized_text": st.text(min_size=1, max_size=40),
        },
        "task/callback": {
            "task_id": st.just("wf-x:step"),
            "seq": st.integers(0, 10),
            "status": st.sampled_from(["RUNNING", "COMPLETED"]),
        },
        "pui/event": {"event_id": st.text(min_size=1, max_size=10), "kind": st.just("cancel")},
        "workflow/request": {"workflow_id": st.text(min_size=1, max_size=10)},
        "admin/request": {
            "request_id": st.text(min_size=1, max_size=10),
            "command": st.just("workflow.cancel"),
        },
        "memory/forget": {
            "request_id": st.text(min_size=1, max_size=10),
            "scope": st.just("pair"),
            "id": st.text(min_size=1, max_size=10),
        },
        "consent/request": {
            "request_id": st.text(min_size=1, max_size=10),
            "action": st.just("grant"),
            "scope": st.just("category:health"),
        },
        "device/context": {"current_room": st.text(max_size=10), "battery": st.floats(0, 100)},
        "observation": {  # without its `value`: refused whichever field is broken
            "observation_id": st.text(min_size=1, max_size=10),
            "kind": st.just("noise"),
            "observed_at": st.just("2026-06-24T20:01:30Z"),
        },
    }[topic]

    @st.composite
    def broken(draw: st.DrawFn) -> bytes:
        body = {k: draw(v) for k, v in required.items()}
        victim = draw(st.sampled_from(sorted(body)))
        if topic != "device/context" and draw(st.booleans()):
            del body[victim]  # missing
        else:
            wrong = (
                not_strings.filter(lambda v: v is not None)
                if topic == "device/context"
                else not_strings
            )  # null is a fine room
            body[victim] = draw(
                wrong
                if victim != "battery"
                else st.one_of(
                    st.text(max_size=5),
                    st.floats(min_value=101, max_value=1e6),
                    st.floats(max_value=-0.1),
                )
            )
        return _dumps(body)

    return broken()


def hostile(topic: str) -> st.SearchStrategy[bytes]:
    return st.one_of(garbage, wrong_fields(topic))
