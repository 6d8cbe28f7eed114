"""Reference counterparts for development, the demo and tests: a Mosquitto launcher, the cloud
planner, an MQTT probe, and the runtime as a process. Never imported by the runtime packages."""
