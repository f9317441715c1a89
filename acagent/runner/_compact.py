"""Compaction: replace the older part of the context by a summary, as one journaled LLM step.

Called before an LLM call whose request is estimated above ``[context] compact_at`` of the
model's window and once after a provider refused a request as too long (both through
:func:`acagent.runner._fit.fit_context`), and on request (``/compact``, ``acagent compact``,
``POST /v1/sessions/{id}/compact``, through the runner's ``compact``). The steps:

1. choose the cut (:func:`acagent.runner._cut.choose_cut`): only at a turn start, never past
   the current turn's user message, keeping the most recent turns that fit in
   ``keep_recent`` × window;
2. the summary request is an LLM step like any other: a ``step`` row inflight before the call
   (``step_id`` = ``session|compact|last_seq|digest``), so a crash mid-summary is retried once
   more with the same request (``llm.retry`` ``process_died``), never paid twice silently;
3. one transaction commits ``step.finished``, the call's ``usage`` and ``context.compacted``: a
   position, not a copy. The compacted context is the summary merged into the first kept user
   message, then every kept message verbatim — and the kept messages are the journal's events
   from ``first_kept_seq`` on, so the fold of ``context.compacted`` (live, and on a rebuild that
   starts at ``first_kept_seq``, :mod:`acagent.runner._context`) gives exactly that context. Only
   when the kept messages' positions are unknown (a context loaded from a checkpoint older than
   compaction, without ``message_seqs``) does the commit add a ``checkpoint`` holding the
   compacted context, as every compaction did before. Before a call (``fit_context``), the
   transaction also carries that call's intent (``CompactionPorts.wake``, ``runner/_stepstart.py``).

A summary that is empty, or does not make the request smaller, and a summary request the
provider refuses (or that fails ``step_max_attempts`` times) raise :class:`CompactionFailed`
naming the estimate, the window and the model (the turn then fails as ``context_too_large``):
compaction never loops. The journal and the transcript
keep the full history; only what is sent changes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from acagent.errors import CompactionFailed, ProviderError
from acagent.events import make_payload
from acagent.messages import Message, TextPart
from acagent.models._windows import model_window
from acagent.providers._base import ModelRequest, Provider, TextDelta
from acagent.runner._budget import usage_event
from acagent.runner._context import ContextBuilder
from acagent.runner._cut import SUMMARY_SYSTEM, choose_cut, merge_summary, render_transcript
from acagent.runner._window import BYTES_PER_TOKEN, RequestEstimator, bytes_to_tokens
from acagent.runner._writer import crash_point
from acagent.store import FinishStep, InsertStep

__all__ = ["CompactionFailed", "CompactionPorts", "compact_context", "compact_now", "ports_of"]

CRASH_POINTS = ("compact_before_call", "compact_mid_summary", "compact_before_commit")
"""Test-only crash points of a compaction (``ACAGENT_CRASH_AT``)."""


@dataclass
class CompactionPorts:
    """What a compaction needs of the turn it runs in."""

    session_id: str
    turn_id: str | None
    journal: Any
    writer: Any
    """The session writer (``commit(events, ops=...)``); its commits fold into ``context``."""
    context: ContextBuilder
    provider: Callable[[], Awaitable[Provider]]
    settings: Any
    system_prompt: str
    estimator: RequestEstimator
    tools: list[Any]
    budget: Any = None
    """The process :class:`~acagent.runner._budget.Budget` (usage rows, metrics), or None."""
    wake: Callable[[list[Any], list[Any]], Awaitable[None]] | None = None
    """``async (events, ops)``: commits the compaction when the model is called right after it
    (``fit_context``), so the next step's intent rides in it (``Turn.commit(wakes=True)``);
    None: ``writer.commit``."""


def _model_id(provider: Provider) -> str:
    return f"{provider.name}:{provider.model}"


async def _first_kept_seq(ports: CompactionPorts, cut: int) -> int:
    seqs = ports.context.seqs
    if len(seqs) == len(ports.context.messages) and seqs[cut]:
        return int(seqs[cut])
    # Positions unknown (context loaded from a checkpoint older than compaction): the kept part
    # starts at the k-th user.message from the end, k = turn starts from the cut on.
    from acagent.runner._cut import turn_starts

    k = sum(1 for i in turn_starts(ports.context.messages) if i >= cut)
    users = [e.seq for e in await ports.journal.events(ports.session_id, 0) if e.type == "user.message"]
    return int(users[-k]) if 0 < k <= len(users) else ports.context.last_seq


async def _summarise(
    ports: CompactionPorts, provider: Provider, request: ModelRequest, crash_at: str | None
) -> Any:
    timing = ports.settings.timing
    with anyio.fail_after(timing.llm_timeout_s):
        async with provider.request_stream(request) as stream:
            seen = 0
            async for event in stream:
                if isinstance(event, TextDelta) and event.text:
                    seen += 1
                    if seen == 1:
                        crash_point("compact_mid_summary", crash_at)
            return stream.get()


async def compact_now(turn: Any) -> dict[str, Any]:
    """A manual compaction (``/compact``) in ``turn``: every turn but the last is summarised.

    Raises:
        CompactionFailed: the session has no history yet, or :func:`compact_context` failed.
    """
    ports = ports_of(turn, await turn.definitions())
    if not ports.context.messages:
        raise CompactionFailed("the session has no history to compact yet")
    return await compact_context(ports, reason="manual")


async def compact_context(ports: CompactionPorts, *, reason: str) -> dict[str, Any]:
    """Compact the context (module docstring) and return the ``context.compacted`` payload.

    Raises:
        CompactionFailed: nothing older than the current turn, an empty summary, a summary that
            does not shrink the request, or the summary call failed for good.
    """
    settings = ports.settings
    provider = await ports.provider()
    model = _model_id(provider)
    window = model_window(model, settings.models)
    ctx = ports.context
    messages = list(ctx.messages)
    tokens_before = ports.estimator.estimate(ports.system_prompt, messages, ports.tools)
    cut = _cut_or_fail(ports, messages, reason, window, model, tokens_before)
    limit = (
        f"the context is {tokens_before:,} tokens (estimated); compaction starts at "
        f"{settings.context.compact_at:.0%} of the {window.context_window:,}-token window of {model}"
        + ("" if window.known else " (assumed: the model's window is unknown)")
    )
    first_kept_seq = await _first_kept_seq(ports, cut)
    out_tokens = max(256, min(window.max_output_tokens, window.context_window // 8, 4096))
    room = max(1000, window.context_window - out_tokens - bytes_to_tokens(len(SUMMARY_SYSTEM)) - 256)
    transcript = render_transcript(messages[:cut], max_chars=room * BYTES_PER_TOKEN)
    prompt = (
        "Summarise this transcript of the session so far; the summary replaces it in the context.\n\n"
        f"<transcript>\n{transcript}\n</transcript>"
    )
    digest = ctx.digest(ports.system_prompt)[:16]
    step_id = f"{ports.session_id}|compact|{ctx.last_seq}|{digest}"
    turn_id = ports.turn_id or "compact"
    attempt = await _recover_attempt(ports, step_id, turn_id)
    while True:
        if attempt > settings.timing.step_max_attempts:
            raise CompactionFailed(
                f"could not compact: the summary request failed after {attempt - 1} attempts; {limit}",
                detail={"tokens": tokens_before, "window": window.context_window, "model": model},
            )
        request_id = f"{step_id}|{attempt}"
        request = ModelRequest(
            system=SUMMARY_SYSTEM,
            messages=[Message(role="user", parts=[TextPart(text=prompt)])],
            tools=[],
            request_id=request_id,
            max_tokens=out_tokens,
        )
        started = make_payload(
            "step.started", turn_id=turn_id, step_id=step_id, request_id=request_id, attempt=attempt
        )
        await ports.writer.commit(
            [("step.started", started)], ops=[InsertStep(request_id, step_id, turn_id, digest, attempt)]
        )
        crash_point("compact_before_call", settings.crash_at)
        try:
            response = await _summarise(ports, provider, request, settings.crash_at)
        except ProviderError as exc:
            retry = exc.retryable and attempt < settings.timing.step_max_attempts
            await ports.writer.commit(
                [_retry_event(turn_id, attempt, exc.error_type, exc.message)] if retry else [],
                ops=[FinishStep(request_id, "failed", exc.message)],
            )
            if not retry:
                detail = {"tokens": tokens_before, "window": window.context_window, "model": model}
                raise _summary_failed(exc, attempt, limit, detail) from exc
            await anyio.sleep(
                min(
                    settings.timing.retry_max_delay_s, settings.timing.retry_base_delay_s * 2 ** (attempt - 1)
                )
            )
            attempt += 1
            continue
        crash_point("compact_before_commit", settings.crash_at)
        return await _commit(
            ports,
            response,
            messages,
            cut,
            first_kept_seq,
            tokens_before,
            model,
            reason,
            limit=limit,
            step_id=step_id,
            request_id=request_id,
            attempt=attempt,
            turn_id=turn_id,
        )


def _cut_or_fail(
    ports: CompactionPorts, messages: list[Message], reason: str, window: Any, model: str, tokens_before: int
) -> int:
    """Where the summarised part ends (:func:`choose_cut`).

    Raises:
        CompactionFailed: everything is the current turn (nothing older to summarise).
    """
    sizes = [bytes_to_tokens(ports.estimator.message_bytes(m)) for m in messages]
    # After a provider refusal the window is smaller than assumed, and a user who asks wants the
    # room: keep only the last turn. Otherwise keep what fits in keep_recent of the window.
    keep_recent = ports.settings.context.keep_recent
    keep = 0 if reason in ("overflow", "manual") else int(window.context_window * keep_recent)
    cut = choose_cut(messages, sizes, keep)
    if cut is None:
        which = "last turn" if reason == "manual" else "current turn"  # a manual one runs between turns
        raise CompactionFailed(
            f"the context ({tokens_before} tokens, estimated) is all the {which}: nothing older to "
            f"summarise within the {window.context_window}-token window of {model}",
            detail={
                "tokens": tokens_before,
                "window": window.context_window,
                "model": model,
                "reason": "nothing_to_summarise",
            },
        )
    return cut


def _summary_failed(exc: ProviderError, attempt: int, limit: str, detail: dict[str, Any]) -> CompactionFailed:
    """The error of a summary request that failed for good (refused, or out of attempts)."""
    why = (
        f"the summary request failed {attempt} times ({exc.message})"
        if exc.retryable
        else f"the provider refused the summary request ({exc.message})"
    )
    reason = "summary_failed" if exc.retryable else "summary_refused"
    return CompactionFailed(
        f"could not compact: {why}; {limit}",
        detail={**detail, "reason": reason, "provider_error": exc.error_type},
    )


def _retry_event(turn_id: str, attempt: int, reason: str, error: str) -> tuple[str, dict[str, Any]]:
    return (
        "llm.retry",
        make_payload("llm.retry", turn_id=turn_id, attempt=attempt, reason=reason, delay_ms=0, error=error),
    )


async def _recover_attempt(ports: CompactionPorts, step_id: str, turn_id: str) -> int:
    attempts = await ports.journal.step_attempts(ports.session_id, step_id)
    if not attempts:
        return 1
    prev = attempts[-1]
    if prev.status == "inflight":  # its process died mid-summary: counted and visible
        await ports.writer.commit(
            [
                _retry_event(
                    turn_id,
                    prev.attempt,
                    "process_died",
                    "the process making this call stopped before it finished",
                )
            ],
            ops=[FinishStep(prev.request_id, "failed", "process died")],
        )
    return int(prev.attempt) + 1


async def _commit(
    ports: CompactionPorts,
    response: Any,
    messages: list[Message],
    cut: int,
    first_kept_seq: int,
    tokens_before: int,
    model: str,
    reason: str,
    *,
    limit: str,
    step_id: str,
    request_id: str,
    attempt: int,
    turn_id: str,
) -> dict[str, Any]:
    summary = "".join(p.text for p in response.parts if isinstance(p, TextPart)).strip()
    compacted = merge_summary(summary, messages[cut:]) if summary else []
    tokens_after = (
        RequestEstimator().estimate(ports.system_prompt, compacted, ports.tools) if summary else tokens_before
    )
    usage = response.usage
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "step.finished",
            make_payload(
                "step.finished",
                turn_id=turn_id,
                step_id=step_id,
                request_id=request_id,
                attempt=attempt,
                finish_reason=response.finish_reason,
            ),
        ),
    ]
    ops: list[Any] = [FinishStep(request_id, "done")]
    extra: dict[str, Any] = {}
    if ports.budget is not None:
        op, extra = await ports.budget.record(request_id, model, usage)
        ops.append(op)
    events.append(usage_event(turn_id, usage, purpose="compaction", **extra))
    if not summary or tokens_after >= tokens_before:
        await ports.writer.commit(events, ops=ops)  # the call was paid: its usage is kept
        what = (
            "an empty summary"
            if not summary
            else f"a summary that does not shrink it ({tokens_before:,} → {tokens_after:,} tokens)"
        )
        raise CompactionFailed(
            f"compaction of the context produced {what}; {limit}",
            detail={
                "tokens_before": tokens_before,
                "tokens_after": tokens_after,
                "reason": "empty_summary" if not summary else "summary_too_long",
                "model": model,
            },
        )
    payload = make_payload(
        "context.compacted",
        summary=summary,
        first_kept_seq=first_kept_seq,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        model=model,
        reason=reason,
    )
    events.append(("context.compacted", payload))
    if not _positions_known(ports.context, messages, cut, first_kept_seq):
        events.append(_checkpoint(ports.context, messages, cut, first_kept_seq, compacted))
    ports.estimator.reset()  # before the commit: an intent planned in it sizes the new context
    if ports.wake is not None:
        await ports.wake(events, ops)
    else:
        await ports.writer.commit(events, ops=ops)
    return payload


def _positions_known(ctx: ContextBuilder, messages: list[Message], cut: int, first_kept_seq: int) -> bool:
    """True when the fold of ``context.compacted`` alone gives the compacted context: every kept
    message knows the seq of its first event (so the events from ``first_kept_seq`` on fold into
    exactly them), and the cut is where the fold finds ``first_kept_seq``."""
    seqs = ctx.seqs
    return len(seqs) == len(messages) and all(seqs[cut:]) and ctx.kept_from(first_kept_seq) == cut


def _checkpoint(
    ctx: ContextBuilder, messages: list[Message], cut: int, first_kept_seq: int, compacted: list[Message]
) -> tuple[str, dict[str, Any]]:
    """The full copy of the compacted context a compaction of unknown positions commits."""
    rest = ctx.seqs[cut + 1 :] if len(ctx.seqs) == len(messages) else [0] * (len(messages) - cut - 1)
    return (
        "checkpoint",
        make_payload(
            "checkpoint",
            upto_seq=ctx.last_seq,
            messages=[m.model_dump(mode="json") for m in compacted],
            message_seqs=[first_kept_seq, *rest],
        ),
    )


def ports_of(turn: Any, tools: list[Any]) -> CompactionPorts:
    """The :class:`CompactionPorts` of a :class:`~acagent.runner._turn.Turn`."""
    return CompactionPorts(
        session_id=turn.session_id,
        turn_id=turn.turn_id,
        journal=turn.journal,
        writer=turn.writer,
        context=turn.context,
        provider=turn.provider,
        settings=turn.settings,
        system_prompt=turn.system_prompt,
        estimator=turn.estimator or RequestEstimator(),
        tools=tools,
        budget=turn.budget,
    )
