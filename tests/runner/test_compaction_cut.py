"""The compaction cut rule, the summary merge, the request estimator and model windows."""

from __future__ import annotations

import logging

import pytest

from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acagent.models._windows import UNKNOWN_WINDOW, model_window, warn_unknown
from acagent.runner._cut import SUMMARY_MARK, choose_cut, merge_summary, render_transcript, turn_starts
from acagent.runner._window import MAX_BYTES_PER_TOKEN, RequestEstimator, bytes_to_tokens


def user(text: str) -> Message:
    return Message(role="user", parts=[TextPart(text=text)])


def assistant(text: str = "", calls: tuple[str, ...] = ()) -> Message:
    parts: list = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(tool_call_id=c, name="shell", arguments={"command": "ls"}) for c in calls]
    return Message(role="assistant", parts=parts)


def results(*ids: str) -> Message:
    return Message(
        role="user", parts=[ToolResultPart(tool_call_id=i, name="shell", content="out") for i in ids]
    )


def history(turns: int) -> list[Message]:
    out: list[Message] = []
    for t in range(turns):
        out += [
            user(f"turn {t}"),
            assistant("", (f"c{t}a", f"c{t}b")),
            results(f"c{t}a", f"c{t}b"),
            assistant(f"done {t}"),
        ]
    return out


def test_cut_falls_only_on_turn_starts_and_keeps_the_current_turn() -> None:
    msgs = history(6)
    starts = turn_starts(msgs)
    assert starts == [0, 4, 8, 12, 16, 20]
    tokens = [10] * len(msgs)
    for budget in range(0, 200, 7):
        cut = choose_cut(msgs, tokens, budget)
        assert cut is None or cut in starts
        assert cut is None or cut <= starts[-1]  # the current turn's user message is kept
        if cut is not None:
            kept = msgs[cut:]
            asked = {c.tool_call_id for m in kept for c in m.tool_calls}
            answered = {p.tool_call_id for m in kept for p in m.parts if isinstance(p, ToolResultPart)}
            assert asked == answered  # no tool call separated from its result
    assert choose_cut(msgs, tokens, 0) == 20  # nothing fits: keep only the current turn
    assert choose_cut(msgs, tokens, 80) == 16  # 40 tokens a turn: the last two turns fit in 80
    assert choose_cut(msgs[:4], tokens[:4], 0) is None  # only the current turn: nothing to summarise


def test_summary_is_merged_into_the_first_kept_user_message() -> None:
    msgs = history(3)
    merged = merge_summary("the summary", msgs[4:])
    assert merged[0].role == "user" and merged[0].parts[0].text.startswith(SUMMARY_MARK)
    assert merged[0].parts[1] == msgs[4].parts[0]
    assert [m.role for m in merged] == [m.role for m in msgs[4:]]


def test_transcript_for_the_summary_is_bounded_and_keeps_an_earlier_summary() -> None:
    msgs = [merge_summary("EARLIER", [user("x")])[0], *history(50)]
    text = render_transcript(msgs, max_chars=2000)
    assert len(text) <= 2100 and "EARLIER" in text and "omitted" in text
    big = [user("y" * 50_000)]
    assert len(render_transcript(big, max_chars=10_000, item_chars=1000)) < 1200


def test_estimator_is_conservative_and_calibrates_from_reported_usage() -> None:
    est = RequestEstimator()
    msgs = history(10)
    size = est.request_bytes("sys", msgs)
    assert est.estimate("sys", msgs) == bytes_to_tokens(size) > size // 4
    real = size // 4  # what a tokenizer reports: about 4 bytes per token
    est.calibrate(size, real)
    assert est.estimate("sys", msgs) == real
    more = [*msgs, user("z" * 300)]
    assert est.estimate("sys", more) == real + bytes_to_tokens(est.request_bytes("sys", more) - size)
    est.reset()
    est.calibrate(size, 1)  # a placeholder count, not this request's: ignored
    assert est.estimate("sys", msgs) == bytes_to_tokens(size)
    est.calibrate(size, size // MAX_BYTES_PER_TOKEN + 1)  # the least plausible count still counts
    assert est.estimate("sys", msgs) == size // MAX_BYTES_PER_TOKEN + 1


def test_model_windows_known_configured_and_unknown(caplog: pytest.LogCaptureFixture) -> None:
    assert model_window("openai:gpt-4o-mini").context_window == 128_000
    assert model_window("anthropic:claude-sonnet-4-5").max_output_tokens == 64_000
    assert model_window("openai:mine", {"openai:mine": {"context_window": 4000}}).context_window == 4000
    w = model_window("openai:never-heard-of-it")
    assert (w.context_window, w.known) == (UNKNOWN_WINDOW, False)
    with caplog.at_level(logging.WARNING, logger="acagent.models"):
        warn_unknown("openai:never-heard-of-it")
        warn_unknown("openai:never-heard-of-it")
    assert caplog.text.count("unknown") == 1
