"""OpenAI-compatible Chat Completions provider (OpenAI, Ollama, llama.cpp, vLLM, ...).

Connection and mapping stay apart: :class:`OpenAIProvider` owns the ``AsyncOpenAI`` client
(base URL, key, timeouts, SDK retries off), while :func:`to_openai_messages` /
:func:`to_openai_tools` map the provider-neutral context to the wire and
:class:`OpenAIStreamedResponse` maps ``chat.completion.chunk`` events back to
:data:`~acagent.providers.StreamEvent` items through the shared :class:`PartsBuilder`.

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

Argument text is joined per call and parsed once, after ``finish_reason`` (in
:meth:`PartsBuilder.build`). A stream that ends without ``finish_reason`` raises
:class:`~acagent.errors.UnexpectedModelBehavior` (retryable).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import openai

from acagent.errors import ConfigError, ProviderConnectionError, UnexpectedModelBehavior
from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acagent.providers._base import (
    ModelRequest,
    PartsBuilder,
    ReasoningDelta,
    Response,
    StreamEvent,
    TextDelta,
    ToolCallArgsDelta,
    ToolCallStart,
    ToolDefinition,
    UsageUpdate,
    http_status_error,
    next_chunk,
    stream_error,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

    from acagent.settings import Settings

__all__ = [
    "OpenAIProvider",
    "OpenAIStreamedResponse",
    "create_ollama_provider",
    "create_provider",
    "to_openai_messages",
    "to_openai_tools",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_PLACEHOLDER_KEY = "sk-no-key-needed"
"""Sent to local OpenAI-compatible servers, which ignore the key but the SDK requires one."""
_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
}


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Raw transport exception types that may escape the SDK's own wrapping."""
    types: list[type[BaseException]] = []
    for module in ("httpx2", "httpx"):
        with suppress(ImportError):
            types.append(__import__(module).TransportError)
    return tuple(types)


_TRANSPORT_ERRORS = _transport_errors()


@contextmanager
def _map_api_errors(provider: str, key_env: str | None, base_url: str) -> Iterator[None]:
    """Translate ``openai`` SDK exceptions into :mod:`acagent.errors` (``raise ... from``).

    Raises:
        ProviderHTTPError: non-2xx answer (``APIStatusError``) or an in-band ``{"error": ...}``
            stream event (``APIError``).
        ProviderConnectionError: connection refused/reset, SDK timeout.
        UnexpectedModelBehavior: an event that is not valid JSON, or a response the SDK rejects.
    """
    try:
        yield
    except openai.APIStatusError as exc:
        body = exc.body
        err = body if isinstance(body, dict) else {}
        raise http_status_error(
            provider,
            exc.status_code,
            body=body,
            headers={k.lower(): v for k, v in exc.response.headers.items()},
            error_type=err.get("type") or err.get("code"),
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
    except _TRANSPORT_ERRORS as exc:
        raise ProviderConnectionError(f"connection to {provider!r} at {base_url!r} broke: {exc!r}") from exc
    except json.JSONDecodeError as exc:
        raise UnexpectedModelBehavior(
            f"{provider!r} sent a stream event that is not JSON: {exc}", body=exc.doc[:500]
        ) from exc


# --------------------------------------------------------------------------- wire mapping


def to_openai_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as Chat Completions ``tools`` entries (``type: function``)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def _wire_call(part: ToolCallPart) -> dict[str, Any]:
    # A call whose streamed arguments were invalid is replayed with "{}" (F10): the model sees
    # its error result, and the strict API does not reject the history.
    arguments = "{}" if part.arguments_error else json.dumps(part.arguments)
    return {
        "id": part.tool_call_id,
        "type": "function",
        "function": {"name": part.name, "arguments": arguments},
    }


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Map the context to Chat Completions ``messages``.

    * ``system`` becomes a first ``role: system`` message (omitted when empty).
    * An assistant message becomes ``{"role": "assistant", "content": text | None,
      "tool_calls": [...]}``; ``tool_calls`` only when non-empty, ``content: None`` only with
      tool calls; reasoning is not replayed; a message with neither is dropped.
    * A user message's :class:`ToolResultPart` items become ``role: tool`` messages (in order,
      directly after the assistant message), then its text becomes one ``role: user`` message;
      consecutive user texts are merged with a blank line.

    Returns:
        list of wire message dicts, in order.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
            calls = [_wire_call(p) for p in message.parts if isinstance(p, ToolCallPart)]
            if not text and not calls:
                continue
            wire: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                wire["tool_calls"] = calls
            out.append(wire)
            continue
        for part in message.parts:
            if isinstance(part, ToolResultPart):
                out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": part.content})
        text = "\n\n".join(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
        if not text:
            continue
        if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], str):
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": "user", "content": text})
    return out


