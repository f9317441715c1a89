"""``python -m benchmarks._child MODULE OUT.json [--quick]``: run one figure, write its result as JSON."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path


def main() -> None:
    module, out = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv[3:]
    fig = importlib.import_module(f"benchmarks.{module}").run(quick)
    Path(out).write_text(json.dumps(fig.to_json()))


if __name__ == "__main__":
    main()
