"""Observability: Prometheus metrics, OpenTelemetry traces, structured JSON logs."""

from __future__ import annotations

from acagent.obs._logs import JsonFormatter, RedactSecrets, log_context
from acagent.obs._metrics import NullRecorder, PrometheusRecorder, enable_metrics, metrics, provider_of
from acagent.obs._tracing import capture_content, configure_tracing, flush_tracing, shutdown_tracing, span

__all__ = [
    "JsonFormatter",
    "NullRecorder",
    "PrometheusRecorder",
    "RedactSecrets",
    "capture_content",
    "configure_tracing",
    "enable_metrics",
    "flush_tracing",
    "log_context",
    "metrics",
    "provider_of",
    "shutdown_tracing",
    "span",
]
