"""OpenAI-compatible Chat Completions provider (OpenAI, Ollama, llama.cpp, vLLM, ...).

Connection and mapping stay apart: :class:`OpenAIProvider` owns the connection (base URL,
key, timeouts; :class:`~acagent.providers._http.HTTPProvider`), while :func:`to_openai_messages` /
:func:`to_openai_tools` map the provider-neutral context to the wire and
:class:`OpenAIStreamedResponse` maps ``chat.completion.chunk`` events back to
:data:`~acagent.providers.StreamEvent` items through the shared :class:`PartsBuilder`.

Tool-call assembly from the stream is in :mod:`acagent.providers._openai_stream`. Argument text is assembled in linear time (:class:`~acagent.providers._parts.ArgsBuffer`: whether
an object is complete is known without re-parsing the text so far) and parsed once, after
``finish_reason``. Completion and truncation follow :mod:`acagent.providers._stream`; the event
stream is parsed by :mod:`acagent.providers._sse`; the request body is encoded incrementally by
:mod:`acagent.providers._body` and posted with httpx (why not the ``openai`` SDK:
:mod:`acagent.providers._http`).

httpx is imported lazily, in a worker thread, on the first request: building a provider (and
so checking a model id) never imports it.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from acagent.errors import ProviderError
from acagent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from acagent.providers._base import ModelRequest, ToolDefinition
from acagent.providers._body import BodyEncoder, EncodedArray, wire_messages
from acagent.providers._http import HTTPProvider, api_key_or_placeholder
from acagent.providers._openai_stream import OpenAIStreamedResponse, openai_status_error

if TYPE_CHECKING:
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
"""Sent to local OpenAI-compatible servers, which ignore the key (some require the header)."""


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


def openai_wire_messages(message: Message) -> list[dict[str, Any]]:
    """One context message as Chat Completions wire messages (see :func:`to_openai_messages`)."""
    if message.role == "assistant":
        text = "".join(p.text for p in message.parts if isinstance(p, TextPart))
        calls = [_wire_call(p) for p in message.parts if isinstance(p, ToolCallPart)]
        if not text and not calls:
            return []
        wire: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            wire["tool_calls"] = calls
        return [wire]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": p.tool_call_id, "content": p.content}
        for p in message.parts
        if isinstance(p, ToolResultPart)
    ]
    text = "\n\n".join(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
    if text:
        out.append({"role": "user", "content": text})
    return out


def openai_merge(prev: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """Consecutive user texts become one user message (joined by a blank line); else None."""
    if prev["role"] == new["role"] == "user" and isinstance(prev["content"], str):
        return {"role": "user", "content": prev["content"] + "\n\n" + new["content"]}
    return None


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
        list of wire message dicts, in order (the request body holds the same, encoded by
        :class:`~acagent.providers._body.BodyEncoder`).
    """
    prefix = [{"role": "system", "content": system}] if system else []
    return wire_messages(messages, openai_wire_messages, openai_merge, prefix)


# --------------------------------------------------------------------------- provider


def _is_official(base_url: str) -> bool:
    return (urlsplit(base_url).hostname or "") == "api.openai.com"


class OpenAIProvider(HTTPProvider):
    """A Chat Completions endpoint bound to one model (implements ``Provider``).

    Args:
        model: model name sent as ``model``.
        base_url: endpoint root including ``/v1`` (None: ``https://api.openai.com/v1``).
        api_key: bearer key; None is allowed only for a non-OpenAI ``base_url`` (a placeholder
            is sent).
        name: provider id used in messages and model ids (``openai``, ``ollama``).
        timeout_s: maximum duration of one call, connect to last byte, in seconds.
        idle_timeout_s: maximum silence on the wire, in seconds.

    Raises:
        ConfigError: no key for the official endpoint.
    """

    path = "/chat/completions"
    response_class = OpenAIStreamedResponse

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
        base = (base_url or OPENAI_BASE_URL).rstrip("/")
        self._official = _is_official(base)
        self._key_env: str | None = "OPENAI_API_KEY" if name == "openai" else None
        key = api_key_or_placeholder(
            api_key,
            official=self._official,
            placeholder=_PLACEHOLDER_KEY,
            missing=f"no API key for {name!r}: set OPENAI_API_KEY",
        )
        super().__init__(
            model,
            name=name,
            base_url=base,
            api_key=key,
            timeout_s=timeout_s,
            idle_timeout_s=idle_timeout_s,
        )
        self._encoder = BodyEncoder(openai_wire_messages, openai_merge)

    def _headers(self) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self._api_key}"}
        # What the openai SDK sent from the environment, kept for accounts that rely on it.
        for env, header in (
            ("OPENAI_ORG_ID", "openai-organization"),
            ("OPENAI_PROJECT_ID", "openai-project"),
        ):
            if os.environ.get(env):
                headers[header] = os.environ[env]
        return headers

    def _status_error(self, status: int, body: Any, headers: dict[str, str]) -> ProviderError:
        return openai_status_error(self.name, self._key_env, status, body, headers)

    def _request_head(self, request: ModelRequest) -> dict[str, Any]:
        """The body's small members, in wire order (``messages``/``tools`` are spliced in)."""
        head: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # OpenAI's newer models reject `max_tokens`; compatible servers may not know the new name.
        head["max_completion_tokens" if self._official else "max_tokens"] = request.max_tokens
        return head

    def encode_parts(self, request: ModelRequest) -> list[bytes]:
        """The JSON request body, in parts (deterministic; each message encoded once, see ``_body``)."""
        system = [{"role": "system", "content": request.system}] if request.system else []
        raw: dict[str, bytes | EncodedArray] = {
            "messages": self._encoder.messages(request.messages, prefix=system)
        }
        if request.tools:
            raw["tools"] = self._encoder.tools(request.tools, lambda: to_openai_tools(request.tools))
        return BodyEncoder.parts(self._request_head(request), raw)


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
