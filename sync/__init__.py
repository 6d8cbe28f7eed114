"""The pending-sync outbox to the cloud: ordered replay with cursor/version, conflicts, dead
letters (SPEC §3.2). Built in the offline-first sync issue."""
