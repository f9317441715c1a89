"""The strict mock provider: a real HTTP server that speaks OpenAI and Anthropic streams.

See ``shared/cases/README.md`` ("The strict mock provider"). The mock

1. serves OpenAI-compatible ``POST …/chat/completions`` and Anthropic ``POST …/messages``
   (any path prefix, so both ``http://127.0.0.1:PORT/v1`` for the openai SDK and
   ``http://127.0.0.1:PORT`` for the anthropic SDK work);
2. records every request (method, path, headers, JSON body, the status it answered) in order;
3. answers each request with the next *script entry*: exact chunks, each written and flushed
   separately, with optional sleeps, a pause until :meth:`MockProvider.release`, and a cut at a
   byte offset with FIN or RST;
4. rejects invalid histories with 400 and an error body shaped like the real API's, *before*
   consuming a script entry (a rejected request never reaches the "model").

It is a raw socket-level HTTP/1.1 server (``socketserver.ThreadingTCPServer``) answering with
``Connection: close`` and no ``Content-Length``, so chunk boundaries on the wire are exactly
the script's and a cut at any byte is possible.

Usage (or the :func:`mock_provider` pytest fixture)::

    with MockProvider() as mock:
        mock.script(openai_text("hello"), Script(chunks=[...], pause_after=1))
        provider = OpenAIProvider("m", base_url=mock.openai_base_url, api_key="k")
        ...
        assert mock.requests[0].json["messages"][0]["content"] == "hi"
"""

from __future__ import annotations

import json
import queue
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import pytest

__all__ = [
    "MockProvider",
    "RecordedRequest",
    "Script",
    "TextReply",
    "anthropic_text",
    "anthropic_tool_calls",
    "mock_provider",
    "openai_text",
    "openai_tool_calls",
    "split_every",
    "validate_anthropic",
    "validate_openai",
]

BAD_KEY = "bad-key"
"""A request carrying this API key is answered with 401 (invalid-key tests)."""


# --------------------------------------------------------------------------- wire helpers


def _oa_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return ("data: " + json.dumps(body) + "\n\n").encode()


def _oa_usage(input_tokens: int, output_tokens: int) -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    }
    return ("data: " + json.dumps(body) + "\n\n").encode()


def openai_text(text: str, *, usage: tuple[int, int] | None = None) -> bytes:
    """A complete OpenAI Chat Completions stream replying ``text`` (README snippet).

    Args:
        text: the reply text.
        usage: optional ``(input_tokens, output_tokens)`` sent as a usage-only chunk.
    """
    out = _oa_chunk({"role": "assistant", "content": text}) + _oa_chunk({}, "stop")
    if usage is not None:
        out += _oa_usage(*usage)
    return out + b"data: [DONE]\n\n"


def openai_tool_calls(
    calls: Iterable[tuple[str, str, dict[str, Any] | str]], *, text: str | None = None
) -> bytes:
    """A complete OpenAI stream with tool calls, one chunk per call.

    Args:
        calls: ``(id, name, arguments)``; a dict is JSON-encoded, a str is sent as is.
        text: optional assistant text before the calls.
    """
    out = b""
    if text:
        out += _oa_chunk({"role": "assistant", "content": text})
    for i, (call_id, name, args) in enumerate(calls):
        arguments = args if isinstance(args, str) else json.dumps(args)
        out += _oa_chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            }
        )
    return out + _oa_chunk({}, "tool_calls") + b"data: [DONE]\n\n"


def _an_event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _an_message_start(input_tokens: int = 1) -> bytes:
    return _an_event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "mock",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": 1},
            },
        },
    )


def _an_text_block(index: int, text: str) -> bytes:
    return (
        _an_event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        )
        + _an_event(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
        )
        + _an_event("content_block_stop", {"type": "content_block_stop", "index": index})
    )


def _an_end(stop_reason: str, output_tokens: int = 1) -> bytes:
    return _an_event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    ) + _an_event("message_stop", {"type": "message_stop"})


def anthropic_text(text: str) -> bytes:
    """A complete Anthropic Messages stream replying ``text`` (README snippet)."""
    return _an_message_start() + _an_text_block(0, text) + _an_end("end_turn")


