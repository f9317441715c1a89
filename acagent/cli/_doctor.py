"""``acagent doctor``: what acagent would use here, and what is missing.

Prints the resolved provider and model (and which rule chose it), the data directory, the
daemon state (``$ACAGENT_HOME/daemon.json``: is its pid alive?), which keys and base URLs are
set (key values are never printed), whether the local model and xllamacpp are available, and
a list of what is missing with the command that fixes each. Always exits 0: it reports.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from acagent._pids import is_stopped, pid_alive
from acagent._url import redact_url
from acagent.cli._app import app, fail
from acagent.errors import AcagentError

if TYPE_CHECKING:
    from acagent.settings import Settings

__all__ = [
    "DaemonState",
    "Report",
    "doctor_command",
    "doctor_report",
    "read_daemon_state",
    "resolution_steps",
]

_LOCAL_DEFAULT = "local:smollm2-135m"
_ANTHROPIC_DEFAULT = "anthropic:claude-sonnet-4-5"
_OPENAI_DEFAULT = "openai:gpt-4o-mini"


def _resolve_model_id(settings: Settings) -> str:
    """``acagent.providers.resolve_model_id`` when it exists, else the same order here."""
    try:
        from acagent.providers import resolve_model_id
    except ImportError:  # pragma: no cover - the registry predates this module in practice
        p = settings.providers
        if settings.model:
            return settings.model
        if p.anthropic_api_key:
            return _ANTHROPIC_DEFAULT
        if p.openai_api_key or p.openai_base_url or p.base_url:
            return _OPENAI_DEFAULT
        return _LOCAL_DEFAULT
    return resolve_model_id(settings)


@dataclass
class DaemonState:
    """What ``$ACAGENT_HOME/daemon.json`` says (never its token)."""

    path: Path
    present: bool
    pid: int | None = None
    alive: bool | None = None
    address: str | None = None
    error: str | None = None

    def describe(self) -> str:
        """One line for the report."""
        if not self.present:
            return "not running (no daemon.json)"
        if self.error:
            return f"unreadable daemon.json ({self.error})"
        where = f" at {self.address}" if self.address else ""
        if self.alive and self.pid is not None and is_stopped(self.pid):  # it answers nothing (F137)
            return f"stopped, pid {self.pid}{where}: answers nothing; `kill -CONT {self.pid}` resumes it"
        if self.alive:
            return f"running, pid {self.pid}{where}"
        return f"not running (stale daemon.json: pid {self.pid} is gone)"


def read_daemon_state(home: Path) -> DaemonState:
    """Read ``home/daemon.json``: pid and whether it is alive, host/port or URL (never the token)."""
    path = home / "daemon.json"
    if not path.exists():
        return DaemonState(path, present=False)
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return DaemonState(path, present=True, error=str(exc))
    pid = data.get("pid")
    pid = pid if isinstance(pid, int) and pid > 0 else None
    address = data.get("url")
    if not isinstance(address, str) and data.get("port"):
        address = f"http://{data.get('host') or '127.0.0.1'}:{data['port']}"
    return DaemonState(
        path,
        present=True,
        pid=pid,
        alive=pid_alive(pid) if pid is not None else False,
        address=redact_url(address) if isinstance(address, str) else None,
    )


def _config_model(home: Path) -> str | None:
    try:
        value = tomllib.loads((home / "config.toml").read_text()).get("model")
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) else None


def resolution_steps(
    settings: Settings, *, flag_model: str | None, env_model: str | None, config_model: str | None
) -> list[tuple[str, str | None]]:
    """The resolution order as ``(rule, model id it would give or None)``, first match wins.

    Order: explicit ``--model`` (or ``ACAGENT_MODEL``) → config file → ``ANTHROPIC_API_KEY`` →
    ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``--base-url`` → the local model.
    """
    p = settings.providers
    return [
        ("--model", flag_model),
        ("ACAGENT_MODEL", env_model),
        ("config file `model`", config_model),
        ("ANTHROPIC_API_KEY", _ANTHROPIC_DEFAULT if p.anthropic_api_key else None),
        (
            "OPENAI_API_KEY / OPENAI_BASE_URL / --base-url",
            _OPENAI_DEFAULT if (p.openai_api_key or p.openai_base_url or p.base_url) else None,
        ),
        ("the local model", _LOCAL_DEFAULT),
    ]


@dataclass
class Report:
    """Everything ``acagent doctor`` prints."""

    model_id: str
    provider: str
    chosen_by: str
    steps: list[tuple[str, str | None]]
    home: Path
    daemon: DaemonState
    settings_lines: list[tuple[str, str]] = field(default_factory=list)
    local_lines: list[tuple[str, str]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - no affinity API (macOS, Windows)
        return os.cpu_count() or 1


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def doctor_report(
    settings: Settings, *, flag_model: str | None = None, env_model: str | None = None
) -> Report:
    """Gather the report (no printing, no network, no model loading).

    Args:
        settings: from :func:`~acagent.settings.load_settings`.
        flag_model: the ``--model`` flag, if given (to name the rule that chose the model).
        env_model: ``ACAGENT_MODEL``, if set.
    """
    from acagent.models import find_model, get_model_spec, model_cache_dir
    from acagent.providers._local import default_threads, xllamacpp_available

    model_id = _resolve_model_id(settings)
    steps = resolution_steps(
        settings, flag_model=flag_model, env_model=env_model, config_model=_config_model(settings.home)
    )
    chosen_by = next((rule for rule, value in steps if value == model_id), "settings")
    provider = model_id.partition(":")[0]
    p = settings.providers
    report = Report(
        model_id=model_id,
        provider=provider,
        chosen_by=chosen_by,
        steps=steps,
        home=settings.home,
        daemon=read_daemon_state(settings.home),
    )

    def is_set(value: str | None) -> str:
        return "set" if value else "not set"

    def url(value: str | None) -> str:
        return redact_url(value) if value else "not set"

    report.settings_lines = [
        ("OPENAI_API_KEY", is_set(p.openai_api_key)),
        ("ANTHROPIC_API_KEY", is_set(p.anthropic_api_key)),
        ("OPENAI_BASE_URL", url(p.openai_base_url)),
        ("ANTHROPIC_BASE_URL", url(p.anthropic_base_url)),
        ("--base-url", url(p.base_url)),
        ("MCP servers", _mcp_line(settings)),
    ]

    spec = get_model_spec("smollm2-135m")
    found = find_model(spec, home=settings.home, explicit_path=p.local_model_path)
    xll_version = _dist_version("xllamacpp")
    has_xll = xllamacpp_available()
    threads = p.local_threads or default_threads()
    report.local_lines = [
        (
            "local model",
            f"{spec.name}: available ({found.source}) {found.path}"
            if found
            else f"{spec.name}: not downloaded (cache: {model_cache_dir(settings.home)})",
        ),
        ("xllamacpp", f"installed {xll_version or ''}".rstrip() if has_xll else "not installed"),
        (
            "local threads",
            f"{threads} (providers.local_threads)"
            if p.local_threads
            else f"{threads} (default: max(1, min(4, {_cpus()} CPUs - 1)); set ACAGENT_LOCAL_THREADS)",
        ),
    ]

    if provider == "local":
        if not has_xll:
            report.missing.append("xllamacpp, to run the local model: pip install 'acagent[local]'")
        if found is None and p.local_model_path:
            report.missing.append(f"the file named by providers.local_model_path: {p.local_model_path}")
        elif found is None:
            report.missing.append(
                f"the local model file: acagent models pull {spec.name} (also runs by itself on first use)"
            )
        report.missing.append(
            "a real model (optional): set OPENAI_API_KEY or ANTHROPIC_API_KEY, or pass --model PROVIDER:MODEL"
        )
    elif provider == "openai" and not p.openai_api_key and not (p.base_url or p.openai_base_url):
        report.missing.append(
            "OPENAI_API_KEY, for the OpenAI endpoint (or OPENAI_BASE_URL for a compatible one)"
        )
    elif provider == "anthropic" and not p.anthropic_api_key:
        report.missing.append("ANTHROPIC_API_KEY, for the anthropic provider")
    if report.daemon.present and report.daemon.alive is False and not report.daemon.error:
        report.missing.append(
            f"a live daemon: {report.daemon.path} names pid {report.daemon.pid}, which is gone "
            "(`acagent serve` starts a new one; `acagent chat` runs in-process meanwhile)"
        )
    return report


def _mcp_line(settings: Settings) -> str:
    """The MCP servers this directory would start (configuration only: nothing is started)."""
    from acagent.mcp import load_server_specs

    try:
        specs, warnings = load_server_specs(settings.mcp, settings.home, os.getcwd())
    except (AcagentError, OSError) as exc:
        return f"invalid configuration: {getattr(exc, 'message', exc)}"
    if not specs:
        return "none configured" + (f" ({warnings[0]})" if warnings else "")
    shown = ", ".join(
        f"{s.name} ({s.config.transport}, {s.source}{'' if s.approved else ', not approved'})" for s in specs
    )
    return f"{shown}; `acagent mcp list` starts them and lists their tools"


def _render(report: Report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    version = _dist_version("acagent") or "?"
    console.print(f"[bold]acagent {version}[/] · Python {platform.python_version()} · {sys.executable}")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("provider", report.provider)
    grid.add_row("model", f"{report.model_id}  [dim](chosen by: {report.chosen_by})[/]")
    grid.add_row(
        "data directory", f"{report.home}" + ("" if report.home.exists() else "  [dim](not created yet)[/]")
    )
    grid.add_row("daemon", report.daemon.describe())
    for key, line in report.settings_lines + report.local_lines:
        grid.add_row(key, line)
    console.print(grid)
    console.print("\n[bold]model resolution order[/] (first match wins)")
    for i, (rule, value) in enumerate(report.steps, 1):
        mark = "  [green]← chosen[/]" if rule == report.chosen_by else ""
        console.print(f"  {i}. {rule}: {value or '[dim]not set[/]'}{mark}")
    if report.missing:
        console.print("\n[bold]missing[/]")
        for item in report.missing:
            console.print(f"  - {item}")
    else:
        console.print("\n[green]nothing missing[/]")


@app.command("doctor")
def doctor_command(
    model: Annotated[str | None, typer.Option("--model", "-m", help="PROVIDER:MODEL to check.")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Provider base URL.")] = None,
) -> None:
    """Show the resolved provider and model, data directory, daemon, keys, and what is missing."""
    from acagent.settings import load_settings

    overrides: dict[str, Any] = {"model": model, "base_url": base_url}
    try:
        settings = load_settings(overrides)
    except AcagentError as exc:
        fail(exc.message, 2)
    _render(doctor_report(settings, flag_model=model, env_model=os.environ.get("ACAGENT_MODEL") or None))
