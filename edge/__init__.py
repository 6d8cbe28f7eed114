"""The a2a-edge process: config, wiring, the asyncio loop, the MQTT channel, systemd notify, CLI."""

__version__ = "0.1.0"
