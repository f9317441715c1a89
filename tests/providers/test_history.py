"""The one history check before every provider request (``acagent.messages.check_history``).

Repairs are deterministic; what no rule repairs fails with :class:`InvalidHistory` before any
byte is sent. The strict mock provider is the referee: a repaired history is accepted by it.
"""

from __future__ import annotations

from typing import Any

import pytest

from acagent.errors import InvalidHistory
from acagent.messages import (
    INTERRUPTED_RESULT,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    check_history,
)
from tests.mockprovider import MockProvider, TextReply
from tests.providers.helpers import collect, make_request, user

pytestmark = pytest.mark.anyio


def asks(*ids: str, text: str = "") -> Message:
    parts: list[object] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(tool_call_id=i, name="shell", arguments={"command": "true"}) for i in ids]
    return Message(role="assistant", parts=parts)  # type: ignore[arg-type]


def result(i: str, content: str = "ok") -> ToolResultPart:
    return ToolResultPart(tool_call_id=i, name="shell", content=content)


def test_a_valid_history_is_returned_unchanged() -> None:
    history = [
        user("hi"),
        asks("a", "b"),
        Message(role="user", parts=[result("a"), result("b")]),
        asks(text="x"),
    ]
    history[-1] = Message(role="assistant", parts=[TextPart(text="done")])
    history.append(user("again"))
    checked = check_history(history)
    assert checked == history and all(a is b for a, b in zip(checked, history, strict=True))


def test_an_orphan_call_is_closed_with_an_interrupted_result() -> None:
    """In call order, before the user's text; a call at the very end gets a user message of its own."""
    history = [user("hi"), asks("a", "b"), Message(role="user", parts=[TextPart(text="next"), result("a")])]
    fixed = check_history(history)
    parts = fixed[2].parts
    assert [type(p).__name__ for p in parts] == ["ToolResultPart", "ToolResultPart", "TextPart"]
    assert [p.tool_call_id for p in parts[:2]] == ["a", "b"]  # type: ignore[union-attr]
    assert parts[1].is_error and parts[1].content == INTERRUPTED_RESULT  # type: ignore[union-attr]
    tail = check_history([user("hi"), asks("c")])
    assert tail[-1].role == "user" and tail[-1].parts[0].tool_call_id == "c"  # type: ignore[union-attr]
    assert check_history(history) == fixed  # deterministic


def test_empty_messages_are_dropped() -> None:
    """Nothing streamed (F02): the empty assistant message goes, the users around it merge."""
    history = [user("a"), Message(role="assistant", parts=[]), asks(text=""), user("b")]
    history[2] = Message(role="assistant", parts=[TextPart(text="")])
    assert check_history(history) == [Message(role="user", parts=[TextPart(text="a"), TextPart(text="b")])]


def test_two_user_messages_are_merged() -> None:
    assert check_history([user("a"), user("b")]) == [
        Message(role="user", parts=[TextPart(text="a"), TextPart(text="b")])
    ]


@pytest.mark.parametrize(
    ("history", "problem"),
    [
        (
            [user("hi"), asks(text="a"), Message(role="assistant", parts=[TextPart(text="b")])],
            "two assistant",
        ),
        ([user("hi"), asks("a"), Message(role="user", parts=[result("zzz")])], "answers no call"),
        ([user("hi"), asks("a"), Message(role="user", parts=[result("a"), result("a")])], "same call"),
        ([Message(role="user", parts=[result("a")])], "follow no assistant"),
        ([user("hi"), asks("a"), Message(role="user", parts=[result("a")]), asks("a")], "used twice"),
    ],
)
def test_what_no_rule_repairs_fails_clearly(history: list[Message], problem: str) -> None:
    with pytest.raises(InvalidHistory, match=problem) as info:
        make_request(history)
    assert info.value.code == "invalid_history"
    assert "the model context is invalid at message" in info.value.message


