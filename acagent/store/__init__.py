"""acagent.store."""
