"""``acagent sessions list|show|rename|rm``, ``acagent export ID``, ``acagent import FILE``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from acagent.cli._app import app, fail, sessions_app
from acagent.cli._common import build_settings, current_dir, run_async
from acagent.errors import AcagentError, JournalError

__all__ = [
    "archive_command",
    "export_command",
    "import_command",
    "list_command",
    "rename_command",
    "rm_command",
    "show_command",
    "unarchive_command",
]


async def _with_journal(settings: Any, fn: Any) -> Any:
    from acagent.store._select import open_journal

    journal = await open_journal(settings)
    try:
        return await fn(journal)
    finally:
        await journal.aclose()


@sessions_app.command("list")
def list_command(
    all_: Annotated[
        bool, typer.Option("--all", "-a", help="Sessions of every directory, not just this one.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="Show at most N sessions (newest first).")
    ] = None,
    archived: Annotated[
        bool, typer.Option("--archived", help="List the archived sessions (hidden otherwise).")
    ] = False,
) -> None:
    """List sessions of this working directory, newest first (ids are never cut; archived ones hidden)."""
    settings = build_settings()
    if all_:
        cwd = None
    else:
        try:
            cwd = str(Path(current_dir()).resolve())
        except AcagentError as exc:
            fail(exc.message, 2)

    async def go(journal: Any) -> list[dict[str, Any]]:
        rows = await journal.list_sessions(cwd=cwd, limit=limit)
        if limit is not None and any((r.archived_at is not None) != archived for r in rows):
            rows = await journal.list_sessions(
                cwd=cwd
            )  # the filter drops some: the limit is on what is shown
        return [r.to_public() for r in rows if (r.archived_at is not None) == archived][:limit]

    rows = run_async(lambda: _with_journal(settings, go))
    if json_out:
        import orjson

        sys.stdout.write(orjson.dumps(rows).decode() + "\n")
        return
    from acagent.render import sessions_table

    sessions_table(rows, show_cwd=all_)


@sessions_app.command("show")
def show_command(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    full: Annotated[
        bool, typer.Option("--full", help="The whole history, also what compaction summarised.")
    ] = False,
) -> None:
    """Show a session: status, usage and cost, LLM attempts, pending approvals and its history.

    The history starts at the latest compaction's first kept event unless ``--full`` is given.
    """
    settings = build_settings()

    async def go(journal: Any) -> tuple[dict[str, Any], list[Any], list[Any], list[Any]]:
        from acagent.usage import PriceBook

        row = await journal.find_session(session_id)
        steps = await journal.steps(row.id)
        approvals = await journal.pending_approvals(row.id)
        events = await journal.events(row.id, 0)
        info = row.to_public()
        totals = await journal.usage_totals(session_id=row.id, price=PriceBook(settings.pricing).price)
        info.setdefault("usage", {}).update(
            cost_usd=totals.to_dict()["cost_usd"], cost_complete=totals.to_dict()["cost_complete"]
        )
        return info, steps, approvals, events

    info, steps, approvals, events = run_async(lambda: _with_journal(settings, go))
    compactions = [e for e in events if e.type == "context.compacted"]
    info["compactions"] = len(compactions)
    if compactions and not full:
        first = int(compactions[-1].payload.get("first_kept_seq") or 0)
        hidden = sum(1 for e in events if e.seq < first)
        events = [e for e in events if e.seq >= first]
        info.setdefault("warnings", []).append(
            f"{hidden} earlier events were summarised by compaction; `--full` shows them"
        )
    from acagent.render import show_session

    show_session(info, steps, approvals, events)


@sessions_app.command("rename")
def rename_command(
    session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")],
    title: Annotated[str, typer.Argument(help="The new title.")],
) -> None:
    """Give a session a new title."""
    settings = build_settings()
    from acagent.store._manage import rename_session

    full = run_async(lambda: _with_journal(settings, lambda j: rename_session(j, session_id, title)))
    sys.stdout.write(f"renamed {full}\n")


@sessions_app.command("archive")
def archive_command(
    session_ids: Annotated[list[str], typer.Argument(help="Session ids or unique prefixes.")],
) -> None:
    """Archive sessions: hidden from `sessions list` and the web page's list, still resumable."""
    _set_archived(session_ids, True)


@sessions_app.command("unarchive")
def unarchive_command(
    session_ids: Annotated[list[str], typer.Argument(help="Session ids or unique prefixes.")],
) -> None:
    """Bring archived sessions back into the session lists."""
    _set_archived(session_ids, False)