def anthropic_tool_calls(text: str | None, calls: Iterable[tuple[str, str, dict[str, Any] | str]]) -> bytes:
    """A complete Anthropic stream: an optional text block, then one ``tool_use`` block per call.

    Args:
        text: text block before the calls (omitted when empty/None).
        calls: ``(id, name, input)``; a dict is JSON-encoded into one ``input_json_delta``,
            a str is sent as the ``partial_json`` verbatim.
    """
    out = _an_message_start()
    index = 0
    if text:
        out += _an_text_block(0, text)
        index = 1
    for call_id, name, args in calls:
        partial = args if isinstance(args, str) else json.dumps(args)
        out += _an_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
        )
        out += _an_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": partial},
            },
        )
        out += _an_event("content_block_stop", {"type": "content_block_stop", "index": index})
        index += 1
    return out + _an_end("tool_use")


def split_every(data: bytes, n: int = 1) -> list[bytes]:
    """``data`` as chunks of ``n`` bytes (the last may be shorter)."""
    return [data[i : i + n] for i in range(0, len(data), n)]


# --------------------------------------------------------------------------- scripts


@dataclass
class Script:
    """How the mock answers one request.

    Attributes:
        chunks: body chunks; each is written and flushed separately (``TCP_NODELAY``).
        sleeps: seconds to sleep before each chunk after the first: one float for all, or a
            list indexed by chunk number (``sleeps[i]`` before chunk ``i``).
        pause_after: after writing this many chunks, wait until :meth:`MockProvider.release`.
        cut_after_bytes: close the connection once this many body bytes were written.
        cut_mode: ``"fin"`` (clean close) or ``"rst"`` (reset, ``SO_LINGER`` 0).
        status: HTTP status; non-200 answers send ``body`` as JSON.
        body: for non-200 answers: a dict (JSON-encoded) or raw bytes.
        headers: extra response headers.
    """

    chunks: list[bytes] = field(default_factory=list)
    sleeps: float | list[float] | None = None
    pause_after: int | None = None
    cut_after_bytes: int | None = None
    cut_mode: Literal["fin", "rst"] = "fin"
    status: int = 200
    body: dict[str, Any] | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TextReply:
    """A plain text reply, rendered in the wire format of the request it answers."""

    text: str


Entry: TypeAlias = "bytes | str | list[bytes] | Script | TextReply | Callable[[Any], Entry]"
"""One script entry: bytes, a list of chunks, a :class:`Script`, a :class:`TextReply`, or a
callable ``(request_json) -> entry`` evaluated when the request arrives."""


