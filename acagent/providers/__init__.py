"""Model providers: one adapter per wire API behind the :class:`Provider` protocol.

``create_provider("openai:gpt-4o-mini", settings)`` finds the factory through the
``acagent.providers`` entry-point group. Importing this package does not import any provider
SDK, nor anything else: each public name loads its module on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acagent._lazy import lazy_names

if TYPE_CHECKING:
    from acagent.providers._anthropic import AnthropicProvider
    from acagent.providers._base import (
        ModelRequest,
        PartsBuilder,
        Provider,
        ReasoningDelta,
        Response,
        StreamedResponse,
        StreamEvent,
        TextDelta,
        ToolCallArgsDelta,
        ToolCallStart,
        ToolDefinition,
        Usage,
        UsageUpdate,
        parse_tool_arguments,
    )
    from acagent.providers._openai import OpenAIProvider
    from acagent.providers._registry import available_providers, create_provider, resolve_model_id

__all__ = [
    "AnthropicProvider",
    "ModelRequest",
    "OpenAIProvider",
    "PartsBuilder",
    "Provider",
    "ReasoningDelta",
    "Response",
    "StreamEvent",
    "StreamedResponse",
    "TextDelta",
    "ToolCallArgsDelta",
    "ToolCallStart",
    "ToolDefinition",
    "Usage",
    "UsageUpdate",
    "available_providers",
    "create_provider",
    "parse_tool_arguments",
    "resolve_model_id",
]

_LAZY = {
    "OpenAIProvider": "acagent.providers._openai",
    "AnthropicProvider": "acagent.providers._anthropic",
    **dict.fromkeys(
        ("available_providers", "create_provider", "resolve_model_id"), "acagent.providers._registry"
    ),
}
_LAZY.update({name: "acagent.providers._base" for name in __all__ if name not in _LAZY})  # the rest
"""Every public name (``__all__``) → its module, imported on first access: the settings loader
checks a model id with ``acagent.providers._registry`` alone, without the adapters' base
(pydantic models, dataclasses) that a command like ``sessions list`` never uses."""


__getattr__ = lazy_names(__name__, _LAZY, globals())
"""Import a public name's module on first access (:data:`_LAZY`)."""
