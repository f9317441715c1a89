"""The context digest of each step (``runner/_context.py`` ``ContextBuilder.digest``, the step id's
``digest16``) hashes only the messages that changed since the previous step, found without a
Python loop over the whole context (figure 8: per-call work flat in history)."""

from __future__ import annotations

from acagent.messages import Message, TextPart
from acagent.runner._context import ContextBuilder
from tests.providers.helpers import history


def fresh(messages: list[Message]) -> str:
    return ContextBuilder(messages).digest("sys")


def test_equal_messages_are_not_hashed_again_and_the_digest_is_a_fresh_ones() -> None:
    """A context given as new, equal message objects (a rebuilt list) plus one new message hashes
    only the new one (before, every message whose object changed was hashed again: the whole
    context); after an edit in the middle, from the edit on. Each digest is a fresh builder's."""
    past = history(50)
    builder = ContextBuilder(past)
    assert builder.digest("sys") == fresh(past)
    assert builder.hashed == 200
    copies = [Message.model_validate(m.model_dump()) for m in past]
    assert copies == past and all(a is not b for a, b in zip(copies, past, strict=True))
    builder.messages = [*copies, Message(role="user", parts=[TextPart(text="new")])]
    assert builder.digest("sys") == fresh(builder.messages)
    assert builder.hashed == 201
    edited = list(builder.messages)
    edited[150] = Message(role="user", parts=[TextPart(text="edited")])
    builder.messages = edited
    assert builder.digest("sys") == fresh(edited)
    assert builder.hashed == 201 + 51
    assert builder.digest("other") == ContextBuilder(edited).digest("other")
    assert builder.hashed == 252  # the system prompt is not part of the chain


def test_a_fork_hashes_only_what_it_changed() -> None:
    builder = ContextBuilder(history(20))
    builder.digest("sys")
    fork = builder.fork()
    fork.messages = [*fork.messages, Message(role="user", parts=[TextPart(text="more")])]
    assert fork.digest("sys") == fresh(fork.messages)
    assert fork.hashed == 1
    assert builder.digest("sys") == fresh(history(20))  # the original is untouched
