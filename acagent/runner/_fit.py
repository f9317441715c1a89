"""Before each LLM call: make the next request fit the model's window (docs/context.md).

:func:`fit_context` estimates the request (:class:`~acagent.runner._window.RequestEstimator`) and
compacts (:func:`~acagent.runner._compact.compact_context`) when it is over ``[context]
compact_at`` of the window, or when the loop forces it after a provider refusal. A model whose
window is unknown is compacted against the assumed :data:`~acagent.models._windows.UNKNOWN_WINDOW`
(a conservative default), and the first time that happens in a session the user is warned.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from acagent.events import make_payload
from acagent.models._windows import UNKNOWN_WINDOW, UNKNOWN_WINDOW_CODE, model_window, unknown_window_message
from acagent.models._windows import warn_unknown as log_unknown
from acagent.runner._compact import CompactionFailed, CompactionPorts, compact_context, ports_of

__all__ = ["fit_context", "needs_compaction", "warn_unknown_window"]


def needs_compaction(ports: CompactionPorts, model: str) -> tuple[bool, int, int]:
    """``(over threshold, estimated request tokens, window)`` for the next request."""
    window = model_window(model, ports.settings.models)
    est = ports.estimator.estimate(ports.system_prompt, ports.context.messages, ports.tools)
    limit = window.context_window * ports.settings.context.compact_at
    return est > limit, est, window.context_window


async def warn_unknown_window(turn: Any, model: str) -> bool:
    """Warn, once per session, that ``model``'s window is assumed; True if it warned now.

    The warning is an ``error`` event (code ``context_window_unknown``: chat and run show it, the
    transcript keeps it) and an entry in the session's ``warnings`` (``sessions show``, ``GET
    /v1/sessions/{id}``), which is what makes it once per session, across processes; the log
    line comes once per process and model.
    """
    compact_at = turn.settings.context.compact_at
    log_unknown(model, compact_at)
    row = await turn.journal.get_session(turn.session_id)
    warnings = orjson.loads(row.warnings) if row.warnings else []
    if any(
        isinstance(w, dict) and w.get("code") == UNKNOWN_WINDOW_CODE and w.get("model") == model
        for w in warnings
    ):
        return False
    message = unknown_window_message(model, compact_at)
    detail = {"model": model, "assumed_window": UNKNOWN_WINDOW, "compact_at": compact_at}
    await turn.writer.commit(
        [
            (
                "error",
                make_payload(
                    "error", turn_id=turn.turn_id, code=UNKNOWN_WINDOW_CODE, message=message, detail=detail
                ),
            )
        ]
    )
    entry = {"code": UNKNOWN_WINDOW_CODE, "message": message, "at": time.time(), **detail}
    await turn.journal.set_warnings(turn.session_id, [*warnings, entry])
    return True


async def fit_context(turn: Any, tools: list[Any], *, force: str | None = None) -> int:
    """Make the next request fit: compact when it is over ``compact_at`` (or ``force`` names why).

    Args:
        turn: the :class:`~acagent.runner._turn.Turn` about to call the model.
        tools: the tool definitions the request will carry (they count against the window).
        force: ``"overflow"`` after a provider refused the request as too long; None otherwise.

    Returns:
        The estimated input tokens of the next request.

    Raises:
        CompactionFailed: the request cannot be made to fit the model's window.
    """
    ports = ports_of(turn, tools)
    ports.wake = lambda events, ops: turn.commit(events, ops, wakes=True)  # the call follows
    model = turn.model or f"{(p := await turn.provider()).name}:{p.model}"
    window = model_window(model, turn.settings.models)
    over, est, _ = needs_compaction(ports, model)
    if force is None and not (over and turn.settings.context.auto):
        return est
    if force is None and not window.known:
        await warn_unknown_window(turn, model)
    try:
        await compact_context(ports, reason=force or "threshold")
    except CompactionFailed as exc:
        nothing = (exc.detail or {}).get("reason") == "nothing_to_summarise"  # no call was made
        fits = not window.known or est <= window.context_window - window.max_output_tokens // 4
        if force is None and nothing and fits:
            # Nothing older to summarise but the request still fits (or the window is only
            # assumed): send it as it is; a provider refusal comes back as an overflow.
            return est
        raise
    _, est, _ = needs_compaction(ports, model)
    if est > window.context_window and window.known:
        raise CompactionFailed(
            f"the context is still {est:,} tokens (estimated) after compaction, over the "
            f"{window.context_window:,}-token window of {model}",
            detail={"tokens": est, "window": window.context_window, "model": model},
        )
    return est
