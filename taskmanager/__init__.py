"""Workflows and tasks: validation, the state machine, deadlines, resources, event policy,
persistence, recovery (SPEC §4). Built in the TaskManager issue."""
