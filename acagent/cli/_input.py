"""The chat input line (prompt_toolkit): multi-line editing, history search, completion.

- Enter sends; Alt+Enter (Esc then Enter) inserts a newline, and so does Enter after a trailing
  ``\\`` (the backslash is dropped), for terminals that cannot send Shift+Enter.
- Ctrl-R searches the history (prompt_toolkit's emacs bindings); the history file is owner-only.
- Tab completes slash commands at the start of the line and file paths elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["create_prompt_session"]


def _completer(commands: Iterable[str]) -> Any:
    from prompt_toolkit.completion import Completer, Completion, PathCompleter
    from prompt_toolkit.document import Document

    names = sorted(commands)
    paths = PathCompleter(expanduser=True)

    class ChatCompleter(Completer):
        def get_completions(self, document: Document, complete_event: Any) -> Iterable[Completion]:
            text = document.text_before_cursor
            if text.startswith("/") and " " not in text:
                for name in names:
                    if name.startswith(text):
                        yield Completion(name, start_position=-len(text))
                return
            word = text.split()[-1] if text and not text[-1].isspace() else ""
            if word and ("/" in word or word.startswith((".", "~"))):
                sub = Document(word, len(word))
                yield from paths.get_completions(sub, complete_event)

    return ChatCompleter()


def create_prompt_session(history_path: Path | None, commands: Iterable[str]) -> Any:
    """A ``PromptSession`` for chat input (see module docstring); no history file when None."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("enter")
    def _enter(event: Any) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\") and buffer.complete_state is None:
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
            return
        buffer.validate_and_handle()

    history = FileHistory(str(history_path)) if history_path is not None else InMemoryHistory()
    return PromptSession(
        history=history,
        key_bindings=bindings,
        completer=_completer(commands),
        complete_while_typing=False,
        multiline=False,
    )
