"""The fast paths for argument fragments (F24, figure 8) change nothing but the CPU they cost.

The OpenAI adapter maps the commonest chunk (one argument fragment of a call already streaming)
without its general path, and after the first such chunk reads the next ones through a
:class:`~acagent.providers._stream.FragmentTemplate` without decoding them. Every stream here is
read twice — as it is, and with the fast paths switched off — and must give the same events,
the same reply, or the same error; odd chunks (another shape, an invalid literal, a complete
object followed by a new one) must fall back to the general path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from acagent.errors import ProviderError
from acagent.providers._openai_stream import OpenAIStreamedResponse
from acagent.providers._stream import FragmentTemplate
from tests.providers.helpers import EventList

pytestmark = pytest.mark.anyio


def _chunk(
    args: str | None = None,
    *,
    index: Any = 0,
    call_id: str | None = None,
    name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    fragment = {"index": index, "id": call_id, "function": {"name": name, "arguments": args}}
    delta = {"content": extra.pop("content", None), "tool_calls": [fragment]}
    choice = {"index": 0, "delta": delta, "finish_reason": extra.pop("finish_reason", None)}
    return {"id": extra.pop("id", "chatcmpl-1"), "usage": extra.pop("usage", None), "choices": [choice]}


def _text(chunk: dict[str, Any]) -> tuple[str, str]:
    return "message", json.dumps(chunk)


def _end() -> list[tuple[str, str]]:
    finish = {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    usage = {"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    return [_text(finish), _text(usage), ("message", "[DONE]")]


def _start(args: str = '{"path": ') -> list[tuple[str, str]]:
    return [_text(_chunk(args, call_id="call_A", name="write_file"))]


def _normal(text: str, size: int = 3) -> list[tuple[str, str]]:
    return [_text(_chunk(text[i : i + size])) for i in range(0, len(text), size)]


_GENERATED = re.compile(r"call_[0-9a-f]{32}")


async def _read(items: list[tuple[str, str]], *, fast: bool) -> tuple[str, Any]:
    response = OpenAIStreamedResponse(
        EventList(items), provider="openai", base_url="mem", idle_timeout_s=60.0, deadline=1e12
    )
    if not fast:
        response._learn = 0
        response._next_fragment = lambda index, args: None  # type: ignore[method-assign]
    events = []
    try:
        async for event in response:
            events.append(event)
    except ProviderError as exc:
        return "error", (type(exc).__name__, str(exc), events)
    reply = response.get()
    # id-less calls get random ids: compare them by order of appearance
    seen: dict[str, str] = {}
    text = _GENERATED.sub(lambda m: seen.setdefault(m.group(), f"gen{len(seen)}"), repr((events, reply)))
    return "reply", (text, response._template is not None if fast else None)


def _streams() -> dict[str, list[tuple[str, str]]]:
    body = '"r\\u00e9sum\\u00e9 \\ud83d\\ude00 \\"q\\" \\n \\\\", "content": "plain text"}'
    odd_shapes = [
        _text(_chunk("xy", id="chatcmpl-2")),  # another response id: the text differs
        _text(_chunk("zz", finish_reason="length")),
        _text(_chunk("u1", usage={"prompt_tokens": 1, "completion_tokens": 1})),
        _text(_chunk("c1", content="text beside the call")),
        _text(_chunk("n1", name="write_file")),  # a repeated name on a continuation
        _text(_chunk("", index=0)),
        _text(_chunk("b1", index=True, name="shell")),  # opens a second call
        _text(_chunk("i1", index=1)),
        ("message", json.dumps(_chunk("w1"), indent=1)),  # the same chunk, other whitespace
        (
            "message",
            json.dumps(_chunk("PLACEHOLDER")).replace(
                '"arguments": "PLACEHOLDER"', '"arguments": "no", "arguments": "dup"'
            ),
        ),
    ]
    escaped = json.dumps(_chunk("Q")).replace('"Q"', '"\\q"')  # not a JSON escape
    control = json.dumps(_chunk("Q")).replace('"Q"', '"a\x01b"')  # a raw control character
    lone = json.dumps(_chunk("Q")).replace('"Q"', '"\\ud800"')  # a lone surrogate escape
    trailing = json.dumps(_chunk("Q")).replace('"Q"', '"a" "b"')
    idless_next = [_text(_chunk('{"path": "b"}')), _text(_chunk("more"))]  # after a complete object
    return {
        "plain": [*_start(), *_normal(body), *_end()],
        "odd shapes": [*_start(), *_normal(body[:12]), *odd_shapes, *_normal(body[12:]), *_end()],
        # an empty fragment once the template is learnt: the general path maps it to nothing
        "empty fragment after the template": [
            *_start(),
            *_normal(body[:12]),
            _text(_chunk("")),
            *_normal(body[12:]),
            *_end(),
        ],
        "complete then a new object": [*_start(), *_normal('"a"}'), *idless_next, *_end()],
        "bad escape": [*_start(), *_normal(body[:9]), ("message", escaped), *_end()],
        "control character": [*_start(), *_normal(body[:9]), ("message", control), *_end()],
        "lone surrogate": [*_start(), *_normal(body[:9]), ("message", lone), *_end()],
        "two literals": [*_start(), *_normal(body[:9]), ("message", trailing), *_end()],
        "not an object": [*_start(), *_normal(body[:9]), ("message", "[1, 2]"), *_end()],
    }


@pytest.mark.parametrize("name", list(_streams()))
async def test_the_fast_paths_give_what_the_general_path_gives(name: str) -> None:
    items = _streams()[name]
    kind, fast = await _read(items, fast=True)
    slow_kind, slow = await _read(items, fast=False)
    assert (kind, fast[0]) == (slow_kind, slow[0])
    if name in ("plain", "odd shapes", "empty fragment after the template"):
        assert kind == "reply" and fast[1] is True  # the template was learnt and used
    if name in ("bad escape", "control character", "lone surrogate", "two literals", "not an object"):
        assert kind == "error"
        assert "not JSON" in fast[1] or "not an object" in fast[1]


def test_a_template_is_only_learnt_where_the_value_is_certain() -> None:
    path = ("choices", 0, "delta", "tool_calls", 0, "function", "arguments")
    data = json.dumps(_chunk("abc"))
    template = FragmentTemplate.learn(data, json.loads(data), path)
    assert template is not None
    assert template.match(json.dumps(_chunk('x\\y \u00e9 \U0001f600 "z"'))) == 'x\\y \u00e9 \U0001f600 "z"'
    assert template.match(json.dumps(_chunk("abc"), ensure_ascii=False)) == "abc"
    for bad in ('"\\q"', '"a\x01"', '"\\ud800"', '"a" "b"', '"a', "1", '"a"x'):
        assert template.match(data.replace('"abc"', bad)) is None, bad
    assert template.match(json.dumps(_chunk("abc", id="chatcmpl-2"))) is None
    # the value twice under the same key (JSON keeps the last one): not certain, no template
    twice = data.replace('"arguments": "abc"', '"arguments": "abc", "arguments": "abc"')
    assert FragmentTemplate.learn(twice, json.loads(twice), path) is None
