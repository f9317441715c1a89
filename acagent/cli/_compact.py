"""``acagent compact ID``: summarise a session's older history now (docs/context.md)."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from acagent.cli._app import app
from acagent.cli._common import build_settings, run_async

__all__ = ["compact_command"]


@app.command("compact")
def compact_command(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    base_url: Annotated[str | None, typer.Option("--base-url", help="Provider base URL.")] = None,
) -> None:
    """Replace the session's older turns by a summary (the full history stays in the journal)."""
    settings = build_settings(base_url=base_url)

    async def go() -> dict[str, Any]:
        from acagent.runner import SessionRegistry

        async with SessionRegistry.open(settings, interactive=False) as reg:
            row = await reg.journal.find_session(session_id)
            return await reg.compact(row.id)

    done = run_async(go)
    sys.stdout.write(
        f"compacted: {done['tokens_before']} → {done['tokens_after']} tokens (estimated); "
        f"kept from seq {done['first_kept_seq']}\n"
    )
