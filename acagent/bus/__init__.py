"""acagent.bus."""
