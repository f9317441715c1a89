"""acagent.providers."""
