"""Read-only views of the state DB: what the CLI, the console and `status` show."""
