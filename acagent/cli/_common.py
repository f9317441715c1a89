"""Shared CLI plumbing: settings from flags, opening a session client, running a turn.

``open_client`` is where "CLI ≡ serve" is decided: when a daemon serves this ``ACAGENT_HOME``
(``daemon.json`` names a live pid), the session is driven through it (HTTP + WebSocket);
otherwise a :class:`~acagent.runner.SessionRegistry` runs in this process. Either way the front
end gets a :class:`~acagent.client.SessionClient` and renders the same events.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from acagent.cli._app import fail
from acagent.client._opened import Opened
from acagent.errors import AcagentError, find_acagent_error

if TYPE_CHECKING:
    from acagent.settings import Settings

__all__ = ["Opened", "build_settings", "open_client", "run_async", "turn_end_types"]

T = TypeVar("T")

TURN_END = ("turn.completed", "turn.failed", "turn.interrupted")

# Options shared by `run` and `chat` (one definition, one help text).
ModelOption = Annotated[
    str | None, typer.Option("--model", "-m", help="PROVIDER:MODEL, e.g. openai:gpt-4o-mini.")
]
BaseUrlOption = Annotated[str | None, typer.Option("--base-url", help="Provider base URL (else *_BASE_URL).")]
ResumeOption = Annotated[str | None, typer.Option("--resume", "-r", help="Session id (or prefix) to resume.")]
ContinueOption = Annotated[
    bool, typer.Option("--continue", "-c", help="Resume this directory's latest session.")
]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Run tools without asking for approval.")]
ToolsOption = Annotated[
    str | None, typer.Option("--tools", help="Offer tools to the model: on, off or auto.")
]


def check_session_flags(resume: str | None, continue_: bool, tools: str | None) -> None:
    """Exit with a usage error for contradictory or invalid session flags."""
    if resume is not None and not resume.strip():
        fail("--resume needs a session id (or a prefix of one); `acagent sessions list` shows them", 2)
    if resume and continue_:
        fail("--resume and --continue cannot be combined", 2)
    if tools is not None and tools not in ("on", "off", "auto"):
        fail("--tools takes on, off or auto", 2)


def turn_end_types() -> tuple[str, ...]:
    """Event types that end a turn."""
    return TURN_END


def build_settings(**flags: Any) -> Settings:
    """Settings from CLI flags + environment + config file (exits with a message on error)."""
    from acagent.settings import load_settings

    try:
        return load_settings(flags)
    except AcagentError as exc:
        fail(exc.message, 2)


def run_async(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """``anyio.run`` on the asyncio backend; AcagentError → one-line message, exit 1.

    anyio imports its asyncio backend on the first ``anyio.run``; that import is done here while
    a Ctrl-C is still start-up's quiet exit. After :func:`~acagent._entry.started` it would run
    with SIGINT raising ``KeyboardInterrupt`` anywhere in it, before asyncio's runner takes
    SIGINT over, and an interrupt inside an import does not always stay a ``KeyboardInterrupt``
    (Python 3.11 wraps one raised in a class body's ``__set_name__`` in a ``RuntimeError``): a
    traceback, seen once in 20 SIGINTs 0.3 s into ``acagent serve`` on a loaded machine.
    """
    import anyio
    import anyio._backends._asyncio  # the import the docstring talks about

    from acagent._entry import started

    try:
        started()  # from here a Ctrl-C is the command's (KeyboardInterrupt, signal receivers)
        _quiet_orphaned_workers()
        return anyio.run(fn)
    except (AcagentError, BaseExceptionGroup) as exc:
        err = find_acagent_error(exc)
        if err is None:
            if isinstance(exc, BaseExceptionGroup) and _only_interrupts(exc):
                _interrupted()  # a Ctrl-C that cancelled start-up tasks mid-way
            raise
        fail(f"{err.message}" + (f" [{err.code}]" if err.code not in ("internal", "bad_request") else ""))
    except KeyboardInterrupt:
        _interrupted()


def _interrupted() -> NoReturn:
    """Exit 130 after a Ctrl-C that reached the top (start-up, or a second Ctrl-C).

    Worker threads the interrupted loop left behind (an ``aiosqlite`` call in flight) would
    report "Event loop is closed" with a traceback when they finish; they are not waited for:
    the process ends like a killed one, which the journal is made to survive.
    """
    import threading

    sys.stderr.write("\nacagent: error: interrupted\n")
    sys.stderr.flush()
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        sys.stdout.flush()
        os._exit(130)
    raise typer.Exit(130)


def _quiet_orphaned_workers() -> None:
    """Make a worker thread whose event loop is already closed end without a traceback.

    A Ctrl-C lets ``anyio.run`` cancel the tasks and close the loop while an ``aiosqlite`` call is
    still running on its connection's thread. When the call finishes, the thread hands the result
    to the closed loop (``call_soon_threadsafe``), which raises ``RuntimeError("Event loop is
    closed")``, and ``threading`` prints that with a traceback — possibly before
    :func:`_interrupted` gets to end the process. The result has nobody left to receive it (the
    journal is made to survive an abandoned call, like a killed process), so that one error is
    dropped; every other thread exception goes to the previous ``threading.excepthook``.
    """
    import threading

    previous = threading.excepthook
    if getattr(previous, "_acagent_quiet", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, RuntimeError) and str(args.exc_value) == "Event loop is closed":
            return
        previous(args)

    hook._acagent_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def _only_interrupts(group: BaseExceptionGroup) -> bool:
    """True when every leaf of ``group`` is a Ctrl-C (``KeyboardInterrupt``) or the cancellation
    it caused (``CancelledError``)."""
    import asyncio

    return all(
        _only_interrupts(e)
        if isinstance(e, BaseExceptionGroup)
        else isinstance(e, KeyboardInterrupt | asyncio.CancelledError)
        for e in group.exceptions
    )


async def check_model(settings: Settings, model: str) -> None:
    """Fail early (before any session is written) on an unknown provider or a missing key.

    Raises:
        ConfigError: naming the fix.
    """
    if model.startswith("local:"):
        return  # the local provider checks its model file when it starts
    from acagent.providers import create_provider

    provider = create_provider(model, settings)
    base_url = getattr(provider, "base_url", None)
    await provider.aclose()
    if isinstance(base_url, str):
        await preflight(base_url, model.partition(":")[0])


_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


async def preflight(base_url: str, provider: str, timeout_s: float = 1.5) -> None:
    """Fail within ``timeout_s`` seconds when nothing listens at ``base_url``.

    The provider path retries a refused connection with backoff (10–17 s before the user learns
    anything); a refused TCP connect or an unknown host before the session is created says it at
    once. A connect that only times out is left to the provider (a slow network is not "down"),
    and nothing is checked when a proxy is configured (the proxy, not the host, is connected).

    Raises:
        ProviderConnectionError: the connection was refused or the host does not resolve.
    """
    import socket
    from urllib.parse import urlsplit

    import anyio

    from acagent.errors import ProviderConnectionError

    if any(os.environ.get(v) for v in _PROXY_VARS):
        return
    parts = urlsplit(base_url)
    host = parts.hostname
    if not host:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return
    env = f"{provider.upper()}_BASE_URL"
    check = f"is the server running? check --base-url, {env} or `acagent doctor`"
    with anyio.move_on_after(timeout_s):
        try:
            stream = await anyio.connect_tcp(host, port)
        except socket.gaierror as exc:
            raise ProviderConnectionError(
                f"cannot reach {provider!r} at {base_url!r}: unknown host {host!r} ({exc.strerror}); {check}"
            ) from None
        except OSError as exc:
            # anyio tries every address and raises OSError("All connection attempts failed")
            # from the last attempt's error.
            if isinstance(exc, ConnectionRefusedError) or isinstance(exc.__cause__, ConnectionRefusedError):
                raise ProviderConnectionError(
                    f"cannot reach {provider!r} at {base_url!r}: connection refused on port {port}; {check}"
                ) from None
            return  # unreachable network and the like: the provider's own errors and retries say it
        await stream.aclose()


def current_dir() -> str:
    """``os.getcwd()``, as a clear error when the directory was deleted.

    Raises:
        UserError: the current directory no longer exists.
    """
    from acagent.errors import UserError

    try:
        return os.getcwd()
    except FileNotFoundError:
        raise UserError("the current directory no longer exists; cd to an existing directory") from None


@asynccontextmanager
async def open_client(
    settings: Settings,
    *,
    resume: str | None = None,
    continue_: bool = False,
    cwd: str | None = None,
    interactive: bool = True,
    title: str | None = None,
    model_flag: str | None = None,
) -> AsyncIterator[Opened]:
    """Open (or create) the session and a client for it.

    Args:
        resume: a session id (or unique prefix) to resume.
        continue_: resume the most recent session of ``cwd``.
        cwd: working directory (default: the current one).
        model_flag: an explicit ``--model``; it applies to a resumed session's turns in this
            process (the session keeps its recorded model otherwise).

    Raises:
        SessionNotFound: unknown id, or nothing to continue in this directory.
    """
    from acagent._entry import settled
    from acagent.errors import SessionNotFound
    from acagent.runner import canonical_cwd

    cwd = canonical_cwd(cwd or current_dir())
    remote = _daemon_client_factory(settings)
    if remote is not None:
        if settings.providers.base_url:  # only --base-url sets it; the daemon has its own endpoints
            from acagent.errors import UserError

            raise UserError(
                f"a daemon serves {str(settings.home)!r} and talks to providers with its own settings, "
                "so --base-url cannot apply here; drop --base-url, or stop the daemon "
                "(`acagent serve --stop`) and start it with the endpoint in OPENAI_BASE_URL/ANTHROPIC_BASE_URL"
            )
        async with remote(resume=resume, continue_=continue_, cwd=cwd, title=title) as opened:
            settled()
            yield opened
        return

    from acagent.client import LocalSessionClient
    from acagent.mcp import McpManager
    from acagent.runner import SessionRegistry

    async with (
        McpManager.open(settings.mcp, settings.home, os.environ) as mcp,
        SessionRegistry.open(settings, interactive=interactive, tool_source=mcp) as registry,
    ):
        journal = registry.journal
        await registry.reap_orphans()
        created = False
        if resume:
            row = await journal.find_session(resume)
        elif continue_:
            rows = await journal.list_sessions(cwd=cwd, limit=1)
            if not rows:
                raise SessionNotFound(f"no session to continue in {cwd!r}; start one with `acagent chat`")
            row = rows[0]
        else:
            from acagent.providers import resolve_model_id

            model = resolve_model_id(settings)
            await check_model(settings, model)
            row = await registry.create_session(cwd, model=model, title=title)
            created = True
        runner = await registry.get_runner(row.id)
        settled()  # what the session runs on is built (acagent/_entry.py, "Garbage collection")
        if model_flag and not created:
            runner.model_override = model_flag  # an explicit --model applies to this process's turns
        effective = runner.model_override or row.model or ""
        if effective.startswith("local:"):
            # First use of the embedded model: pull it visibly (explanation + progress bar).
            import anyio

            from acagent.cli._models import prepare_local_model

            await anyio.to_thread.run_sync(prepare_local_model, effective, settings)
        yield Opened(
            client=LocalSessionClient(registry, row.id),
            session_id=row.id,
            created=created,
            last_seq=row.last_seq,
            remote=False,
            model=row.model,
        )


def _daemon_client_factory(settings: Settings) -> Any:
    """The daemon's ``open_remote`` if a live daemon serves ``settings.home``, else None.

    Raises:
        DaemonUnavailable: a registered daemon is alive but stopped or not answering.

    Without ``daemon.json`` no daemon can be serving: the daemon client (httpx, websockets) is
    not imported at all then, so a one-shot ``run`` loads only what it uses.
    """
    if not (settings.home / "daemon.json").exists():
        return None
    from acagent.client._discovery import answering_daemon

    # The pid must be alive (a stale daemon.json imports nothing more) and answer: a stopped or
    # hung daemon raises DaemonUnavailable, never "no daemon" (that would write the journal
    # beside the daemon that holds its sessions, F137).
    info = answering_daemon(settings.home)
    if info is None:
        return None
    from acagent.client._remote import open_remote

    def factory(**kw: Any) -> Any:
        return open_remote(settings, info, **kw)

    return factory
