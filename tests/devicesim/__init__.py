"""A deterministic simulator of the whole device (docs/design.md, *The device simulator*).

The real application layer (edge/wiring.py's graph, the executor's `take_*` inputs, the one door)
over a real SQLite file, an injected clock that is also the event loop's clock, and an
in-process wire that plays broker, agents, voice front-end, PUI, local UI, admin and cloud. A
seed fixes every choice; oracles (tests/devicesim/oracles.py) check the promises after every step.
"""