@dataclass
class RecordedRequest:
    """One request the mock received."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    body: bytes
    json: Any
    """Parsed JSON body, or None when the body is not JSON."""
    status: int | None = None
    """The HTTP status the mock answered (set once the status line is sent)."""
    api: Literal["openai", "anthropic", "unknown"] = "unknown"
    error: str | None = None
    """Validation message when the mock rejected the request."""


def _resolve(entry: Entry, request: RecordedRequest) -> Script:
    while callable(entry) and not isinstance(entry, (Script, TextReply)):
        entry = entry(request.json)
    if isinstance(entry, TextReply):
        return Script(
            chunks=[anthropic_text(entry.text) if request.api == "anthropic" else openai_text(entry.text)]
        )
    if isinstance(entry, Script):
        return entry
    if isinstance(entry, str):
        return Script(chunks=[entry.encode()])
    if isinstance(entry, bytes):
        return Script(chunks=[entry])
    return Script(chunks=list(entry))


# --------------------------------------------------------------------------- validation


class _Invalid(Exception):
    pass


def _check(cond: object, message: str) -> None:
    if not cond:
        raise _Invalid(message)


def _valid_json_object(text: object) -> bool:
    if not isinstance(text, str):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _check_openai_content(content: object, where: str, *, allow_none: bool) -> bool:
    """Check a content field; returns True when it carries non-empty content."""
    if content is None:
        _check(allow_none, f"{where}.content: null is not allowed here")
        return False
    if isinstance(content, str):
        _check(content != "", f"{where}.content: empty string is not allowed")
        return True
    _check(isinstance(content, list) and content, f"{where}.content: expected a string or a non-empty list")
    parts: list[Any] = content  # type: ignore[assignment]
    for j, part in enumerate(parts):
        _check(isinstance(part, dict), f"{where}.content[{j}]: expected an object")
        if part.get("type") == "text":
            _check(
                isinstance(part.get("text"), str) and part["text"] != "",
                f"{where}.content[{j}].text: empty text block",
            )
    return True


def validate_openai(body: Any) -> None:
    """Validate a Chat Completions request like the real API (stricter where noted).

    Raises:
        _Invalid: with a message like the real API's ``error.message``.
    """
    _check(isinstance(body, dict), "request body must be a JSON object")
    _check(isinstance(body.get("model"), str) and body["model"], "you must provide a model parameter")
    messages = body.get("messages")
    _check(isinstance(messages, list) and messages, "messages: expected a non-empty array")
    for t, tool in enumerate(body.get("tools") or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        _check(
            isinstance(fn, dict) and tool.get("type") == "function" and isinstance(fn.get("name"), str),
            f"tools[{t}]: expected {{'type': 'function', 'function': {{'name': ...}}}}",
        )
    if "tools" in body:
        _check(body["tools"], "tools: [] is too short - 'tools'")
    pending: list[str] = []  # tool_call ids still owed a tool message, in order
    pending_from = -1
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        _check(isinstance(msg, dict), f"{where}: expected an object")
        role = msg.get("role")
        if role == "tool":
            call_id = msg.get("tool_call_id")
            _check(
                pending and call_id in pending,
                f"Invalid parameter: {where}: messages with role 'tool' must be a response to a preceding "
                f"message with 'tool_calls' (tool_call_id {call_id!r} matches no open call).",
            )
            # Stricter than the real API: the results come in tool-call order.
            _check(
                call_id == pending[0],
                f"{where}: tool message for {call_id!r} out of order; expected {pending[0]!r} next",
            )
            pending.pop(0)
            _check(isinstance(msg.get("content"), (str, list)), f"{where}.content: expected a string")
            continue
        _check(
            not pending,
            f"An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id'. The following tool_call_ids did not have response messages: "
            f"{', '.join(pending)} (messages[{pending_from}])",
        )
        if role in ("system", "developer"):
            _check_openai_content(msg.get("content"), where, allow_none=False)
        elif role == "user":
            # Stricter than the real API: empty user text is always a bug in acagent.
            _check_openai_content(msg.get("content"), where, allow_none=False)
        elif role == "assistant":
            _check(
                "content" in msg or "tool_calls" in msg,
                f"{where}: assistant message needs content or tool_calls",
            )
            tool_calls = msg.get("tool_calls")
            if tool_calls is not None:
                _check(
                    isinstance(tool_calls, list) and tool_calls,
                    f"Invalid '{where}.tool_calls': empty array. Expected an array with minimum length 1.",
                )
            content = msg.get("content")
            # Stricter: content "" never appears, with or without tool calls.
            has_content = _check_openai_content(content, where, allow_none=bool(tool_calls))
            _check(has_content or tool_calls, f"{where}: assistant message must have content or tool_calls")
            seen: set[str] = set()
            for k, call in enumerate(tool_calls or []):
                cw = f"{where}.tool_calls[{k}]"
                _check(isinstance(call, dict), f"{cw}: expected an object")
                _check(isinstance(call.get("id"), str) and call["id"], f"{cw}.id: missing")
                _check(call["id"] not in seen, f"{cw}.id: duplicate id {call['id']!r}")
                seen.add(call["id"])
                _check(call.get("type") == "function", f"{cw}.type: expected 'function'")
                fn = call.get("function")
                _check(
                    isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"],
                    f"{cw}: name missing",
                )
                _check(
                    _valid_json_object(fn.get("arguments")),
                    f"{cw}.function.arguments: not valid JSON: {fn.get('arguments')!r}",
                )
            pending, pending_from = [c["id"] for c in tool_calls or []], i
        else:
            raise _Invalid(f"{where}.role: invalid value {role!r}")
    _check(
        not pending,
        f"An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(pending)}",
    )


def _check_anthropic_text(block: dict[str, Any], where: str) -> None:
    text = block.get("text")
    _check(isinstance(text, str), f"{where}.text: Field required")
    _check(str(text).strip() != "", f"{where}: text content blocks must contain non-whitespace text")


def _anthropic_blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        _check(content.strip() != "", f"{where}.content: text content blocks must be non-empty")
        return [{"type": "text", "text": content}]
    _check(isinstance(content, list) and content, f"{where}.content: expected a string or a non-empty list")
    for j, block in enumerate(content):
        _check(
            isinstance(block, dict) and isinstance(block.get("type"), str), f"{where}.content.{j}: bad block"
        )
    return content


def validate_anthropic(body: Any) -> None:
    """Validate a Messages request like the real API (stricter where noted).

    Raises:
        _Invalid: with a message like the real API's ``error.message``.
    """
    _check(isinstance(body, dict), "request body must be a JSON object")
    _check(isinstance(body.get("model"), str) and body["model"], "model: Field required")
    _check(isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0, "max_tokens: Field required")
    system = body.get("system")
    if system is not None:
        if isinstance(system, str):
            _check(system.strip() != "", "system: text content blocks must be non-empty")
        else:
            for j, block in enumerate(_anthropic_blocks(system, "system")):
                _check_anthropic_text(block, f"system.{j}")
    messages = body.get("messages")
    _check(isinstance(messages, list) and messages, "messages: Field required (non-empty list)")
    open_ids: list[str] = []
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        _check(isinstance(msg, dict), f"{where}: expected an object")
        role = msg.get("role")
        _check(role in ("user", "assistant"), f"{where}.role: Input should be 'user' or 'assistant'")
        if i == 0:
            _check(role == "user", 'messages: first message must use the "user" role')
        else:
            # Stricter than today's API (which merges): roles must alternate.
            _check(
                role != messages[i - 1].get("role"),
                'messages: roles must alternate between "user" and "assistant"',
            )
        blocks = _anthropic_blocks(msg.get("content"), where)
        if role == "user":
            results: list[Any] = []
            for j, block in enumerate(blocks):
                if block["type"] == "tool_result":
                    _check(
                        j == len(results),
                        f"{where}.content.{j}: tool_result blocks must come first in the user message",
                    )
                    results.append(block.get("tool_use_id"))
                    content = block.get("content")
                    if isinstance(content, list):
                        for k, sub in enumerate(content):
                            if sub.get("type") == "text":
                                _check_anthropic_text(sub, f"{where}.content.{j}.content.{k}")
                    else:
                        _check(
                            content is None or isinstance(content, str),
                            f"{where}.content.{j}.content: bad type",
                        )
                    _check(
                        isinstance(block.get("is_error", False), bool), f"{where}.content.{j}.is_error: bool"
                    )
                elif block["type"] == "text":
                    _check_anthropic_text(block, f"{where}.content.{j}")
                else:
                    _check(
                        block["type"] in ("image", "document"),
                        f"{where}.content.{j}: unexpected {block['type']!r}",
                    )
            for rid in results:
                _check(
                    rid in open_ids,
                    f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {rid}. Each `tool_result` "
                    f"block must have a corresponding `tool_use` block in the previous message.",
                )
            _check(
                results == open_ids,
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(x for x in open_ids if x not in results) or '(order)'}. Each `tool_use` block must "
                f"have a corresponding `tool_result` block in the next message, in the same order.",
            )
            open_ids = []
        else:
            _check(
                not open_ids,
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(open_ids)}",
            )
            for j, block in enumerate(blocks):
                bw = f"{where}.content.{j}"
                if block["type"] == "text":
                    _check_anthropic_text(block, bw)
                elif block["type"] == "tool_use":
                    _check(isinstance(block.get("id"), str) and block["id"], f"{bw}.id: Field required")
                    _check(block["id"] not in open_ids, f"{bw}.id: duplicate tool_use id {block['id']!r}")
                    _check(isinstance(block.get("name"), str) and block["name"], f"{bw}.name: Field required")
                    _check(
                        isinstance(block.get("input"), dict),
                        f"{bw}.input: Input should be a valid dictionary",
                    )
                    open_ids.append(block["id"])
                elif block["type"] == "thinking":
                    _check(isinstance(block.get("signature"), str), f"{bw}.signature: Field required")
                elif block["type"] == "redacted_thinking":
                    _check(isinstance(block.get("data"), str), f"{bw}.data: Field required")
                else:
                    raise _Invalid(f"{bw}: unexpected block type {block['type']!r} in an assistant message")
    _check(
        not open_ids,
        f"messages: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(open_ids)}",
    )


def _openai_error(
    message: str, *, type_: str = "invalid_request_error", code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def _anthropic_error(message: str, *, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}, "request_id": "req_mock"}


# --------------------------------------------------------------------------- server

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 429: "Too Many Requests"}


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    mock: MockProvider


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = sock.makefile("rb")
        try:
            parsed = _read_request(rfile)
        except (OSError, ValueError):
            return
        if parsed is None:
            return
        mock = self.server.mock
        request = mock._record(*parsed)
        status, script = mock._answer(request)
        _write_response(sock, request, status, script, mock)


def _read_request(rfile: Any) -> tuple[str, str, dict[str, str], bytes] | None:
    line = rfile.readline(65537)
    if not line:
        return None
    method, path, _version = line.decode("latin-1").split()
    headers: dict[str, str] = {}
    while True:
        line = rfile.readline(65537)
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int(rfile.readline().split(b";")[0], 16)
            if size == 0:
                rfile.readline()
                break
            body += rfile.read(size)
            rfile.readline()
    else:
        length = int(headers.get("content-length") or 0)
        body = rfile.read(length) if length else b""
    return method, path, headers, body


def _write_response(
    sock: socket.socket, request: RecordedRequest, status: int, script: Script, mock: MockProvider
) -> None:
    try:
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        if status == 200 and script.body is None:
            head += ["Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache"]
            chunks = script.chunks
        else:
            body = script.body if isinstance(script.body, bytes) else json.dumps(script.body).encode()
            scripted_type = any(k.lower() == "content-type" for k in script.headers)
            head += [] if scripted_type else ["Content-Type: application/json"]  # an HTML page's own
            head += [f"Content-Length: {len(body)}"]
            chunks = [body]
        head += [f"{k}: {v}" for k, v in script.headers.items()]
        head += ["request-id: req_mock", "Connection: close", "", ""]
        sock.sendall("\r\n".join(head).encode("latin-1"))
        sent = 0
        for i, chunk in enumerate(chunks):
            if i > 0 and script.sleeps is not None:
                delay = script.sleeps if isinstance(script.sleeps, (int, float)) else script.sleeps[i]
                if delay:
                    time.sleep(delay)
            if script.cut_after_bytes is not None and sent + len(chunk) >= script.cut_after_bytes:
                sock.sendall(chunk[: script.cut_after_bytes - sent])
                _cut(sock, script.cut_mode)
                return
            sock.sendall(chunk)
            sent += len(chunk)
            if script.pause_after is not None and i + 1 == script.pause_after:
                mock._pause()
        if script.cut_after_bytes is not None:
            _cut(sock, script.cut_mode)
    except OSError:  # the client went away (cancel): nothing left to do
        return


def _cut(sock: socket.socket, mode: str) -> None:
    if mode == "rst":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    else:
        sock.shutdown(socket.SHUT_WR)
        sock.close()


class MockProvider:
    """The strict mock provider (see the module docstring); a context manager.

    Attributes:
        url: ``http://127.0.0.1:PORT`` (the Anthropic base URL).
        openai_base_url: ``url + "/v1"``.
        default: entry used when the script queue is empty; None answers 500.
    """

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self._server.mock = self
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.openai_base_url = self.url + "/v1"
        self.anthropic_base_url = self.url
        self.default: Entry | None = None
        self._queue: queue.SimpleQueue[Entry] = queue.SimpleQueue()
        self._requests: list[RecordedRequest] = []
        self._cond = threading.Condition()
        self._release = threading.Semaphore(0)
        self._paused = 0
        self._closing = False
        self._thread: threading.Thread | None = None

    # lifecycle -----------------------------------------------------------------
    def start(self) -> MockProvider:
        """Start serving in a background thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name="mock-provider",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; paused streams are released."""
        self._closing = True
        for _ in range(64):
            self._release.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> MockProvider:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # scripting -----------------------------------------------------------------
    def script(self, *entries: Entry) -> MockProvider:
        """Queue one entry per expected request, in order."""
        for entry in entries:
            self._queue.put(entry)
        return self

    @property
    def pending(self) -> int:
        """Script entries not yet consumed."""
        return self._queue.qsize()

    def release(self, n: int = 1) -> None:
        """Let ``n`` paused streams continue (a release before the pause is remembered)."""
        for _ in range(n):
            self._release.release()

    def wait_paused(self, count: int = 1, timeout: float = 5.0) -> None:
        """Block until ``count`` streams in total have reached their pause point.

        Raises:
            TimeoutError: not reached within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._paused >= count, timeout):
                raise TimeoutError(f"mock: {self._paused} paused streams after {timeout}s, wanted {count}")

    # requests ------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least ``n`` requests arrived and were answered; return them all.

        Raises:
            TimeoutError: fewer than ``n`` requests within ``timeout`` seconds.
        """

        def done() -> bool:
            return len(self._requests) >= n and all(r.status is not None for r in self._requests[:n])

        with self._cond:
            if not self._cond.wait_for(done, timeout):
                raise TimeoutError(f"mock: {len(self._requests)} requests after {timeout}s, wanted {n}")
            return list(self._requests)

    # internals (handler thread) ------------------------------------------------
    def _record(self, method: str, path: str, headers: dict[str, str], body: bytes) -> RecordedRequest:
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        api: Literal["openai", "anthropic", "unknown"] = "unknown"
        route = path.split("?", 1)[0].rstrip("/")
        if route.endswith("/chat/completions"):
            api = "openai"
        elif route.endswith("/messages"):
            api = "anthropic"
        request = RecordedRequest(method=method, path=path, headers=headers, body=body, json=parsed, api=api)
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()
        return request

    def _set_status(self, request: RecordedRequest, status: int, error: str | None = None) -> None:
        with self._cond:
            request.status, request.error = status, error
            self._cond.notify_all()

    def _answer(self, request: RecordedRequest) -> tuple[int, Script]:
        api = request.api
        err = _anthropic_error if api == "anthropic" else _openai_error
        if api == "unknown" or request.method != "POST":
            msg = f"mock: no route for {request.method} {request.path}"
            self._set_status(request, 404, msg)
            return 404, Script(status=404, body=_openai_error(msg, type_="not_found"))
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix(
            "Bearer "
        )
        if key == BAD_KEY:
            if api == "anthropic":
                body = _anthropic_error("invalid x-api-key", type_="authentication_error")
            else:
                body = _openai_error(
                    "Incorrect API key provided: bad-key. You can find your API key at "
                    "https://platform.openai.com/account/api-keys.",
                    code="invalid_api_key",
                )
            self._set_status(request, 401, "bad key")
            return 401, Script(status=401, body=body)
        try:
            if request.json is None:
                raise _Invalid("the request body is not valid JSON")
            (validate_anthropic if api == "anthropic" else validate_openai)(request.json)
        except _Invalid as exc:
            self._set_status(request, 400, str(exc))
            return 400, Script(status=400, body=err(str(exc)))
        try:
            entry: Entry = self._queue.get_nowait()
        except queue.Empty:
            if self.default is None:
                n = len(self._requests)
                msg = f"mock: script queue is empty (request #{n} {request.method} {request.path})"
                self._set_status(request, 500, msg)
                return 500, Script(status=500, body=err(msg, type_="mock_script_exhausted"))
            entry = self.default
        script = _resolve(entry, request)
        self._set_status(request, script.status)
        if script.status != 200 and script.body is None:
            script.body = err(f"mock: scripted status {script.status}", type_="api_error")
        return script.status, script

    def _pause(self) -> None:
        with self._cond:
            self._paused += 1
            self._cond.notify_all()
        while not self._closing and not self._release.acquire(timeout=0.1):
            pass


@pytest.fixture
def mock_provider() -> Iterator[MockProvider]:
    """A started :class:`MockProvider`, closed after the test.

    Import it into a ``conftest.py`` to use it: ``from tests.mockprovider import mock_provider``.
    """
    with MockProvider() as server:
        yield server
