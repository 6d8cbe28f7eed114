"""A paho client for the sim's MQTT parts (probe, device agents): MQTT 5, Nagle off, hand-off
callbacks that cannot kill the network thread, reconnect every second, started in the
background."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion

from edge.channel.mqtt import no_delay


def start_client(
    host: str,
    port: int,
    client_id: str,
    on_connect: Callable[..., None],
    on_message: Callable[[paho.Client, Any, paho.MQTTMessage], None],
    protocol: str = "5",
    tls: tuple[str, str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> paho.Client:
    version = MQTTProtocolVersion.MQTTv5 if protocol == "5" else MQTTProtocolVersion.MQTTv311
    client = paho.Client(
        callback_api_version=CallbackAPIVersion.VERSION2, client_id=client_id, protocol=version
    )
    client.suppress_exceptions = True
    if tls is not None:
        client.tls_set(ca_certs=tls[0], certfile=tls[1], keyfile=tls[2])
    if auth is not None:
        client.username_pw_set(*auth)
    client.reconnect_delay_set(1, 1)
    client.on_socket_open = no_delay
    client.on_connect = on_connect
    client.on_message = on_message
    client.connect_async(host, port, keepalive=10)
    client.loop_start()
    return client
