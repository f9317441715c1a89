"""Reading an OpenAI Chat Completions stream: status errors, chunks → stream events, tool calls.

Tool-call assembly (F10). The wire routes argument fragments by ``choices[0].delta.tool_calls[].index``,
but proxies and local servers reuse an index for several calls. The builder's own part index
(a *slot*) is therefore kept apart from the wire index, and a fragment opens a new call (a new
slot, mapped from the same wire index) when:

* it carries a non-empty ``id`` different from the wire id of the call open at that index; or
* **policy for id-less streams:** it carries no id, the open call's argument text is already a
  complete JSON object, and the fragment begins a new top-level object (its argument text starts
  with ``{``) or names a different function. The new call gets a generated id ``call_<uuid hex>``.
  Two objects are never concatenated into ``{...}{...}``. A repeated name is never appended
  (no ``read_fileread_file``) and alone opens no call (some servers repeat it on every fragment);
  it names the next call if an object follows.

Whether a call's text is a complete object is known in O(1) per fragment
(:class:`~acagent.providers._parts.ArgsBuffer`, F24); the text is parsed once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acagent._value import Record
from acagent.errors import ProviderError, UnexpectedModelBehavior
from acagent.providers._base import (
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    UsageUpdate,
    http_status_error,
    stream_error,
)
from acagent.providers._parts import ArgsBuffer
from acagent.providers._stream import BaseStreamedResponse, FragmentTemplate, parse_data

__all__ = ["OpenAIStreamedResponse", "openai_status_error"]

_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


def openai_status_error(
    provider: str, key_env: str | None, status: int, body: Any, headers: dict[str, str]
) -> ProviderError:
    """The error of a non-2xx Chat Completions answer (``body`` decoded JSON, or text)."""
    err = body if isinstance(body, dict) else {}
    if isinstance(err.get("error"), dict):  # {"error": {...}}; some servers wrap it once more
        err = err["error"]
    return http_status_error(
        provider,
        status,
        body=err if err else body,
        headers=headers,
        error_type=err.get("type") or err.get("code"),
        error_code=err.get("code") if isinstance(err.get("code"), str) else None,
        api_message=err.get("message"),
        key_env=key_env,
    )


def _in_band_error(provider: str, chunk: dict[str, Any]) -> ProviderError:
    """An ``{"error": ...}`` event inside a 200 stream (what the SDK raised as ``APIError``)."""
    error = chunk["error"]
    err = error if isinstance(error, dict) else {}
    message = err.get("message")
    return stream_error(
        provider,
        error_type=err.get("type") or err.get("code"),
        api_message=message if isinstance(message, str) and message else "An error occurred during streaming",
        body=error,
    )


# --------------------------------------------------------------------------- stream mapping

_ARGS_PATH = ("choices", 0, "delta", "tool_calls", 0, "function", "arguments")
"""Where an argument fragment is in a chunk (:func:`_args_fragment`)."""


def _args_fragment(chunk: dict[str, Any]) -> tuple[int, str] | None:
    """``(wire index, argument text)`` of the commonest chunk — one argument fragment and
    nothing else (no id, name, text, reasoning, finish reason or usage) — else None.

    Why a fast path: 1 MB of arguments in 9-byte fragments is 116,509 such chunks, and the
    general path (three nested generators and every policy question) cost ≈ 5 µs of CPU each;
    after the first, the stream's :class:`FragmentTemplate` reads them without decoding.
    """
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1 or chunk.get("usage") is not None:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") or choice.get("index") not in (0, None):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or delta.get("content") or delta.get("reasoning_content"):
        return None
    calls = delta.get("tool_calls")
    if delta.get("reasoning") or type(calls) is not list or len(calls) != 1:
        return None
    fragment = calls[0]
    if type(fragment) is not dict or fragment.get("id"):
        return None
    function, index = fragment.get("function"), fragment.get("index")
    if type(function) is not dict or function.get("name") or type(index) is not int:
        return None
    args = function.get("arguments")
    return (index, args) if type(args) is str and args else None


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class _OpenCall(Record):
    """A tool call being streamed; ``slot`` is the builder's part index, not the wire index."""

    slot: int
    tool_call_id: str
    wire_id: bool
    """True when the id came from the wire (not generated)."""
    name: str = ""
    args: ArgsBuffer = field(default_factory=ArgsBuffer)
    """This call's own argument text (the policy above asks whether it is complete)."""
    started: bool = False


