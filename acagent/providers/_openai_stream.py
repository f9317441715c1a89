"""Reading an OpenAI Chat Completions stream: SDK errors, chunks → stream events, tool calls.

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

import json
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acagent.errors import ProviderConnectionError, UnexpectedModelBehavior
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
from acagent.providers._sdk import load_sdk, transport_errors
from acagent.providers._stream import BaseStreamedResponse

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletionChunk

__all__ = ["OpenAIStreamedResponse", "map_api_errors"]

_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


@contextmanager
def map_api_errors(provider: str, key_env: str | None, base_url: str) -> Iterator[None]:
    """Translate ``openai`` SDK exceptions into :mod:`acagent.errors` (``raise ... from``).

    Raises:
        ProviderHTTPError: non-2xx answer (``APIStatusError``) or an in-band ``{"error": ...}``
            stream event (``APIError``).
        ProviderConnectionError: connection refused/reset, SDK timeout.
        UnexpectedModelBehavior: an event that is not valid JSON, or a response the SDK rejects.
    """
    openai = load_sdk("openai")
    try:
        yield
    except openai.APIStatusError as exc:
        body = exc.body
        err = body if isinstance(body, dict) else {}
        if isinstance(err.get("error"), dict):  # some servers wrap it once more
            err = err["error"]
        raise http_status_error(
            provider,
            exc.status_code,
            body=body,
            headers={k.lower(): v for k, v in exc.response.headers.items()},
            error_type=err.get("type") or err.get("code"),
            error_code=err.get("code") if isinstance(err.get("code"), str) else None,
            api_message=err.get("message"),
            key_env=key_env,
        ) from exc
    except openai.APITimeoutError as exc:
        raise ProviderConnectionError(f"request to {provider!r} at {base_url!r} timed out") from exc
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise ProviderConnectionError(f"cannot reach {provider!r} at {base_url!r}: {cause}") from exc
    except openai.APIResponseValidationError as exc:
        raise UnexpectedModelBehavior(f"{provider!r} sent an invalid response: {exc}", body=exc.body) from exc
    except openai.APIError as exc:
        raise stream_error(
            provider, error_type=exc.type or exc.code, api_message=exc.message, body=exc.body
        ) from exc
    except transport_errors() as exc:
        raise ProviderConnectionError(f"connection to {provider!r} at {base_url!r} broke: {exc!r}") from exc
    except json.JSONDecodeError as exc:
        raise UnexpectedModelBehavior(
            f"{provider!r} sent a stream event that is not JSON: {exc}", body=exc.doc[:500]
        ) from exc


# --------------------------------------------------------------------------- stream mapping


@dataclass
class _OpenCall:
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
        self,
        stream: openai.AsyncStream[ChatCompletionChunk],
        *,
        provider: str,
        key_env: str | None,
        base_url: str,
        idle_timeout_s: float,
        deadline: float,
    ) -> None:
        super().__init__(
            stream, provider=provider, base_url=base_url, idle_timeout_s=idle_timeout_s, deadline=deadline
        )
        self._key_env = key_env
        self._next_slot = 0
        self._text_slot: int | None = None
        self._reasoning_slot: int | None = None
        self._calls: dict[int, _OpenCall] = {}
        """Wire index → the call open at that index."""
        self._held_names: dict[int, str] = {}
        """Wire index → a name seen on a fragment without arguments after a complete call."""
        self._last_wire_index = 0
        self._final_usage = False
        self._eof = False

    def _map_errors(self) -> AbstractContextManager[None]:
        return map_api_errors(self._provider, self._key_env, self._base_url)

    def _on_item(self, item: Any) -> Iterator[StreamEvent]:
        return self._on_chunk(item)

    def _terminal(self) -> bool:
        if self._finish_reason is None:
            return False
        return self._final_usage or (self._activity is not None and self._activity.done_marker)

    def _check_complete(self) -> None:
        nameless = [c.tool_call_id for c in self._calls.values() if not c.started]
        if nameless:
            raise UnexpectedModelBehavior(f"{self._provider!r} sent tool calls without a name: {nameless}")

    # -- chunk handling ---------------------------------------------------------
    def _new_slot(self) -> int:
        slot, self._next_slot = self._next_slot, self._next_slot + 1
        return slot

    def _on_chunk(self, chunk: ChatCompletionChunk) -> Iterator[StreamEvent]:
        if chunk.id:
            self._response_id = chunk.id
        usage = chunk.usage
        if usage is not None:  # the usage-only chunk has `choices: []` (F11)
            yield UsageUpdate(input_tokens=usage.prompt_tokens, output_tokens=usage.completion_tokens)
        yield from self._on_choices(chunk)
        if usage is not None and self._finish_reason is not None:
            self._final_usage = True  # usage at or after the finish chunk is the final usage

    def _on_choices(self, chunk: ChatCompletionChunk) -> Iterator[StreamEvent]:
        for choice in chunk.choices or []:
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                extra = delta.model_extra
                reasoning = (extra.get("reasoning_content") or extra.get("reasoning")) if extra else None
                if isinstance(reasoning, str) and reasoning:
                    if self._reasoning_slot is None:
                        self._reasoning_slot = self._new_slot()
                    yield ReasoningDelta(self._reasoning_slot, reasoning)
                if delta.content:  # "" and None produce nothing
                    if self._text_slot is None:
                        self._text_slot = self._new_slot()
                    yield TextDelta(self._text_slot, delta.content)
                for fragment in delta.tool_calls or []:
                    yield from self._on_tool_fragment(fragment)
            if choice.finish_reason:
                self._finish_reason = _FINISH_REASONS.get(choice.finish_reason, choice.finish_reason)

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

    def _on_tool_fragment(self, fragment: Any) -> Iterator[StreamEvent]:
        wire_index = fragment.index if isinstance(fragment.index, int) else self._last_wire_index
        self._last_wire_index = wire_index
        function = fragment.function
        name: str | None = (function.name if function is not None else None) or None
        args: str = (function.arguments if function is not None else None) or ""
        wire_id: str | None = fragment.id or None
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
