"""A device agent for the presence tests (SPEC §4.8), run as its own process so a test can
SIGKILL it: built on `a2a_agent` alone. `python presence_agent.py PORT ROOT CAP[,CAP…] [hold]`
serves every operation of those capabilities; `hold` (the default) answers RUNNING and then
nothing until cancelled, `progress` the same after a PROGRESS 40, `complete` completes at once
with the evidence the command names.
It prints `serving <boot_id>` once its statuses are announced, each command it takes as
`command <task_id> <attempt>` and each cancel as `cancelled <task_id>`."""

from __future__ import annotations

import signal
import sys
import threading

from a2a_agent import DeviceAgent, Task

EVIDENCE = {
    ("air_purifier", "start"): lambda args: {"purifier_mode": args.get("mode", "auto")},
    ("mobility", "move_to_room"): lambda args: {"arrived_room": args.get("room")},
    ("display", "show_content"): lambda args: {"content_shown": True},
}


def main() -> None:
    port, root, caps = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    mode = sys.argv[4] if len(sys.argv) > 4 else "hold"
    stop = threading.Event()

    def serve(task: Task) -> None:
        print(f"command {task.task_id} {task.attempt}", flush=True)
        if mode == "complete":
            make = EVIDENCE.get((task.capability_id, task.operation_id))
            task.completed(**(make(task.args) if make else {}))
            return
        if mode == "progress":  # under way: a move between rooms
            task.progress(40)
        task.wait_cancelled(3600)

    def cancelled(task: Task) -> None:
        print(f"cancelled {task.task_id}", flush=True)

    agent = DeviceAgent(root, client_id=f"presence-{'-'.join(caps)}", port=port)
    for cap in caps:
        agent.handle(cap, "*", serve, on_cancel=cancelled)
    agent.start(10)
    print(f"serving {getattr(agent, 'boot_id', 'none')}", flush=True)  # none: no presence
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    agent.close()
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
