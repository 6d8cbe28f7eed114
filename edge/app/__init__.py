"""What inputs mean: turns, callbacks, PUI, workflows, consent and memory operations."""
