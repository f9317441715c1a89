"""``python -m benchmarks._child MODULE OUT.json [--quick]``: run one figure, write its result as JSON."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path


def main() -> None:
    module, out = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv[3:]
    mod = importlib.import_module(f"benchmarks.{module}")
    data = mod.run(quick).to_json()
    data["measures"] = (mod.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    Path(out).write_text(json.dumps(data))


if __name__ == "__main__":
    main()
