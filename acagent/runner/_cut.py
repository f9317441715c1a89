"""Where compaction cuts the context, and what the summary request and result look like.

The cut rule (docs/context.md):

- the cut falls only at the start of a turn — a user message that carries the user's text and no
  tool results — so a tool call and its result are never separated;
- the current turn's user message is never dropped: the cut is at or before the current turn;
- the most recent turns are kept verbatim, as many as fit in ``keep_budget`` tokens, but at least
  the current turn; everything before the cut is replaced by a summary.

The summary is merged into the first kept user message (strict providers want alternating roles
starting with a user message), marked so the model knows it is a summary.
"""

from __future__ import annotations

import orjson

from acagent.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart

__all__ = [
    "SUMMARY_MARK",
    "SUMMARY_SYSTEM",
    "choose_cut",
    "merge_summary",
    "render_transcript",
    "turn_starts",
]

SUMMARY_MARK = "[Summary of the earlier part of this conversation, written by acagent's compaction]"

SUMMARY_SYSTEM = (
    "You compact the history of a coding-agent session so the session can continue in a smaller "
    "context. Write a faithful, dense summary of the transcript you are given: the user's goals and "
    "constraints, decisions taken, files read or changed (with paths), commands run and their "
    "outcomes, errors met, and what remains to do. Keep exact identifiers, paths, numbers and "
    "quoted requirements. Do not invent anything. Answer with the summary only."
)


def turn_starts(messages: list[Message]) -> list[int]:
    """Indices of messages where a turn starts (user text, no tool results)."""
    out = []
    for i, m in enumerate(messages):
        no_results = not any(isinstance(p, ToolResultPart) for p in m.parts)
        if m.role == "user" and no_results and any(isinstance(p, TextPart) and p.text for p in m.parts):
            out.append(i)
    return out


def choose_cut(messages: list[Message], tokens: list[int], keep_budget: int) -> int | None:
    """Index of the first message kept verbatim, or None when nothing older can be summarised.

    Args:
        messages: the context.
        tokens: estimated tokens of each message (same length).
        keep_budget: tokens the kept recent turns may take (the current turn is kept regardless).
    """
    starts = turn_starts(messages)
    if not starts:
        return None
    current = starts[-1]
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + tokens[i]
    cut = current
    for i in reversed(starts[:-1]):
        if suffix[i] <= keep_budget:
            cut = i
        else:
            break
    return cut if cut > 0 else None


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[… {len(text) - 2 * half} characters omitted …]\n{text[-half:]}"


def render_transcript(messages: list[Message], *, max_chars: int, item_chars: int = 4000) -> str:
    """The older messages as plain text for the summary request, at most ``max_chars`` characters.

    Each part is clipped to ``item_chars`` (head and tail); when the whole is still too long the
    oldest lines give way (an earlier summary, if any, is kept: it is the first message).
    """
    lines: list[str] = []
    for m in messages:
        for p in m.parts:
            if isinstance(p, TextPart):
                lines.append(f"{'User' if m.role == 'user' else 'Assistant'}: {_clip(p.text, item_chars)}")
            elif isinstance(p, ToolCallPart):
                args = orjson.dumps(p.arguments).decode()
                lines.append(f"Assistant called {p.name}({_clip(args, item_chars)})")
            elif isinstance(p, ToolResultPart):
                tag = " (error)" if p.is_error else ""
                lines.append(f"Result of {p.name}{tag}: {_clip(str(p.content), item_chars)}")
            elif isinstance(p, ReasoningPart):
                continue  # reasoning is not part of the record the summary keeps
    text = "\n\n".join(lines)
    if len(text) <= max_chars:
        return text
    first = lines[0] if lines and lines[0].startswith(f"User: {SUMMARY_MARK}") else ""
    budget = max(0, max_chars - len(first) - 64)
    tail = text[-budget:] if budget else ""
    return (
        (first + "\n\n" if first else "") + "[… the oldest part of the transcript was omitted …]\n\n" + tail
    )


def merge_summary(summary: str, kept: list[Message]) -> list[Message]:
    """The compacted context: the summary merged into the first kept (user) message."""
    head = TextPart(text=f"{SUMMARY_MARK}\n{summary.strip()}\n[End of summary; the conversation continues.]")
    if not kept or kept[0].role != "user":
        return [Message(role="user", parts=[head]), *kept]
    return [Message(role="user", parts=[head, *kept[0].parts]), *kept[1:]]
