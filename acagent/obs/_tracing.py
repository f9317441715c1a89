"""OpenTelemetry spans for a turn, each LLM call and each tool call.

Off unless the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
is set: :func:`configure_tracing` is called once by the CLI with what :func:`load_settings` read,
and only then imports the OpenTelemetry SDK and the OTLP/HTTP exporter (the exporter itself reads
the other standard ``OTEL_*`` variables: headers, timeout). When off, :func:`span` yields a
no-op span and costs one function call.

Attribute names follow the OpenTelemetry GenAI semantic conventions
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and ``gen-ai-agent-spans``):

- turn: ``invoke_agent acagent`` — ``gen_ai.operation.name=invoke_agent``, ``gen_ai.agent.name``,
  ``gen_ai.conversation.id`` (the session id);
- LLM call: ``chat {model}`` — ``gen_ai.operation.name=chat``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.response.finish_reasons``;
- tool call: ``execute_tool {name}`` — ``gen_ai.tool.name``, ``gen_ai.tool.call.id``.

Message text, tool arguments and tool output are never put in spans unless content capture is
on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``); keys never are.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["capture_content", "configure_tracing", "flush_tracing", "shutdown_tracing", "span"]

log = logging.getLogger("acagent.obs")

_tracer: Any = None
_provider: Any = None
_capture = False


class _NoSpan:
    """Stand-in for a span when tracing is off."""

    def set_attribute(self, key: str, value: Any) -> None:
        """Ignored."""

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Ignored."""

    def record_error(self, exc: BaseException) -> None:
        """Ignored."""


class _Span:
    """A live OpenTelemetry span with the two helpers acagent uses."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def set_attribute(self, key: str, value: Any) -> None:
        """Set one attribute (None values are skipped)."""
        if value is not None:
            self._span.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        """Set several attributes (None values are skipped)."""
        for k, v in attributes.items():
            self.set_attribute(k, v)

    def record_error(self, exc: BaseException) -> None:
        """Mark the span failed with the error's type (its message only with content capture)."""
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", type(exc).__name__)
        self._span.set_status(Status(StatusCode.ERROR, str(exc) if _capture else type(exc).__name__))


_NO_SPAN = _NoSpan()


def configure_tracing(enabled: bool, *, content: bool = False, service_name: str = "acagent") -> bool:
    """Set up the OTLP/HTTP exporter once per process when ``enabled``.

    Returns:
        True when tracing is on. A broken OpenTelemetry install logs one warning and returns False.
    """
    global _tracer, _provider, _capture
    if not enabled or _tracer is not None:
        return _tracer is not None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed (%s)", exc)
        return False
    _provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _tracer = _provider.get_tracer("acagent")
    _capture = content
    return True


def flush_tracing(timeout_s: float = 5.0) -> None:
    """Export the spans ended so far (blocking, at most ``timeout_s`` seconds)."""
    if _provider is not None:
        with contextlib.suppress(Exception):
            _provider.force_flush(int(timeout_s * 1000))


def shutdown_tracing() -> None:
    """Flush and stop the exporter (at process exit; bounded by the SDK's export timeout)."""
    global _tracer, _provider
    if _provider is not None:
        with contextlib.suppress(Exception):
            _provider.shutdown()
    _tracer = _provider = None


def capture_content() -> bool:
    """True when message text and tool input/output may go into spans."""
    return _capture and _tracer is not None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A span named ``name``, current for the ``with`` body (children nest under it).

    Yields an object with ``set_attribute``, ``set_attributes`` and ``record_error``; an
    exception leaving the body marks the span failed and propagates.
    """
    if _tracer is None:
        yield _NO_SPAN
        return
    attrs = {k: v for k, v in (attributes or {}).items() if v is not None}
    with _tracer.start_as_current_span(
        name, attributes=attrs, record_exception=False, set_status_on_exception=False
    ) as raw:
        wrapped = _Span(raw)
        try:
            yield wrapped
        except BaseException as exc:
            wrapped.record_error(exc)
            raise
