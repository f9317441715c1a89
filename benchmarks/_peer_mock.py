"""The mock model of the peers benchmark: the strict mock plus an OpenAI Responses endpoint.

``tests/mockprovider.py`` serves Chat Completions (acagent, opencode) and Anthropic Messages
(acagent, Claude Code) and rejects invalid histories with the real APIs' 400s. Codex speaks only
the Responses API (``wire_api = "responses"``; its ``"chat"`` is refused since 0.5x), so
:class:`PeerMock` adds ``POST …/responses``: a request is validated strictly enough that a
malformed history fails the run (model, ``input`` items and their types, every
``function_call_output`` answering an earlier ``function_call`` and every call answered before
the next request), then answered with a Responses event stream (``response.created``,
``response.output_item.added/done``, ``response.output_text.delta``, ``response.completed`` with
usage). ``GET …/models`` answers a one-model list (some CLIs list models at start).

The scripted task is the same for every agent (:func:`task_reply`): the first request that
offers a shell tool gets one call running ``cat marker.txt``; the request that carries its
result gets the final text. The tool is found by name among the request's tools (``shell``,
``Bash``, ``bash``, ``exec_command``, ``shell_command``) and its arguments are shaped by the
tool's own JSON schema (``command`` as a string or an argv array, or ``cmd``), so no agent is
special-cased. A request without a shell tool (a title or summary call) gets a short text.
Requests are recorded with the tool result text, so the benchmark can check that each agent
really ran the command.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.mockprovider import (
    MockProvider,
    RecordedRequest,
    Script,
    _Invalid,
    anthropic_text,
    anthropic_tool_calls,
    openai_text,
    openai_tool_calls,
)

__all__ = ["COMMAND", "MARKER", "PROMPT", "PeerMock"]

MARKER = "acagent-peer-marker-7f3a9c"
"""The content of ``marker.txt``: found in a tool result, it proves the command ran."""
COMMAND = "cat marker.txt"
PROMPT = "Run the shell command `cat marker.txt` in the current directory and tell me what it prints."
FINAL = "The file marker.txt says: " + MARKER
SHELL_TOOLS = ("shell", "Bash", "bash", "exec_command", "shell_command")


def _shell_args(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments running :data:`COMMAND` for a shell tool with this JSON schema."""
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    for key in ("command", "cmd"):
        if key in props:
            kind = props[key].get("type")
            args[key] = ["bash", "-lc", COMMAND] if kind == "array" else COMMAND
            break
    else:
        args["command"] = COMMAND
    for key in schema.get("required") or []:
        if key not in args and key == "description":
            args[key] = "Print marker.txt"
    return args


def _find_shell(tools: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]] | None:
    by_name = dict(tools)
    for name in SHELL_TOOLS:
        if name in by_name:
            return name, _shell_args(by_name[name])
    return None