def _set_archived(session_ids: list[str], archived: bool) -> None:
    settings = build_settings()
    from acagent.store._manage import archive_session

    async def go(journal: Any) -> list[str]:
        return [await archive_session(journal, sid, archived) for sid in session_ids]

    for full in run_async(lambda: _with_journal(settings, go)):
        sys.stdout.write(f"{'archived' if archived else 'unarchived'} {full}\n")


@sessions_app.command("rm")
def rm_command(
    session_ids: Annotated[list[str], typer.Argument(help="Session ids or unique prefixes.")],
) -> None:
    """Remove sessions: their events and transcripts (a running one must be cancelled first)."""
    settings = build_settings()
    from acagent.store._manage import remove_session

    async def go(journal: Any) -> list[str]:
        return [await remove_session(journal, sid, settings.sessions_dir) for sid in session_ids]

    for full in run_async(lambda: _with_journal(settings, go)):
        sys.stdout.write(f"removed {full}\n")


EXPORT_PAGE_EVENTS = 32
"""Events read from the journal per page by ``acagent export`` (memory stays bounded by a page)."""
EXPORT_HEADROOM_BYTES = 16 * 1024 * 1024
"""Least free address space ``acagent export`` makes sure of before reading the next page."""


def _holds(exc: BaseException | None, match: Any) -> bool:
    """True if ``exc``, a member of its group or a cause satisfies ``match(e)``."""
    if exc is None:
        return False
    if match(exc):
        return True
    if isinstance(exc, BaseExceptionGroup) and any(_holds(e, match) for e in exc.exceptions):
        return True
    return _holds(exc.__cause__, match)


def _reserve(nbytes: int) -> None:
    """Raise MemoryError unless ``nbytes`` of address space are free (nothing is touched)."""
    import mmap

    try:
        mmap.mmap(-1, nbytes).close()
    except OSError as exc:
        raise MemoryError(f"cannot reserve {nbytes} bytes: {exc.strerror}") from None


def _out_of_memory(exc: BaseException) -> bool:
    # Address-space exhaustion shows as MemoryError, SQLite's "out of memory", or a thread
    # (aiosqlite's, anyio's worker) that cannot start.
    text = str(exc)
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't start new thread" in text


@app.command("export")
def export_command(session_id: Annotated[str, typer.Argument(help="Session id or unique prefix.")]) -> None:
    """Print a session's events as JSONL (the transcript format) on stdout.

    Streamed: the journal is read :data:`EXPORT_PAGE_EVENTS` events at a time and each line is
    written as it is read, so memory does not grow with the session. Big tool outputs appear as
    their head + tail with ``output_ref``; the blob files themselves are not embedded
    (docs/approvals.md, F44). Running out of memory ends with one line naming the session.
    """
    settings = build_settings()
    out = sys.stdout.buffer
    done: dict[str, Any] = {"id": session_id, "events": 0}

    async def go(journal: Any) -> None:
        row = await journal.find_session(session_id)
        done["id"] = row.id
        since, biggest = 0, 0
        while True:
            # Some C extensions (the JSON parser) crash instead of raising MemoryError when an
            # allocation fails: probe for room for the next page first, so running out of memory
            # is a MemoryError here, at a point where it can be reported.
            _reserve(max(EXPORT_HEADROOM_BYTES, 4 * biggest))
            try:
                page = await journal.events(row.id, since, limit=EXPORT_PAGE_EVENTS)
            except JournalError:
                if since >= row.last_seq:  # not a damaged event of this session: the journal itself
                    raise
                page = await _around_damage(journal, row.id, since, row.last_seq, done)
                if isinstance(page, int):  # the events after `since` are unreadable: reported, skipped
                    since = page
                    if since >= row.last_seq:
                        break
                    continue
            if not page:
                break
            size = 0
            for event in page:
                line = event.to_json_bytes() + b"\n"
                size += len(line)
                out.write(line)
            biggest = max(biggest, size)
            done["events"] += len(page)
            since = page[-1].seq
        out.flush()

    try:
        run_async(lambda: _with_journal(settings, go))
        if done.get("skipped"):
            seqs = _seq_ranges(done["skipped"])
            fail(
                f"export of session {done['id']!r}: {len(done['skipped'])} unreadable event(s) skipped"
                f" (seq {seqs}); the other {done['events']} events were exported"
            )
    except (SystemExit, KeyboardInterrupt, typer.Exit):  # typer.Exit: run_async already said it
        raise
    except BaseException as exc:
        if _holds(exc, lambda e: isinstance(e, BrokenPipeError)):
            raise SystemExit(1) from None
        if _holds(exc, _out_of_memory):
            fail(
                f"export of session {done['id']!r} ran out of memory after {done['events']} events; "
                "raise the memory limit and export again"
            )
        fail(
            f"export of session {done['id']!r} failed after {done['events']} events: {type(exc).__name__}: {exc}"
        )


