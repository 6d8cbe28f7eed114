"""The two places the channel spares paho work per message (issue 36): a plain successful
PUBACK told with shared objects, and PUBLISH expiry properties built and packed once. Each must
tell and send exactly what paho's own code would."""

from __future__ import annotations

import asyncio
import socket
from typing import Any
from unittest.mock import Mock, patch

import pytest
from paho.mqtt.client import _ConnectionState  # type: ignore[attr-defined]
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge.channel.mqtt import expiry_properties
from edge.channel.mqtt_loop import LoopClient, LoopDriver


def client_with_one_out(protocol: MQTTProtocolVersion) -> tuple[LoopClient, list[Any], int]:
    """A client (never connected) holding one QoS 1 publish, and what its on_publish hears."""
    client = LoopClient(callback_api_version=CallbackAPIVersion.VERSION2, protocol=protocol)
    heard: list[Any] = []
    client.on_publish = lambda _c, _u, mid, reason, props: heard.append((mid, reason, props))
    info = client.publish("t/x", b"{}", qos=1)
    return client, heard, info.mid


def puback(client: LoopClient, body: bytes) -> MQTTErrorCode:
    client._in_packet["command"] = 0x40
    client._in_packet["packet"] = body  # type: ignore[typeddict-item]
    return client._handle_pubackcomp("PUBACK")


@pytest.mark.parametrize("tail", [b"", b"\x00", b"\x00\x00"])
def test_a_plain_successful_puback_is_told_as_paho_tells_it(tail: bytes) -> None:
    client, heard, mid = client_with_one_out(MQTTProtocolVersion.MQTTv5)
    assert puback(client, mid.to_bytes(2, "big") + tail) == MQTTErrorCode.MQTT_ERR_SUCCESS
    [(told_mid, reason, props)] = heard
    assert told_mid == mid and not reason.is_failure and reason.value == 0
    assert props.pack() == b"\x00"
    assert mid not in client._out_messages  # settled: paho's bookkeeping done
    assert puback(client, mid.to_bytes(2, "big") + tail) == MQTTErrorCode.MQTT_ERR_SUCCESS
    assert len(heard) == 1  # a second PUBACK for it is not told again


@pytest.mark.parametrize(
    "tail",
    [b"\x80", b"\x80\x00", b"\x10\x00", b"\x00\x05\x1f\x00\x02ok"],  # failure, no match, a reason
)
def test_any_other_puback_goes_through_paho(tail: bytes) -> None:
    client, heard, mid = client_with_one_out(MQTTProtocolVersion.MQTTv5)
    puback(client, mid.to_bytes(2, "big") + tail)
    [(told_mid, reason, _props)] = heard
    assert told_mid == mid and reason.value == tail[0]


def test_a_puback_on_mqtt_311_goes_through_paho() -> None:
    client, heard, mid = client_with_one_out(MQTTProtocolVersion.MQTTv311)
    puback(client, mid.to_bytes(2, "big"))
    assert [m for m, _r, _p in heard] == [mid]


@pytest.mark.parametrize("expiry_s", [1, 30, 127, 128, 16384, 2**31])
def test_expiry_properties_pack_as_paho_packs_them(expiry_s: int) -> None:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.MessageExpiryInterval = expiry_s
    shared = expiry_properties(expiry_s)
    assert shared.pack() == props.pack()  # type: ignore[no-untyped-call]
    assert shared.MessageExpiryInterval == expiry_s
    assert expiry_properties(expiry_s) is shared


def publish_packet(topic: bytes, payload: bytes) -> bytes:
    """An MQTT 5 QoS 0 PUBLISH (no properties), short enough for a one-byte length."""
    body = len(topic).to_bytes(2, "big") + topic + b"\x00" + payload
    return bytes([0x30, len(body)]) + body


def test_packets_one_recv_brought_are_all_taken_without_more_readiness() -> None:
    """paho's reads come from one buffered `recv`; what is left after a read is taken on the
    loop's next turn (the socket raises no readiness for it), a new connection starts empty."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        client = LoopClient(
            callback_api_version=CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5
        )
        got: list[bytes] = []
        client.on_message = lambda _c, _u, msg: got.append(bytes(msg.payload))
        ours, broker = socket.socketpair()
        ours.setblocking(False)
        client._sock = ours
        driver = LoopDriver(loop, client)  # nothing bumps `packets`: one read a readiness
        driver._on_open(client, None, ours)
        sent = [f"m{n}".encode() for n in range(50)]
        broker.sendall(b"".join(publish_packet(b"t/in", p) for p in sent))
        deadline = loop.time() + 5
        while len(got) < len(sent) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert got == sent
        assert not client.buffered()
        calls = 0
        real_recv = ours.recv

        def counting(n: int) -> bytes:
            nonlocal calls
            calls += 1
            return real_recv(n)

        with patch.object(client, "_sock", Mock(wraps=ours, recv=counting)):
            broker.sendall(b"".join(publish_packet(b"t/in", p) for p in sent))
            while len(got) < 2 * len(sent) and loop.time() < deadline:
                driver._read()
                await asyncio.sleep(0)
        assert got == sent + sent and calls <= 3  # not 3 a packet
        driver._on_close(client, None, ours)
        ours.close()
        broker.close()

    asyncio.run(body())


def parse_publishes(data: bytes) -> list[tuple[int, bytes]]:
    """(QoS, payload) of each MQTT 5 PUBLISH in `data` (one-byte lengths, no properties)."""
    found = []
    while data:
        header, length = data[0], data[1]
        body, data = data[2 : 2 + length], data[2 + length :]
        assert header & 0xF0 == 0x30
        qos = (header >> 1) & 3
        at = 2 + int.from_bytes(body[:2], "big") + (2 if qos else 0)
        assert body[at] == 0  # no properties
        found.append((qos, body[at + 1 :]))
    return found


def test_packets_queued_together_go_in_one_send() -> None:
    """Nested `writing_now` scopes write once, as the outermost ends; a run of packets that
    need nothing after their write goes in one send, a QoS 0 PUBLISH (its on_publish is told
    after its write) alone; the bytes are paho's, in order."""

    async def body() -> None:
        loop = asyncio.get_running_loop()
        client = LoopClient(
            callback_api_version=CallbackAPIVersion.VERSION2, protocol=MQTTProtocolVersion.MQTTv5
        )
        told: list[int] = []
        client.on_publish = lambda _c, _u, mid, _r, _p: told.append(mid)
        ours, broker = socket.socketpair()
        ours.setblocking(False)
        driver = LoopDriver(loop, client)
        driver._on_open(client, None, ours)
        sends: list[int] = []
        real_send = ours.send

        def counting(data: bytes) -> int:
            sends.append(len(data))
            return real_send(data)

        client._sock = Mock(wraps=ours, send=counting)
        client._state = _ConnectionState.MQTT_CS_CONNECTED
        sent = [(1, b"a"), (1, b"b"), (1, b"c"), (0, b"d"), (1, b"e"), (1, b"f")]
        with driver.writing_now():
            for qos, payload in sent[:3]:
                with driver.writing_now():
                    client.publish("t/x", payload, qos=qos)
            assert not sends  # nothing before the outermost scope ends
            for qos, payload in sent[3:]:
                client.publish("t/x", payload, qos=qos)
        assert len(sends) == 3  # a-b-c, d alone, e-f (paho: one send each)
        assert len(told) == 1  # the QoS 0 one, told once written
        assert parse_publishes(broker.recv(4096)) == sent
        driver._on_close(client, None, ours)
        ours.close()
        broker.close()

    asyncio.run(body())
