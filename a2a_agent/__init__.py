"""A small helper for device teams: the MQTT side of a device agent for the a2a-edge runtime
(docs/device-agents.md). It depends on paho-mqtt and the standard library only, never on the
runtime's own packages, so an agent can run on any board of the robot.

    from a2a_agent import DeviceAgent, Task

    def move(task: Task) -> None:          # RUNNING was sent on receipt
        drive_to(task.args["room"], stop=task.wait_cancelled)
        task.completed(arrived_room=task.args["room"])

    agent = DeviceAgent("a2a/robot-001", client_id="motion-agent")
    agent.handle("mobility", "move_to_room", move, on_cancel=stop_motion,
                 evidence=["arrived_room"])
    agent.start()
"""

from a2a_agent.agent import DeviceAgent
from a2a_agent.task import STATUSES, TERMINAL, Refusal, Task

__all__ = ["STATUSES", "TERMINAL", "DeviceAgent", "Refusal", "Task"]