def _tools_of(api: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for tool in body.get("tools") or []:
        if api == "openai":
            fn = tool.get("function") or {}
            out.append((fn.get("name", ""), fn.get("parameters") or {}))
        elif api == "anthropic":
            out.append((tool.get("name", ""), tool.get("input_schema") or {}))
        elif tool.get("type") == "function":
            out.append((tool.get("name", ""), tool.get("parameters") or {}))
    return out


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(
            _text_of(v.get("text", v.get("content", "")) if isinstance(v, dict) else v) for v in value
        )
    return json.dumps(value)


def tool_results(api: str, body: dict[str, Any]) -> list[str]:
    """The texts of the tool results a request carries."""
    if api == "openai":
        return [_text_of(m.get("content")) for m in body.get("messages", []) if m.get("role") == "tool"]
    if api == "anthropic":
        out = []
        for m in body.get("messages", []):
            if m.get("role") == "user" and isinstance(m.get("content"), list):
                out += [_text_of(b.get("content")) for b in m["content"] if b.get("type") == "tool_result"]
        return out
    return [
        _text_of(i.get("output")) for i in body.get("input", []) if i.get("type") == "function_call_output"
    ]


# ------------------------------------------------------------------------- Responses API


def validate_responses(body: Any) -> None:
    """Validate a Responses request like the real API, for the items a coding agent sends.

    Raises:
        _Invalid: with a message like the real API's.
    """
    if not isinstance(body, dict):
        raise _Invalid("request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _Invalid("Missing required parameter: 'model'.")
    items = body.get("input")
    if not isinstance(items, list) or not items:
        raise _Invalid("Invalid 'input': expected a non-empty array of input items.")
    if body.get("stream") is not True:
        raise _Invalid("mock: only streamed responses are scripted (stream: true)")
    for t, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise _Invalid(f"Invalid 'tools[{t}]': expected an object with a 'type'.")
        if tool["type"] == "function" and not (isinstance(tool.get("name"), str) and tool["name"]):
            raise _Invalid(f"Missing required parameter: 'tools[{t}].name'.")
    open_calls: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"input[{i}]"
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message":
            if item.get("role") not in ("user", "assistant", "system", "developer"):
                raise _Invalid(f"Invalid value for '{where}.role': {item.get('role')!r}.")
            content = item.get("content")
            if not isinstance(content, (str, list)):
                raise _Invalid(f"Invalid type for '{where}.content': expected a string or an array.")
            for j, part in enumerate(content if isinstance(content, list) else []):
                if not isinstance(part, dict) or part.get("type") not in (
                    "input_text",
                    "output_text",
                    "input_image",
                    "refusal",
                    "input_file",
                ):
                    raise _Invalid(f"Invalid value for '{where}.content[{j}].type'.")
        elif kind == "function_call":
            call_id = item.get("call_id")
            if not (isinstance(call_id, str) and call_id and isinstance(item.get("name"), str)):
                raise _Invalid(f"Missing required parameter: '{where}.call_id' / '{where}.name'.")
            try:
                json.loads(item.get("arguments", ""))
            except ValueError:
                raise _Invalid(f"Invalid '{where}.arguments': not valid JSON.") from None
            open_calls[call_id] = i
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if call_id not in open_calls:
                raise _Invalid(f"No tool call found for function call output with call_id {call_id}.")
            del open_calls[call_id]
        elif kind not in ("reasoning", "custom_tool_call", "custom_tool_call_output", "local_shell_call"):
            raise _Invalid(f"Invalid value for '{where}.type': {kind!r}.")
    if open_calls:
        raise _Invalid(f"No tool output found for function call {next(iter(open_calls))}.")


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def responses_stream(text: str | None, call: tuple[str, dict[str, Any]] | None, n: int) -> bytes:
    """A complete Responses event stream: a text message or one function call."""
    rid = f"resp_mock_{n}"
    base = {"id": rid, "object": "response", "created_at": 0, "model": "mock", "status": "in_progress"}
    out = _sse("response.created", {"response": {**base, "output": []}})
    if call is not None:
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": f"call_mock_{n}",
            "name": call[0],
            "arguments": json.dumps(call[1]),
            "status": "completed",
        }
        out += _sse("response.output_item.added", {"output_index": 0, "item": {**item, "arguments": ""}})
        out += _sse(
            "response.function_call_arguments.delta",
            {"item_id": item["id"], "output_index": 0, "delta": item["arguments"]},
        )
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed"}
        out += _sse("response.output_item.added", {"output_index": 0, "item": {**item, "content": []}})
        out += _sse(
            "response.output_text.delta",
            {"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text or ""},
        )
        item["content"] = [{"type": "output_text", "text": text or "", "annotations": []}]
    out += _sse("response.output_item.done", {"output_index": 0, "item": item})
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }
    done = {**base, "status": "completed", "output": [item], "usage": usage}
    return out + _sse("response.completed", {"response": done})


# ------------------------------------------------------------------------- the server


class PeerMock(MockProvider):
    """The strict mock answering the peers' task in each wire format (see module docstring).

    Attributes:
        results: ``(api, tool result texts)`` of every valid request, in arrival order.
    """

    def __init__(self) -> None:
        super().__init__()
        self.default = self._reply
        self.results: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        self._n = 0

    def _record(self, method: str, path: str, headers: dict[str, str], body: bytes) -> RecordedRequest:
        request = super()._record(method, path, headers, body)
        route = path.split("?", 1)[0].rstrip("/")
        if route.endswith("/responses"):
            request.api = "responses"  # type: ignore[assignment]
        elif method == "GET" and route.endswith("/models"):
            request.api = "models"  # type: ignore[assignment]
        return request

    def _answer(self, request: RecordedRequest) -> tuple[int, Script]:
        api: str = request.api
        if api == "models":
            self._set_status(request, 200)
            body = {
                "object": "list",
                "data": [{"id": "mock", "object": "model", "created": 0, "owned_by": "me"}],
            }
            return 200, Script(status=200, body=body)
        if api != "responses":
            self._local.api = api
            if api == "openai" and isinstance(request.json, dict):
                request.json = _as_real_api_checks(request.json)
            return super()._answer(request)
        try:
            validate_responses(request.json)
        except _Invalid as exc:
            self._set_status(request, 400, str(exc))
            return 400, Script(
                status=400, body={"error": {"message": str(exc), "type": "invalid_request_error"}}
            )
        self._set_status(request, 200)
        return 200, Script(chunks=[self._reply_bytes("responses", request.json)])

    def _reply(self, body: Any) -> bytes:
        return self._reply_bytes(self._local.api, body)  # the request this handler thread answers

    def _reply_bytes(self, api: str, body: dict[str, Any]) -> bytes:
        with self._lock:
            self._n += 1
            n = self._n
            results = tool_results(api, body)
            self.results.append((api, results))
        shell = _find_shell(_tools_of(api, body))
        call = shell if shell is not None and not results else None
        text = FINAL if results else ("Bench title" if shell is None else None)
        if api == "responses":
            return responses_stream(text, call, n)
        if api == "openai":
            if call is None:
                return openai_text(text or FINAL, usage=(100, 20))
            return openai_tool_calls([(f"call_mock_{n}", call[0], call[1])]).replace(
                b"data: [DONE]", _usage_chunk() + b"data: [DONE]"
            )
        if call is None:
            return anthropic_text(text or FINAL)
        return anthropic_tool_calls(None, [(f"toolu_mock_{n}", call[0], call[1])])


def _as_real_api_checks(body: dict[str, Any]) -> dict[str, Any]:
    """The body with what the real Chat Completions API accepts but the strict mock refuses on
    purpose (to catch acagent's own bugs) made acceptable: an assistant ``content: ""`` beside
    tool calls is read as no content, as the API reads it."""
    messages = []
    for m in body.get("messages") or []:
        if (
            isinstance(m, dict)
            and m.get("role") == "assistant"
            and m.get("content") == ""
            and m.get("tool_calls")
        ):
            m = {**m, "content": None}
        messages.append(m)
    return {**body, "messages": messages}


def _usage_chunk() -> bytes:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return ("data: " + json.dumps(body) + "\n\n").encode()
