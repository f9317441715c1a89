"""acagent: a coding/chat agent whose sessions outlive any process."""
