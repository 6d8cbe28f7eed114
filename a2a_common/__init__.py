"""Shared kernel of a2a-edge: the root error, the clock, ids and JSON helpers.

It holds only what every package needs and may import; it imports none of them.
"""
