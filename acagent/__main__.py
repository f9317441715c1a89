"""``python -m acagent``."""

from acagent.cli import main

main()