async def test_the_strict_mock_accepts_a_repaired_request(
    mock: MockProvider, openai_provider: object
) -> None:
    """Built through ``ModelRequest`` (as every provider request is), an orphan call reaches the
    wire closed; the mock — which rejects an unanswered call — answers 200."""
    mock.script(TextReply("fine"))
    request = make_request([user("hi"), asks("call_A", text="running"), user("what now?")])
    _, response = await collect(openai_provider, request)
    assert response.message.text == "fine"
    sent = [m for m in mock.requests[-1].json["messages"] if m["role"] != "system"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == "call_A" and "interrupted" in sent[2]["content"]


def test_a_grown_history_is_checked_from_where_the_last_check_ended(monkeypatch: Any) -> None:
    """The runner sends the same message objects plus new ones: only the new ones are checked
    (the per-request check stays O(new messages)), with the same result as a full check."""
    import acagent.messages as m

    def turn(n: int) -> list[Message]:
        call = ToolCallPart(tool_call_id=f"c{n}", name="shell", arguments={"command": "ls"})
        return [
            Message(role="user", parts=[TextPart(text=f"q{n}")]),
            Message(role="assistant", parts=[call]),
            Message(role="user", parts=[ToolResultPart(tool_call_id=f"c{n}", name="shell", content="ok")]),
            Message(role="assistant", parts=[TextPart(text=f"a{n}")]),
        ]

    history = [msg for n in range(50) for msg in turn(n)]
    assert check_history(history) == history
    looked: list[int] = []
    real_all = all

    def counting_all(it: Any) -> bool:  # the empty-message test runs once per examined message
        looked.append(1)
        return real_all(it)

    monkeypatch.setattr(m, "all", counting_all, raising=False)
    grown = [*history, *turn(50)]
    assert check_history(grown) == grown
    assert len(looked) <= 4 + 1  # the 4 new messages (+ the identity check of the prefix)
    # the same answers as a check with no memory, including a repair after the prefix
    broken = [*history, Message(role="user", parts=[TextPart(text="again")])]
    m._VALID.clear()
    full = check_history(broken)
    check_history(history)
    assert check_history(broken) == full and full[-1].parts[-1].text == "again"
    reused = [*history, *turn(3)]  # a call id of the prefix used again
    with pytest.raises(InvalidHistory):
        check_history(reused)


def _turns(n: int, start: int = 0) -> list[Message]:
    out: list[Message] = []
    for k in range(start, start + n):
        call = ToolCallPart(tool_call_id=f"t{k}", name="shell", arguments={"command": "ls"})
        out += [
            Message(role="user", parts=[TextPart(text=f"q{k}")]),
            Message(role="assistant", parts=[TextPart(text="let me look"), call]),
            Message(role="user", parts=[ToolResultPart(tool_call_id=f"t{k}", name="shell", content="ok")]),
            Message(role="assistant", parts=[TextPart(text=f"a{k}")]),
        ]
    return out


def test_a_replaced_last_message_is_not_a_full_check(monkeypatch: Any) -> None:
    """A request whose last message differs from the previous request's (a retried or edited
    question) checks only what differs: the remembered prefix it shares is not checked again
    (before, any difference meant checking the whole history: ≈ 8 ms at 500 turns)."""
    import acagent.messages as m

    history = _turns(50)
    first = [*history, user("question 1")]
    assert check_history(first) == first
    answered: list[int] = []
    real = m._answer
    monkeypatch.setattr(m, "_answer", lambda *a: answered.append(1) or real(*a))
    second = [*history, user("question 2")]
    assert check_history(second) == second
    assert answered == []  # no call of the 50 in the shared prefix was checked again


def test_a_remembered_prefix_gives_the_result_of_a_full_check() -> None:
    """Random edits of a checked history (replaced, cut, appended, a result moved away from its
    call, a call id used again): with a remembered prefix, the same result or the same error as
    a check with no memory."""
    import random

    import acagent.messages as m

    rng = random.Random(12)
    base = _turns(12)
    pool = [
        user("u"),
        Message(role="assistant", parts=[TextPart(text="x")]),
        asks("t3"),
        asks("fresh"),
        Message(role="user", parts=[result("t5")]),
        Message(role="user", parts=[result("fresh")]),
        Message(role="user", parts=[TextPart(text="")]),
    ]

    def outcome(messages: list[Message]) -> Any:
        try:
            return [msg.model_dump() for msg in check_history(messages)]
        except InvalidHistory as exc:
            return str(exc)

    for _ in range(300):
        m._VALID.clear()
        assert isinstance(outcome(base), list)
        cut = rng.randrange(1, len(base) + 1)
        edited = [*base[:cut], *rng.sample(pool, rng.randrange(0, 3))]
        remembered = outcome(edited)
        m._VALID.clear()
        assert remembered == outcome(edited), edited[cut - 1 :]