async def _around_damage(
    journal: Any, session_id: str, since: int, last: int, done: dict[str, Any]
) -> list[Any] | int:
    """Read the page after ``since`` one event at a time, because one of them does not decode.

    Returns the events readable before the damaged one (an empty list only if the session ended),
    or, when the event right after ``since`` is unreadable, the last seq to skip: the damaged
    row's (the error's ``detail``, a whole frame, m016), at least ``since + 1``, at most the
    session's ``last`` seq. It is named on
    stderr once (one line per damaged row, however many of its events) and its seqs recorded in
    ``done["skipped"]``.
    """
    good: list[Any] = []
    for _ in range(EXPORT_PAGE_EVENTS):
        try:
            one = await journal.events(session_id, since + len(good), limit=1)
        except JournalError as err:
            if good:
                return good
            detail = err.detail if isinstance(err.detail, dict) else {}
            upto = max(since + 1, min(int(detail.get("last_seq", since + 1)), last))
            if err.message not in done.setdefault("warned", set()):
                done["warned"].add(err.message)
                sys.stderr.write(f"acagent: warning: {err.message}; skipped\n")
            done.setdefault("skipped", []).extend(range(since + 1, upto + 1))
            return upto
        if not one:
            return good
        good.extend(one)
    return good


def _seq_ranges(seqs: list[int]) -> str:
    """``[2, 3, 4, 9]`` as ``"2-4, 9"`` (the first 20 runs, then ``…``)."""
    runs: list[list[int]] = []
    for q in seqs:
        if runs and q == runs[-1][1] + 1:
            runs[-1][1] = q
        else:
            runs.append([q, q])
    text = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:20]]
    return ", ".join(text) + (" …" if len(runs) > 20 else "")


@app.command("import")
def import_command(
    file: Annotated[
        Path, typer.Argument(help="A JSONL transcript (from `acagent export` or the sessions dir).")
    ],
    cwd: Annotated[
        str | None,
        typer.Option(
            "--cwd",
            metavar="DIR",
            help="The session's working directory (default: the recorded one if it exists here, else this one).",
        ),
    ] = None,
) -> None:
    """Import a transcript as a session (damaged lines are reported and skipped)."""
    settings = build_settings()
    from acagent.errors import UserError
    from acagent.store._import import import_transcript
    from acagent.store._workspace import explicit_workspace

    try:  # where its tools will run (store/_workspace.py, F139)
        workspace = None if cwd is None else explicit_workspace(cwd)
    except UserError as exc:
        fail(exc.message, 2)
    with _import_progress(file) as progress:

        async def go(journal: Any) -> Any:
            return await import_transcript(
                journal, file, settings.sessions_dir, progress, workspace=workspace
            )

        result = run_async(lambda: _with_journal(settings, go))
    if result.warning:
        sys.stderr.write(f"acagent: warning: {result.warning}\n")
    if result.cwd_note:
        sys.stderr.write(f"acagent: warning: {result.cwd_note}\n")
    sys.stdout.write(f"imported session {result.session_id} ({result.events} events)\n")


@contextlib.contextmanager
def _import_progress(file: Path) -> Iterator[Any]:
    """A rich progress bar on a terminal's stderr (parse, then journal) for a transcript of 4 MiB
    or more; yields the :data:`acagent.store._import.ImportProgress` callback, or None."""
    try:
        big = file.stat().st_size >= 4 << 20
    except OSError:
        big = False  # the import itself reports an unreadable file
    if not (big and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        tasks = {
            "read": bar.add_task(f"reading {file.name}", total=None),
            "journal": bar.add_task("writing the journal", total=None, start=False),
        }

        def progress(phase: str, done: int, total: int) -> None:
            bar.start_task(tasks[phase])
            bar.update(tasks[phase], completed=done, total=total)

        yield progress
