"""The MQTT channel: paho adapter, topic names as values, inbound models, refusals."""
