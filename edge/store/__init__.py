"""What the edge keeps: outbox, inbox, consent, owed reports, and the unit of work."""
