"""``acagent serve [--host] [--port] [--max-sessions N] [--stop]`` and ``acagent status``.

``serve`` runs the daemon in the foreground until SIGTERM/SIGINT (see
:mod:`acagent.server._daemon`); it prints the URL and the login URL for the browser once
listening. ``serve --stop`` sends SIGTERM to the pid in ``daemon.json`` and waits for it to exit.
``status`` says whether a daemon serves ``ACAGENT_HOME`` and which sessions are running
(exit 0 when up, 3 when down).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from acagent.cli._app import app, fail
from acagent.cli._common import build_settings, run_async
from acagent.errors import AcagentError

__all__ = ["serve_command", "status_command"]


@app.command("serve")
def serve_command(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", "-p", help="TCP port; 0 takes a free port.", min=0, max=65535)
    ] = 8765,
    max_sessions: Annotated[
        int | None,
        typer.Option("--max-sessions", help="Turns running at once (more → 429 concurrency_cap).", min=1),
    ] = None,
    stop: Annotated[
        bool, typer.Option("--stop", help="Stop the daemon serving ACAGENT_HOME and exit.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Default PROVIDER:MODEL for new sessions.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Provider base URL (else *_BASE_URL).")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Run every session's tools without asking.")
    ] = False,
    hibernate_interval: Annotated[
        float,
        typer.Option(
            "--hibernate-interval", help="Seconds between idle-runner hibernation passes.", hidden=True
        ),
    ] = 30.0,
    send_timeout: Annotated[
        float | None,
        typer.Option(
            "--send-timeout", help="Seconds a stream send may block before the client is closed.", hidden=True
        ),
    ] = None,
    keepalive: Annotated[
        float | None,
        typer.Option("--keepalive", help="Seconds between SSE keep-alive comments.", hidden=True),
    ] = None,
    queue_events: Annotated[
        int | None,
        typer.Option("--queue-events", help="Per-attacher queue bound (events).", hidden=True, min=16),
    ] = None,
    journal: Annotated[
        str | None,
        typer.Option(
            "--journal",
            help="Journal URL: postgresql://… shares sessions between daemons (else SQLite in ACAGENT_HOME).",
        ),
    ] = None,
    daemon_id: Annotated[
        str | None,
        typer.Option("--daemon-id", help="This daemon's id on a PostgreSQL journal (default host:port)."),
    ] = None,
    limit: Annotated[
        list[str] | None,
        typer.Option(
            "--limit",
            metavar="NAME=VALUE",
            help="Override one daemon limit (repeatable), e.g. --limit max_body_bytes=2097152; see docs/daemon.md.",
        ),
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option("--allow-remote", help="Allow a non-loopback --host (the daemon runs commands as you)."),
    ] = False,
    log_format: Annotated[
        str, typer.Option("--log-format", help="text, or json: one object per line (docs/observability.md).")
    ] = "text",
) -> None:
    """Serve sessions over HTTP, WebSocket and SSE (and a web page) on a loopback port."""
    settings = build_settings(
        model=model,
        base_url=base_url,
        auto_approve=yes or None,
        max_sessions=max_sessions,
        journal=journal,
        daemon_id=daemon_id,
    )
    if stop:
        raise typer.Exit(_stop(settings))
    if log_format not in ("text", "json"):
        fail(f"--log-format takes text or json, not {log_format!r}", 2)
    from acagent.server._daemon import ServeOptions, serve

    limits = _limits(limit, send_timeout, keepalive, queue_events, host, allow_remote)
    options = ServeOptions(
        host=host,
        port=port,
        hibernate_interval_s=hibernate_interval,
        limits=limits,
        allow_remote=allow_remote,
    )
    ready = _announcer(settings, host, log_format)
    run_async(lambda: serve(settings, options, on_ready=ready))


def _limits(
    limit: list[str] | None,
    send_timeout: float | None,
    keepalive: float | None,
    queue_events: int | None,
    host: str,
    allow_remote: bool,
) -> Any:
    """The daemon limits with ``--limit`` and the hidden tuning flags applied; exits on a bad value
    or a refused ``--host``."""
    from acagent.server._daemon import check_bind
    from acagent.server._limits import Limits

    pairs = list(limit or [])
    for name, value in (
        ("send_timeout_s", send_timeout),
        ("keepalive_s", keepalive),
        ("queue_events", queue_events),
    ):
        if value is not None:
            pairs.append(f"{name}={value}")
    if send_timeout is not None:
        pairs.append(f"close_grace_s={max(30.0, send_timeout)}")
    try:
        limits = Limits().with_overrides(pairs)
        check_bind(host, allow_remote)
    except ValueError as exc:  # a usage error, like any bad option: exit 2
        fail(str(exc), 2)
    except AcagentError as exc:
        fail(exc.message)
    return limits


def _announcer(settings: Any, host: str, log_format: str) -> Callable[[dict[str, Any], str], None]:
    """Set up logging; return the ``on_ready`` callback that prints the address and login URL."""
    import logging

    from acagent.server._daemon import is_loopback

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="acagent: %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("acagent.server").setLevel(logging.INFO)
    redact = _install_log_format(log_format, settings)

    def ready(info: dict[str, Any], login_url: str) -> None:
        try:  # the token exists now: no log line may carry it
            redact.add((settings.home / "token").read_text().strip())
        except OSError:
            pass
        _apply_log_format(log_format, redact)  # uvicorn configured its own loggers meanwhile
        if not is_loopback(host):
            sys.stderr.write(
                f"acagent: warning: listening on {host}:{info['port']}, reachable from other machines;"
                f" anyone with the token can run commands as you. URL: {info['url']}\n"
            )
        sys.stdout.write(
            f"acagent daemon listening on {info['url']} (pid {info['pid']}, home {settings.home})\n"
        )
        sys.stdout.write(f"Open in a browser: {login_url}\n")
        sys.stdout.flush()

    return ready


def _install_log_format(log_format: str, settings: Any) -> Any:
    """Secrets redacted in every log line; ``json``: one JSON object per line (acagent.obs)."""

    from acagent.obs import RedactSecrets

    redact = RedactSecrets([settings.providers.openai_api_key, settings.providers.anthropic_api_key])
    _apply_log_format(log_format, redact)
    return redact


def _apply_log_format(log_format: str, redact: Any) -> None:
    import logging

    from acagent.obs import JsonFormatter

    for name in ("", "acagent", "uvicorn", "uvicorn.error", "uvicorn.access"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(redact)
            if log_format == "json" and not isinstance(handler.formatter, JsonFormatter):
                handler.setFormatter(JsonFormatter())


def _stop(settings: Any) -> int:
    from acagent.client._discovery import daemon_info

    info = daemon_info(settings.home)
    if info is None:
        sys.stderr.write(f"acagent: no daemon serves {str(settings.home)!r}\n")
        return 1
    try:
        os.kill(info.pid, signal.SIGTERM)
        # A stopped daemon (SIGSTOP, Ctrl-Z) acts on SIGTERM only once continued, as a shell's
        # `kill` does for a stopped job; a running one ignores SIGCONT (F137).
        os.kill(info.pid, signal.SIGCONT)
    except ProcessLookupError:
        return 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if daemon_info(settings.home) is None:
            sys.stdout.write(f"stopped the daemon (pid {info.pid})\n")
            return 0
        time.sleep(0.1)
    fail(
        f"the daemon (pid {info.pid}) did not stop within 60 s; `kill -9 {info.pid}` ends it (sessions recover)"
    )


@app.command("status")
def status_command(
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Is a daemon serving ACAGENT_HOME, and which sessions are running?"""
    settings = build_settings()
    result = run_async(lambda: _status(settings))
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        d = result["daemon"]
        if d is None:
            sys.stdout.write(f"daemon: down (ACAGENT_HOME {settings.home})\n")
        elif not d["answering"]:
            sys.stdout.write(f"daemon: not answering, pid {d['pid']}, {d['url']}: {d['message']}\n")
        else:
            sys.stdout.write(
                f"daemon: up, pid {d['pid']}, {d['url']} ({d.get('runners', 0)} runners in memory)\n"
            )
        running = result["running"]
        sys.stdout.write(f"sessions running: {len(running)}\n")
        for s in running:
            title = (s.get("title") or "")[:50]
            sys.stdout.write(f"  {s['id']}  {s['status']:<12} {s['cwd']}  {title}\n")
    d = result["daemon"]
    raise typer.Exit(3 if d is None else 0 if d["answering"] else 4)


