"""``acagent serve``: uvicorn inside anyio, over the process's one :class:`SessionRegistry`.

Start-up, in order:

1. refuse to start when a live daemon already serves this ``ACAGENT_HOME``;
2. the bearer token: ``$ACAGENT_HOME/token`` is created once (``secrets.token_urlsafe``, mode
   0600) and reused;
3. bind the listening socket (``--port 0`` takes a free port) and open the registry in this event
   loop; uvicorn serves the app on that socket;
4. once listening: write ``$ACAGENT_HOME/daemon.json`` atomically (``pid``, ``host``, ``port`` — the
   real one —, ``url``, ``busy_timeout_ms``, ``started_at``) and report the login URL;
5. ``registry.recover()``: sessions a dead process left active continue by themselves; then every
   ``hibernate_interval_s`` idle runners without attachers are dropped from memory and recovery
   runs again (sessions deferred by the concurrency cap, or orphaned by a killed ``acagent run``).

SIGTERM / SIGINT: new turns are refused (503 ``shutting_down``), running turns are interrupted
through the registry (``turn.interrupted`` reason ``shutdown``, delivered to attached clients),
streams are closed (WebSocket 1012 with ``re-attach with since=N``), uvicorn stops, the registry
closes, and ``daemon.json`` is removed.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from acagent.errors import DaemonRunning, UserError
from acagent.server._home import claim_home, ensure_token, remove_daemon_json, write_daemon_json
from acagent.server._limits import ConnectionTracker, Limits, raise_open_files_limit
from acagent.server._uvicorn import make_server
from acagent.settings import Settings

__all__ = [
    "DaemonRunning",
    "ServeOptions",
    "check_bind",
    "ensure_token",
    "is_loopback",
    "remove_daemon_json",
    "serve",
    "write_daemon_json",
]

log = logging.getLogger("acagent.server")


@dataclass
class ServeOptions:
    """Options of ``acagent serve`` (seconds unless the name says otherwise)."""

    host: str = "127.0.0.1"
    port: int = 8765
    hibernate_interval_s: float = 30.0
    recover_interval_s: float = 2.0
    limits: Limits = field(default_factory=Limits)
    """Every resource limit (:mod:`acagent.server._limits`)."""
    allow_remote: bool = False
    """Binding a non-loopback address needs this (``--allow-remote``)."""


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listener's proto is TCP; with proto 0 kept-alive requests stalled ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port (0 = any free port)"
        ) from exc
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and addresses in 127.0.0.0/8 or ``::1``."""
    import ipaddress

    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback ``--host`` unless ``--allow-remote`` was given.

    Raises:
        UserError: a non-loopback address without ``allow_remote``.
    """
    if not is_loopback(host) and not allow_remote:
        raise UserError(
            f"--host {host} would expose the daemon (it runs commands as you) beyond this machine;"
            " add --allow-remote if you mean it, or keep the default 127.0.0.1"
        )


def _url(host: str, port: int) -> str:
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


async def _close_at_exit(journal: Any) -> None:
    """Close the daemon's journal when the outer task group ends (after the registry closed)."""
    try:
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await journal.aclose()


async def _join_cluster(tg: Any, state: Any, settings: Settings) -> Any:
    """On a PostgreSQL journal, join the cluster (docs/scale-out.md); None for SQLite."""
    if not settings.journal:  # SQLite: acagent.store.pg (and asyncpg, the `pg` extra) is not needed
        return None
    from acagent.store.pg import PostgresJournal

    registry = state.registry
    if not isinstance(registry.journal, PostgresJournal):
        return None
    from acagent.server._cluster import RegistryHooks
    from acagent.server._inbox import ClusterInput
    from acagent.server._input import local_input
    from acagent.store.pg._cluster import ClusterMember

    hooks = RegistryHooks(registry)
    hooks.inbox = state.inbox = ClusterInput(
        registry.journal,
        local_input(state),
        capacity=hooks.capacity,
        running=hooks.running,
        max_sessions=settings.max_sessions,
    )
    await registry.journal.set_max_sessions(settings.max_sessions)
    member = ClusterMember(registry.journal, settings.journal, lease_ttl_s=settings.timing.lease_ttl_s)
    await tg.start(member.run, hooks)
    log.info("joined the cluster as daemon %r on %s", registry.journal.daemon_id, registry.journal.where)
    return member


