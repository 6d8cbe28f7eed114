"""The executor and the life cycle: intake, routes, housekeeping, alarm, warm-up."""
