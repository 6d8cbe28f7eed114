"""The local memory: tiers, snapshot builder, update apply, sessions, promotion, privacy."""
