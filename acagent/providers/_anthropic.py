"""Anthropic Messages provider.

Connection and mapping stay apart: :class:`AnthropicProvider` owns the connection (base URL,
key, timeouts; :class:`~acagent.providers._http.HTTPProvider`); :func:`to_anthropic_messages` /
:func:`to_anthropic_tools` map the provider-neutral context to the wire, and
:class:`AnthropicStreamedResponse` maps the raw stream events (``messages.create(stream=True)``)
back to :data:`~acagent.providers.StreamEvent` items through the shared :class:`PartsBuilder`.

Stream events are read in :mod:`acagent.providers._anthropic_stream`. ``input_json_delta`` fragments are joined (linear, :class:`~acagent.providers._parts.ArgsBuffer`)
and parsed once; an empty or absent input is ``{}`` (F11 E1/E2). Terminal information is
``message_delta`` with ``stop_reason`` and usage (or ``message_stop``); a stream that ends or
breaks before it raises :class:`~acagent.errors.StreamTruncated` (retryable), so a partial
``tool_use`` is never returned, so never run (:mod:`acagent.providers._stream`). The event
stream is parsed by :mod:`acagent.providers._sse` and the body is encoded incrementally
(:mod:`acagent.providers._body`) and posted with httpx (why not the ``anthropic`` SDK:
:mod:`acagent.providers._http`); httpx is imported in a worker thread on the first request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from acagent.errors import ProviderError
from acagent.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from acagent.providers._anthropic_stream import AnthropicStreamedResponse, anthropic_status_error
from acagent.providers._base import ModelRequest, ToolDefinition
from acagent.providers._body import BodyEncoder, EncodedArray, wire_messages
from acagent.providers._http import HTTPProvider, api_key_or_placeholder

if TYPE_CHECKING:
    from acagent.settings import Settings

__all__ = [
    "AnthropicProvider",
    "AnthropicStreamedResponse",
    "create_provider",
    "to_anthropic_messages",
    "to_anthropic_tools",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_PLACEHOLDER_KEY = "sk-ant-no-key-needed"
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header (the Messages API version the mapping follows)."""


# --------------------------------------------------------------------------- wire mapping


def to_anthropic_tools(tools: list[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as Messages ``tools`` entries (``name``, ``description``, ``input_schema``)."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            meta = part.provider_metadata or {}
            if meta.get("redacted_data"):
                blocks.append({"type": "redacted_thinking", "data": meta["redacted_data"]})
            elif meta.get("signature"):
                blocks.append({"type": "thinking", "thinking": part.text, "signature": meta["signature"]})
            # reasoning without a signature (another provider's) cannot be replayed: dropped
        elif isinstance(part, TextPart):
            if part.text.strip():
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCallPart):
            arguments = {} if part.arguments_error else part.arguments
            blocks.append(
                {"type": "tool_use", "id": part.tool_call_id, "name": part.name, "input": arguments}
            )
    return blocks


def _user_blocks(message: Message) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    texts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.tool_call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            results.append(block)
        elif isinstance(part, TextPart) and part.text.strip():
            texts.append({"type": "text", "text": part.text})
    return results + texts


def _collapse(wire: dict[str, Any]) -> dict[str, Any]:
    content = wire["content"]
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": wire["role"], "content": content[0]["text"]}
    return wire


def anthropic_wire_messages(message: Message) -> list[dict[str, Any]]:
    """One context message as Messages wire messages (see :func:`to_anthropic_messages`)."""
    blocks = _assistant_blocks(message) if message.role == "assistant" else _user_blocks(message)
    return [_collapse({"role": message.role, "content": blocks})] if blocks else []


def anthropic_merge(prev: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """Adjacent same-role messages become one (roles must alternate); else None."""
    if prev["role"] != new["role"]:
        return None

    def blocks(wire: dict[str, Any]) -> list[dict[str, Any]]:
        content = wire["content"]
        return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)

    return _collapse({"role": prev["role"], "content": blocks(prev) + blocks(new)})


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Map the context to Messages ``messages``.

    * User messages: ``tool_result`` blocks first (one per result, in order; ``is_error`` only
      when set), then text blocks.
    * Assistant messages: blocks in part order; ``thinking`` only with its signature,
      ``tool_use`` with parsed ``input`` (``{}`` for a call whose arguments were invalid).
    * Empty or whitespace-only text is never sent; a message left without blocks is dropped;
      consecutive same-role messages are merged so roles alternate.
    * A message holding a single text block is sent with string ``content``.

    Returns:
        list of wire message dicts, in order (the request body holds the same, encoded by
        :class:`~acagent.providers._body.BodyEncoder`).
    """
    return wire_messages(messages, anthropic_wire_messages, anthropic_merge)


# --------------------------------------------------------------------------- provider


class AnthropicProvider(HTTPProvider):
    """The Anthropic Messages API bound to one model (implements ``Provider``).

    Args:
        model: model name sent as ``model``.
        base_url: endpoint root without ``/v1`` (None: ``https://api.anthropic.com``).
        api_key: the key; None is allowed only with a custom ``base_url`` (a placeholder is sent).
        timeout_s: maximum duration of one call, connect to last byte, in seconds.
        idle_timeout_s: maximum silence on the wire, in seconds.
        name: provider id used in messages.

    Raises:
        ConfigError: no key for the official endpoint.
    """

    path = "/v1/messages"
    response_class = AnthropicStreamedResponse

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float = 300.0,
        idle_timeout_s: float = 120.0,
        name: str = "anthropic",
    ) -> None:
        base = (base_url or ANTHROPIC_BASE_URL).rstrip("/")
        key = api_key_or_placeholder(
            api_key,
            official=(urlsplit(base).hostname or "") == "api.anthropic.com",
            placeholder=_PLACEHOLDER_KEY,
            missing=f"no API key for {name!r}: set ANTHROPIC_API_KEY",
        )
        super().__init__(
            model,
            name=name,
            base_url=base,
            api_key=key,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
        )
        self._encoder = BodyEncoder(anthropic_wire_messages, anthropic_merge)

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._api_key, "anthropic-version": ANTHROPIC_VERSION}

    def _status_error(self, status: int, body: Any, headers: dict[str, str]) -> ProviderError:
        return anthropic_status_error(self.name, status, body, headers)

    def encode_parts(self, request: ModelRequest) -> list[bytes]:
        """The JSON request body, in parts (deterministic; each message encoded once, see ``_body``)."""
        head: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "stream": True}
        if request.system.strip():
            head["system"] = request.system
        raw: dict[str, bytes | EncodedArray] = {"messages": self._encoder.messages(request.messages)}
        if request.tools:
            raw["tools"] = self._encoder.tools(request.tools, lambda: to_anthropic_tools(request.tools))
        return BodyEncoder.parts(head, raw)


def create_provider(model: str, settings: Settings) -> AnthropicProvider:
    """Entry point ``anthropic``.

    Base URL: ``settings.providers.base_url`` (``--base-url``), else ``anthropic_base_url``
    (``ANTHROPIC_BASE_URL``), else api.anthropic.com. Key: ``anthropic_api_key``
    (``ANTHROPIC_API_KEY``).

    Raises:
        ConfigError: no key for the official endpoint.
    """
    p = settings.providers
    return AnthropicProvider(
        model,
        base_url=p.base_url or p.anthropic_base_url,
        api_key=p.anthropic_api_key,
        timeout_s=settings.timing.llm_timeout_s,
        idle_timeout_s=settings.timing.llm_idle_timeout_s,
    )