class OpenAIStreamedResponse(BaseStreamedResponse):
    """A Chat Completions stream being read (implements ``StreamedResponse``).

    Iterate for :data:`StreamEvent` items; part indexes are builder slots (0, 1, ...), in the
    order parts appear. Then :meth:`get` returns the :class:`Response`. Terminal information:
    ``finish_reason`` plus the usage chunk (or the ``[DONE]`` marker when the server sends no
    usage).
    """

    def __init__(
        self, stream: Any, *, provider: str, base_url: str, idle_timeout_s: float, deadline: float
    ) -> None:
        super().__init__(
            stream, provider=provider, base_url=base_url, idle_timeout_s=idle_timeout_s, deadline=deadline
        )
        self._next_slot = 0
        self._text_slot: int | None = None
        self._reasoning_slot: int | None = None
        self._calls: dict[int, _OpenCall] = {}
        """Wire index → the call open at that index."""
        self._held_names: dict[int, str] = {}
        """Wire index → a name seen on a fragment without arguments after a complete call."""
        self._last_wire_index = 0
        self._final_usage = False
        self._done = False
        self._template: FragmentTemplate | None = None
        """The text of this stream's argument-fragment chunks around the fragment, once learnt."""
        self._template_index = 0
        self._learn = 4
        """Templates still to try learning (each try decodes a chunk twice more)."""

    def _on_item(self, item: tuple[str, str]) -> Iterable[StreamEvent]:
        data = item[1]
        if data.startswith("[DONE]"):
            self._done = True  # the end marker: reading stops (as the SDK did)
            return ()
        template, text = self._template, None
        if template is not None:
            text = template.match(data)
            if text:  # "" is no fragment: the general path maps it to nothing (no empty delta)
                fast = self._next_fragment(self._template_index, text)
                if fast is not None:
                    return fast
        chunk = parse_data(self._provider, data)
        if not isinstance(chunk, dict):
            raise UnexpectedModelBehavior(
                f"{self._provider!r} sent a stream event that is not an object", body=data[:500]
            )
        if chunk.get("error"):
            raise _in_band_error(self._provider, chunk)
        fragment = _args_fragment(chunk)
        fast = None if fragment is None else self._next_fragment(*fragment)
        if fragment is None or fast is None:
            return self._on_chunk(chunk)
        if chunk.get("id"):
            self._response_id = chunk["id"]
        if self._learn > 0 and text is None:
            self._learn -= 1  # a stream whose chunks all differ (a random field) stops trying
            self._template = FragmentTemplate.learn(data, chunk, _ARGS_PATH)
            self._template_index = fragment[0]
        return fast

    def _next_fragment(self, index: int, args: str) -> tuple[StreamEvent] | None:
        """One argument fragment of the call already streaming at wire index ``index``, mapped
        without the general path (:meth:`_on_tool_fragment` gives the same events and state for
        it); None when the general path must decide (no such call, or a complete one, which the
        id-less policy may follow with a new call)."""
        call = self._calls.get(index)
        if call is None or not call.started or call.args.complete:
            return None
        self._last_wire_index = index
        call.args.append(args)
        self._held_names.pop(index, None)
        return (ToolCallArgsDelta(call.slot, args),)

    def _ended(self) -> bool:
        return self._done

    def _terminal(self) -> bool:
        if self._finish_reason is None:
            return False
        return self._final_usage or self._done

    def _check_complete(self) -> None:
        nameless = [c.tool_call_id for c in self._calls.values() if not c.started]
        if nameless:
            raise UnexpectedModelBehavior(f"{self._provider!r} sent tool calls without a name: {nameless}")

    # -- chunk handling ---------------------------------------------------------
    def _new_slot(self) -> int:
        slot, self._next_slot = self._next_slot, self._next_slot + 1
        return slot

    def _on_chunk(self, chunk: dict[str, Any]) -> Iterator[StreamEvent]:
        if chunk.get("id"):
            self._response_id = chunk["id"]
        usage = chunk.get("usage")
        if isinstance(usage, dict):  # the usage-only chunk has `choices: []` (F11)
            yield UsageUpdate(
                input_tokens=usage.get("prompt_tokens"), output_tokens=usage.get("completion_tokens")
            )
        else:
            usage = None
        yield from self._on_choices(chunk)
        if usage is not None and self._finish_reason is not None:
            self._final_usage = True  # usage at or after the finish chunk is the final usage

    def _on_choices(self, chunk: dict[str, Any]) -> Iterator[StreamEvent]:
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(reasoning, str) and reasoning:
                    if self._reasoning_slot is None:
                        self._reasoning_slot = self._new_slot()
                    yield ReasoningDelta(self._reasoning_slot, reasoning)
                content = delta.get("content")
                if content and isinstance(content, str):  # "" and None produce nothing
                    if self._text_slot is None:
                        self._text_slot = self._new_slot()
                    yield TextDelta(self._text_slot, content)
                for fragment in delta.get("tool_calls") or ():
                    if isinstance(fragment, dict):
                        yield from self._on_tool_fragment(fragment)
            finish = choice.get("finish_reason")
            if finish:
                self._finish_reason = _FINISH_REASONS.get(finish, finish)

    def _starts_new_call(self, call: _OpenCall, wire_id: str | None, name: str | None, args: str) -> bool:
        complete = call.args.complete  # O(1): the buffer scanned each fragment once (F24)
        if wire_id and wire_id != call.tool_call_id:
            # F10 C: a different id at a reused index is a new call.
            return call.wire_id or complete
        if wire_id or not complete:
            return False
        # F10 D policy (no ids): after a complete object, a new top-level object or a different
        # function name begins a new call. A repeated name alone does not (some servers repeat
        # it on every fragment); it is remembered in case the next fragment opens an object.
        return args.lstrip().startswith("{") or bool(name and name != call.name)

    def _on_tool_fragment(self, fragment: dict[str, Any]) -> Iterator[StreamEvent]:
        index = fragment.get("index")
        wire_index = index if isinstance(index, int) else self._last_wire_index
        self._last_wire_index = wire_index
        function = fragment.get("function")
        if not isinstance(function, dict):
            function = {}
        name: str | None = function.get("name") or None
        args: str = function.get("arguments") or ""
        wire_id: str | None = fragment.get("id") or None
        call = self._calls.get(wire_index)
        if call is None or self._starts_new_call(call, wire_id, name, args):
            call = _OpenCall(
                slot=self._new_slot(),
                tool_call_id=wire_id or f"call_{uuid.uuid4().hex}",
                wire_id=bool(wire_id),
                name=name or self._held_names.pop(wire_index, ""),
            )
            self._calls[wire_index] = call
            self._text_slot = None  # text after a tool call is a new part
        elif name and call.name and not args:
            self._held_names[wire_index] = name  # a repeat, or the name of a call whose object follows
        if name and not call.name:
            call.name = name  # a repeated name on a continuation fragment is never appended
        if args:
            call.args.append(args)
            if call.name == name or not name:
                self._held_names.pop(wire_index, None)
        if not call.started:
            if not call.name:
                return  # hold fragments until the name arrives
            call.started = True
            yield ToolCallStart(call.slot, call.tool_call_id, call.name)
            if call.args.size:
                yield ToolCallArgsDelta(call.slot, call.args.text)
        elif args:
            yield ToolCallArgsDelta(call.slot, args)
