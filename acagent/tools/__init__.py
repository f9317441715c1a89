"""acagent.tools."""
