"""The local page of `a2a-edge console`: its HTTP server and its live MQTT follower."""