# --------------------------------------------------------------------------- stream mapping


@dataclass
class _OpenCall:
    """A tool call being streamed; ``slot`` is the builder's part index, not the wire index."""

    slot: int
    tool_call_id: str
    wire_id: bool
    """True when the id came from the wire (not generated)."""
    name: str = ""
    args: list[str] = field(default_factory=list)
    started: bool = False


def _is_complete_object(text: str) -> bool:
    if not text.strip():
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


class OpenAIStreamedResponse:
    """A Chat Completions stream being read (implements ``StreamedResponse``).

    Iterate for :data:`StreamEvent` items; part indexes are builder slots (0, 1, ...), in the
    order parts appear. Then :meth:`get` returns the :class:`Response`.
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
        self._stream = stream
        self._provider, self._key_env, self._base_url = provider, key_env, base_url
        self._idle_timeout_s, self._deadline = idle_timeout_s, deadline
        self._builder = PartsBuilder()
        self._next_slot = 0
        self._text_slot: int | None = None
        self._reasoning_slot: int | None = None
        self._calls: dict[int, _OpenCall] = {}
        """Wire index → the call open at that index."""
        self._held_names: dict[int, str] = {}
        """Wire index → a name seen on a fragment without arguments after a complete call."""
        self._last_wire_index = 0
        self._finish_reason: str | None = None
        self._response_id: str | None = None
        self._response: Response | None = None

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        """Yield events until ``data: [DONE]`` / end of stream.

        Raises:
            ProviderError: HTTP/in-band error, broken or stalled connection, or (as
                UnexpectedModelBehavior) a stream without ``finish_reason``.
        """
        iterator = self._stream  # its own __anext__; closing the response (request_stream) ends it
        while True:
            with _map_api_errors(self._provider, self._key_env, self._base_url):
                chunk = await next_chunk(
                    iterator,
                    provider=self._provider,
                    idle_timeout_s=self._idle_timeout_s,
                    deadline=self._deadline,
                )
            if chunk is None:
                break
            for event in self._on_chunk(chunk):
                yield self._builder.feed(event)
        if self._finish_reason is None:
            raise UnexpectedModelBehavior(
                f"{self._provider!r} stream ended without a finish_reason (cut off mid-reply)",
                body=self._builder.partial_text(),
            )
        nameless = [c.tool_call_id for c in self._calls.values() if not c.started]
        if nameless:
            raise UnexpectedModelBehavior(f"{self._provider!r} sent tool calls without a name: {nameless}")
        parts = self._builder.build()
        self._response = Response(
            parts=parts,
            usage=self._builder.usage,
            finish_reason=self._finish_reason,
            provider_response_id=self._response_id,
        )

    def get(self) -> Response:
        """The complete reply.

        Raises:
            RuntimeError: the stream was not read to its end.
        """
        if self._response is None:
            raise RuntimeError("get() called before the stream finished")
        return self._response

    def partial_text(self) -> str:
        """Text streamed so far, in part order."""
        return self._builder.partial_text()

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
        for choice in chunk.choices or []:
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                extra = delta.model_extra or {}
                reasoning = extra.get("reasoning_content") or extra.get("reasoning")
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
        complete = _is_complete_object("".join(call.args))
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
            if call.args:
                yield ToolCallArgsDelta(call.slot, "".join(call.args))
        elif args:
            yield ToolCallArgsDelta(call.slot, args)


# --------------------------------------------------------------------------- provider


def _is_official(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "") == "api.openai.com"


class OpenAIProvider:
    """A Chat Completions endpoint bound to one model (implements ``Provider``).

    Args:
        model: model name sent as ``model``.
        base_url: endpoint root including ``/v1`` (None: ``https://api.openai.com/v1``).
        api_key: bearer key; None is allowed only for a non-OpenAI ``base_url`` (a placeholder
            is sent).
        name: provider id used in messages and model ids (``openai``, ``ollama``).
        timeout_s: maximum duration of one call, connect to last byte, in seconds.
        idle_timeout_s: maximum silence between two stream chunks, in seconds.

    Raises:
        ConfigError: no key for the official endpoint.
    """

    supports_tools: bool = True

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        name: str = "openai",
        timeout_s: float = 300.0,
        idle_timeout_s: float = 120.0,
    ) -> None:
        self.name = name
        self.model = model
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        self.timeout_s = timeout_s
        self.idle_timeout_s = idle_timeout_s
        self._official = _is_official(self.base_url)
        self._key_env: str | None = "OPENAI_API_KEY" if name == "openai" else None
        if not api_key:
            if self._official:
                raise ConfigError(f"no API key for {name!r}: set OPENAI_API_KEY")
            api_key = _PLACEHOLDER_KEY
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=self.base_url, max_retries=0, timeout=timeout_s
        )

    def _request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request.system, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_headers": {"Idempotency-Key": request.request_id},
        }
        if request.tools:
            kwargs["tools"] = to_openai_tools(request.tools)
        # OpenAI's newer models reject `max_tokens`; compatible servers may not know the new name.
        kwargs["max_completion_tokens" if self._official else "max_tokens"] = request.max_tokens
        return kwargs

    @asynccontextmanager
    async def request_stream(self, request: ModelRequest) -> AsyncIterator[OpenAIStreamedResponse]:
        """Open a streamed ``POST /chat/completions``; leaving the context closes the response.

        Yields:
            The :class:`OpenAIStreamedResponse` to iterate.

        Raises:
            ProviderError: on entry, for an HTTP error or an unreachable endpoint.
        """
        deadline = anyio.current_time() + self.timeout_s
        kwargs = self._request_kwargs(request)
        with _map_api_errors(self.name, self._key_env, self.base_url):
            try:
                with anyio.fail_after(min(self.idle_timeout_s, self.timeout_s)):
                    stream = await self._client.chat.completions.create(**kwargs)
            except TimeoutError as exc:
                raise ProviderConnectionError(
                    f"{self.name!r} at {self.base_url!r} did not answer within {self.idle_timeout_s:g} s"
                ) from exc
        try:
            yield OpenAIStreamedResponse(
                stream,
                provider=self.name,
                key_env=self._key_env,
                base_url=self.base_url,
                idle_timeout_s=self.idle_timeout_s,
                deadline=deadline,
            )
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0), suppress(Exception):
                await stream.close()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.close()


def create_provider(model: str, settings: Settings) -> OpenAIProvider:
    """Entry point ``openai``: the OpenAI endpoint, or any compatible one via a base URL.

    Base URL: ``settings.providers.base_url`` (``--base-url``), else ``openai_base_url``
    (``OPENAI_BASE_URL``), else api.openai.com. Key: ``openai_api_key`` (``OPENAI_API_KEY``).

    Raises:
        ConfigError: no key for the official endpoint.
    """
    p = settings.providers
    return OpenAIProvider(
        model,
        base_url=p.base_url or p.openai_base_url,
        api_key=p.openai_api_key,
        name="openai",
        timeout_s=settings.timing.llm_timeout_s,
        idle_timeout_s=settings.timing.llm_idle_timeout_s,
    )


def create_ollama_provider(model: str, settings: Settings) -> OpenAIProvider:
    """Entry point ``ollama``: Ollama's OpenAI-compatible API at ``providers.ollama_base_url``
    (``--base-url`` overrides); the key is the placeholder ``ollama``."""
    p = settings.providers
    return OpenAIProvider(
        model,
        base_url=p.base_url or p.ollama_base_url,
        api_key="ollama",
        name="ollama",
        timeout_s=settings.timing.llm_timeout_s,
        idle_timeout_s=settings.timing.llm_idle_timeout_s,
    )
