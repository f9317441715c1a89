"""acagent.render."""
