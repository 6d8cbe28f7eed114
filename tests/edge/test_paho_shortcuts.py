"""The two places the channel spares paho work per message (issue 36): a plain successful
PUBACK told with shared objects, and PUBLISH expiry properties built and packed once. Each must
tell and send exactly what paho's own code would."""

from __future__ import annotations

from typing import Any

import pytest
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge.channel.mqtt import expiry_properties
from edge.channel.mqtt_loop import LoopClient


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
