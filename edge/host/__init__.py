"""The process on the machine: sd_notify, lock, state files, WAL, logs, metrics server."""
