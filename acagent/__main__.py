"""``python -m acagent``."""

from acagent._entry import main

main()