async def serve(
    settings: Settings,
    options: ServeOptions,
    *,
    on_ready: Callable[[dict[str, Any], str], None] | None = None,
) -> None:
    """Run the daemon until SIGTERM/SIGINT (see module docstring).

    Args:
        settings: resolved settings (``max_sessions``, providers, timing, home).
        options: host, port and stream tuning.
        on_ready: called once listening with ``(daemon_info, login_url)``.

    Raises:
        DaemonRunning: a live daemon already serves ``settings.home``.
        UserError: the address cannot be bound.
    """
    from acagent.mcp import McpManager
    from acagent.providers import create_provider
    from acagent.runner import SessionRegistry
    from acagent.server._providers import SharedProviders
    from acagent.server._security import GuardConfig
    from acagent.server._state import DaemonState
    from acagent.store._select import open_journal

    check_bind(options.host, options.allow_remote)
    raise_open_files_limit()  # so max_connections_per_client, not EMFILE, bounds a flood
    home = settings.home
    claim = claim_home(home)  # held while this daemon serves the home
    try:
        token = ensure_token(home)
        sock = _bind(options.host, options.port)
    except BaseException:
        os.close(claim)
        raise
    port = sock.getsockname()[1]
    pid = os.getpid()
    stop = anyio.Event()
    try:
        async with anyio.create_task_group() as outer:
            outer.start_soon(_watch_signals, stop)
            providers = SharedProviders(lambda model: create_provider(model, settings))
            journal = await open_journal(
                settings, daemon_id=settings.daemon_id or f"{socket.gethostname()}:{port}"
            )
            outer.start_soon(_close_at_exit, journal)
            async with (
                # MCP servers start once per session cwd, shared by its sessions (docs/mcp.md)
                McpManager.open(settings.mcp, settings.home, os.environ) as mcp,
                SessionRegistry.open(
                    settings, interactive=True, provider_factory=providers, journal=journal, tool_source=mcp
                ) as registry,
            ):
                guard = GuardConfig(token=token, port=port, bound_host=options.host)
                state = DaemonState(registry=registry, settings=settings, guard=guard, limits=options.limits)
                state.tracker = ConnectionTracker(options.limits)
                await _run(state, options, sock, stop, on_ready)
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await providers.aclose()
            outer.cancel_scope.cancel()
    finally:
        sock.close()
        remove_daemon_json(home, pid)
        os.close(claim)


async def _watch_signals(stop: anyio.Event) -> None:
    """Set ``stop`` on the first SIGTERM/SIGINT."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.warning("received %s: shutting down", signal.Signals(signum).name)
            stop.set()
            return


async def _run(
    state: Any,
    options: ServeOptions,
    sock: socket.socket,
    stop: anyio.Event,
    on_ready: Callable[[dict[str, Any], str], None] | None,
) -> None:
    """Serve the app on ``sock`` until ``stop``, then shut down gracefully (module docstring)."""
    from acagent.server._app import create_app

    registry = state.registry
    port = sock.getsockname()[1]
    url = _url(options.host, port)
    server = make_server(create_app(state), state.limits, state.tracker)
    served = anyio.Event()

    async def run_server() -> None:
        try:
            await server.serve([sock])
        finally:
            served.set()
            stop.set()

    async with anyio.create_task_group() as tg:
        cluster = await _join_cluster(tg, state, state.settings)
        tg.start_soon(run_server)
        tg.start_soon(state.reaper.run, state.shutting_down)
        if await _listening(server, served, stop, url):
            info = {
                "pid": os.getpid(),
                "host": options.host,
                "port": port,
                "url": url,
                "busy_timeout_ms": registry.journal.info().get("busy_timeout_ms"),
                "started_at": time.time(),
            }
            write_daemon_json(state.settings.home, info)
            log.info("listening on %s (journal %s)", url, registry.journal.info())
            if on_ready is not None:
                on_ready(info, f"{url}/login?token={state.guard.token}")
            tg.start_soon(_maintenance, state, cluster, options)
        await stop.wait()
        await _drain(state, cluster, server, served)
        tg.cancel_scope.cancel()


async def _listening(server: Any, served: anyio.Event, stop: anyio.Event, url: str) -> bool:
    """Wait until uvicorn listens: True; False when a SIGTERM/SIGINT came first (then the daemon
    shuts down as from serving, never announced; it was "the HTTP server did not start", exit 1).

    Raises:
        UserError: the server ended without listening.
    """
    while not server.started:
        if served.is_set():
            raise UserError(f"the HTTP server did not start on {url}")
        if stop.is_set():
            return False
        await anyio.sleep(0.01)
    return True


async def _maintenance(state: Any, cluster: Any, options: ServeOptions) -> None:
    """Recovery every ``recover_interval_s``, hibernation every ``hibernate_interval_s``.

    Recovery is cheap (one query over active sessions): run often, a turn orphaned by a dead
    process (even an in-process ``acagent run`` killed while this daemon runs) continues within
    seconds. In a cluster the claim scan recovers (across daemons).
    """
    from acagent.server._state import hibernate

    last_hibernate = anyio.current_time()
    while True:
        try:
            recovered = [] if cluster is not None else await state.registry.recover()
            if recovered:
                log.warning("recovering interrupted sessions: %s", ", ".join(recovered))
        except Exception:
            log.exception("recovery pass failed")
        await anyio.sleep(options.recover_interval_s)
        if anyio.current_time() - last_hibernate < options.hibernate_interval_s:
            continue
        last_hibernate = anyio.current_time()
        try:
            await hibernate(state)
        except Exception:
            log.exception("hibernation pass failed")


async def _drain(state: Any, cluster: Any, server: Any, served: anyio.Event) -> None:
    """Graceful shutdown: refuse new work, interrupt turns (clients see it), close streams."""
    registry = state.registry
    state.accepting = False
    if cluster is not None:  # drain: release the leases; peers continue the turns
        cluster.draining = True
    for runner in list(registry.runners.values()):
        runner.interrupt("handoff" if cluster is not None else "shutdown")
    with anyio.move_on_after(20):
        for runner in list(registry.runners.values()):
            await runner.wait()
    with anyio.move_on_after(2):  # let attached clients receive turn.interrupted
        while not state.streams_caught_up():
            await anyio.sleep(0.02)
    state.shutting_down.set()
    server.should_exit = True
    with anyio.move_on_after(10):
        await served.wait()
