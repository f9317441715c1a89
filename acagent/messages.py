"""Provider-neutral model context: messages made of parts.

The loop, the journal and the transcript only ever see these types; each provider adapter maps
them to and from its wire format (OpenAI Chat Completions `messages`, Anthropic Messages
`messages`). One word per idea: Anthropic's "thinking" becomes :class:`ReasoningPart`.

A *message* is a role plus an ordered list of *parts*:

- ``user``: :class:`TextPart` items, and :class:`ToolResultPart` items answering the previous
  assistant message's tool calls (results always come first, in tool-call order);
- ``assistant``: :class:`TextPart`, :class:`ReasoningPart` and :class:`ToolCallPart` items.

The system prompt is not a message; it is passed separately to the provider.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "Message",
    "Part",
    "ReasoningPart",
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "context_digest",
]


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextPart(_Base):
    """Plain text; never empty when sent to a provider."""

    part_kind: Literal["text"] = "text"
    text: str
    """The text, UTF-8."""


class ReasoningPart(_Base):
    """Model reasoning ("thinking" in Anthropic's API)."""

    part_kind: Literal["reasoning"] = "reasoning"
    text: str
    provider_metadata: dict[str, Any] | None = None
    """Data the API needs echoed back (Anthropic: the thinking `signature`)."""


class ToolCallPart(_Base):
    """One tool call the model asked for."""

    part_kind: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    """Provider id (OpenAI `tool_calls[].id`, Anthropic `tool_use.id`), or a generated one."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Parsed JSON arguments; ``{}`` when the model sent empty/null or invalid arguments."""
    arguments_error: str | None = None
    """Set when the streamed argument text was not a JSON object; the call is then not run."""


class ToolResultPart(_Base):
    """The result of one tool call, sent back to the model."""

    part_kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


Part = Annotated[TextPart | ReasoningPart | ToolCallPart | ToolResultPart, Field(discriminator="part_kind")]


class Message(_Base):
    """One message of the model context."""

    role: Literal["user", "assistant"]
    parts: list[Part]

    @property
    def text(self) -> str:
        """Concatenated text of the message's :class:`TextPart` items."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The message's tool calls, in the order the model emitted them."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]


MESSAGES_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def context_digest(system: str, messages: list[Message]) -> str:
    """Stable sha256 hex digest of a model context (system prompt + messages).

    Used in the step ``request_id`` so a recovered step with an unchanged context is recognised.
    """
    h = hashlib.sha256()
    h.update(system.encode())
    h.update(b"\x00")
    h.update(
        json.dumps(
            [m.model_dump(mode="json") for m in messages], sort_keys=True, separators=(",", ":")
        ).encode()
    )
    return h.hexdigest()
