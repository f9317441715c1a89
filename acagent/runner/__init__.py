"""acagent.runner."""
