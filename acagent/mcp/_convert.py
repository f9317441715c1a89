"""Translations at the SDK boundary: a ``CallToolResult`` to a :class:`ToolResult`, and any
connection failure (httpx, the SDK's ``McpError``, exception groups of the transports' task
groups) to one line of text."""

from __future__ import annotations

import json

import mcp.types as types
from mcp.shared.exceptions import McpError

from acagent.mcp._transport import StdioProcess
from acagent.tools import ToolResult

__all__ = ["RESULT_LIMIT_CHARS", "StartError", "describe_failure", "to_result"]

RESULT_LIMIT_CHARS = 30_000
"""Most characters of one result the model gets (head and tail are kept)."""


class StartError(Exception):
    """A server that ended before it answered ``initialize``/``tools/list`` (message: how)."""


def to_result(result: types.CallToolResult) -> ToolResult:
    """The model's text for a ``tools/call`` result: text blocks joined, other blocks named,
    ``structuredContent`` when there is no block; ``isError`` → status ``error``."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mimeType}, {len(block.data) * 3 // 4} bytes]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            parts.append(res.text if isinstance(res, types.TextResourceContents) else f"[resource {res.uri}]")
        else:
            parts.append(f"[{block.type}]")
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    text = "\n".join(parts) or "(no output)"
    if len(text) > RESULT_LIMIT_CHARS:
        half = RESULT_LIMIT_CHARS // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"
    return ToolResult(text, status="error" if result.isError else "ok")


def describe_failure(exc: BaseException, url: str | None, process: StdioProcess | None) -> str:
    """One line for a connection failure (exception groups unwrapped to their first leaf).

    Args:
        exc: what was raised.
        url: the HTTP server's URL (None for stdio).
        process: the stdio server's process, if one was started.
    """
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} {exc.response.reason_phrase} from {exc.request.url}"
    if isinstance(exc, httpx.HTTPError):
        return f"cannot reach {url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, FileNotFoundError):
        return str(exc) if "command not found" in str(exc) else f"cannot start: {exc}"
    if isinstance(exc, McpError):
        return f"the server answered an error: {exc.error.message}"
    if isinstance(exc, TimeoutError | StartError) and str(exc):
        return str(exc)
    if process is not None and process.closed.is_set():
        return f"the server {process.describe_exit()}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
