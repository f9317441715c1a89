"""acagent.server."""