async def _status(settings: Any) -> dict[str, Any]:
    from acagent.client._discovery import DaemonUnavailable, answering_daemon
    from acagent.client._remote import RemoteSessionClient
    from acagent.store import ACTIVE

    daemon: dict[str, Any] | None = None
    try:
        info = answering_daemon(settings.home)
    except DaemonUnavailable as exc:  # alive but stopped or hung
        # Registered and alive, not down: it holds the home (F137). The running sessions below
        # are read from the journal (a read beside it is safe; nothing is written).
        daemon = {**exc.detail, "answering": False, "message": exc.message}
        info = None
    if info is not None:
        client = RemoteSessionClient(settings.home, info, "")
        try:
            stats = await client.request("GET", "/v1/debug/stats")
            rows = await client.request("GET", "/v1/sessions")
            daemon = {"pid": info.pid, "url": info.url, "answering": True, "runners": stats.get("runners", 0)}
            running = [r for r in rows if r["status"] in ACTIVE or r.get("busy")]
            return {"daemon": {**daemon, "stats": stats}, "running": running}
        except DaemonUnavailable as exc:  # it stopped answering between the probe and now
            message = f"daemon pid {info.pid} does not answer: {exc.message}"
            daemon = {"pid": info.pid, "url": info.url, "answering": False, "message": message}
        finally:
            await client.aclose()
    from acagent.store._select import open_journal

    if not settings.journal and not settings.db_path.exists():
        return {"daemon": daemon, "running": []}
    journal = await open_journal(settings)
    try:
        rows = [r.to_public() for r in await journal.list_sessions() if r.status in ACTIVE]
    finally:
        await journal.aclose()
    return {"daemon": daemon, "running": rows}
