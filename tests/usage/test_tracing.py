"""OpenTelemetry: a real OTLP/HTTP receiver gets the turn → LLM → tool span tree; off costs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.mockprovider import MockProvider, openai_text, openai_tool_calls


class _Receiver(ThreadingHTTPServer):
    spans: list[Any]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(415)
            self.end_headers()
            return
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)  # a malformed body raises: the test fails
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                self.server.spans.extend(ss.spans)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver(("127.0.0.1", 0), _Handler)
    server.spans = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _attrs(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = (
            v.string_value or v.int_value or v.bool_value or [x.string_value for x in v.array_value.values]
        )
    return out


def test_turn_llm_and_tool_spans_nest_and_carry_no_content(
    cli, mock: MockProvider, receiver: _Receiver, workspace: Path
) -> None:
    mock.script(
        openai_tool_calls([("call_1", "shell", {"command": "echo SECRET-OUTPUT"})]), openai_text("done")
    )
    proc = cli(
        "run",
        "please run the SECRET-PROMPT",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
        extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_address[1]}"},
    )
    assert proc.returncode == 0, proc.stderr
    spans = {s.name: s for s in receiver.spans}
    turn = spans["invoke_agent acagent"]
    chats = [s for s in receiver.spans if s.name == "chat mock"]
    tool = spans["execute_tool shell"]
    assert len(chats) == 2
    assert all(c.parent_span_id == turn.span_id and c.trace_id == turn.trace_id for c in chats)
    assert tool.parent_span_id == turn.span_id and tool.trace_id == turn.trace_id
    assert not turn.parent_span_id
    ta, ca, la = _attrs(turn), _attrs(chats[0]), _attrs(tool)
    assert ta["gen_ai.operation.name"] == "invoke_agent" and ta["gen_ai.conversation.id"].startswith("ses_")
    assert ca["gen_ai.operation.name"] == "chat" and ca["gen_ai.provider.name"] == "openai"
    assert ca["gen_ai.request.model"] == "mock" and ca["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert la["gen_ai.tool.name"] == "shell" and la["gen_ai.tool.call.id"] == "call_1"
    dump = json.dumps([_attrs(s) for s in receiver.spans])
    assert "SECRET-PROMPT" not in dump and "SECRET-OUTPUT" not in dump


def test_tracing_off_never_imports_opentelemetry(tmp_path: Path, mock: MockProvider, workspace: Path) -> None:
    code = (
        "import sys, anyio\n"
        "from acagent.settings import load_settings\n"
        "from acagent.runner import SessionRegistry\n"
        "async def main():\n"
        f"    s = load_settings({{'home': {str(tmp_path / 'h')!r}, 'base_url': {mock.openai_base_url!r},"
        " 'model': 'openai:mock', 'auto_approve': True}, env={})\n"
        "    async with SessionRegistry.open(s) as reg:\n"
        f"        row = await reg.create_session({str(workspace)!r}, model='openai:mock')\n"
        "        await (await reg.get_runner(row.id)).run_turn('hi')\n"
        "anyio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'prometheus_client'))))\n"
    )
    mock.script(openai_text("hello"))
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
