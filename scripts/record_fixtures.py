"""Record the field-case wire fixtures the tests use into ``tests/fixtures/cases/``.

``python scripts/record_fixtures.py`` copies, byte for byte, the files named in :data:`FIXTURES`
from ``../shared/cases`` (or ``$ACAGENT_SHARED[/cases]``) and writes ``MANIFEST`` (name, size,
sha256 per line). Only what a test reads is copied; add a name here when a test starts reading a
new case file. ``--check`` only compares (exit 1 when a recorded file differs or is missing).
The tests find the files through ``tests/casefiles.py`` (the recorded copy first).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.casefiles import RECORDED, shared_source  # noqa: E402

FIXTURES = (
    "F01-turn1.anthropic.sse",
    "F01-turn1.openai.sse",
    "F02-pause-a.openai.sse",
    "F02-pause-b.anthropic.sse",
    "F02-pause-c.anthropic.sse",
    "F02-pause-d.anthropic.sse",
    "F03-torn-transcript.jsonl",
    "F10-parallel-A.openai.sse",
    "F10-parallel-B.openai.sse",
    "F10-parallel-C.openai.sse",
    "F10-parallel-D.openai.sse",
    "F11-noarg-A.openai.sse",
    "F11-noarg-B.openai.sse",
    "F11-noarg-C.openai.sse",
    "F11-noarg-D.openai.sse",
    "F11-noarg-E1.anthropic.sse",
    "F11-noarg-E2.anthropic.sse",
    "F12-split-escape.anthropic.sse",
    "F12-split-utf8.openai.sse",
    "F13-ok-attempt2.anthropic.sse",
    "F13-overloaded-attempt1.anthropic.sse",
)
"""Every case file a test reads (``grep -rn 'cases /' tests``)."""


def manifest_line(name: str, data: bytes) -> str:
    """``name size sha256`` for one file."""
    return f"{name} {len(data)} {hashlib.sha256(data).hexdigest()}"


def main(argv: list[str] | None = None) -> int:
    """Record (or with ``--check`` compare) the fixtures; 0 on success, 1 on a difference, 2 without a source."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    args = parser.parse_args(argv)
    source = shared_source()
    if source is None:
        print("record_fixtures: ../shared/cases not found (set ACAGENT_SHARED)", file=sys.stderr)
        return 2
    lines, differ = [], []
    for name in FIXTURES:
        data = (source / name).read_bytes()
        lines.append(manifest_line(name, data))
        target = RECORDED / name
        if not target.exists() or target.read_bytes() != data:
            differ.append(name)
            if not args.check:
                RECORDED.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    manifest = "\n".join(lines) + "\n"
    manifest_path = RECORDED / "MANIFEST"
    if not manifest_path.exists() or manifest_path.read_text() != manifest:
        differ.append("MANIFEST")
        if not args.check:
            manifest_path.write_text(manifest)
    if args.check and differ:
        print("record_fixtures: differs from the source: " + ", ".join(differ), file=sys.stderr)
        return 1
    print(f"record_fixtures: {len(FIXTURES)} fixtures {'match' if args.check else 'recorded'} ({source})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
