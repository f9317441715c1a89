"""The request-size estimate before each call (``runner/_window.py`` ``RequestEstimator``) looks
only at the messages after the prefix it shares with the last list it sized (figure 8: per-call
work flat in history)."""

from __future__ import annotations

from acagent.messages import Message, TextPart
from acagent.runner._window import RequestEstimator
from tests.providers.helpers import history


class Counting(RequestEstimator):
    """The real estimator, counting the messages it looks at."""

    def __init__(self) -> None:
        super().__init__()
        self.looked = 0

    def message_bytes(self, message: Message) -> int:
        self.looked += 1
        return super().message_bytes(message)


def sized(messages: list[Message]) -> int:
    return RequestEstimator().request_bytes("sys", messages)


def test_a_replaced_last_message_is_the_only_one_sized_again() -> None:
    """A grown list, a replaced last message (before: every message looked at again), an edit in
    the middle: only what follows the shared prefix is looked at; every total is a fresh one's."""
    past = history(50)
    estimator = Counting()
    assert estimator.request_bytes("sys", past) == sized(past)
    assert estimator.looked == 200
    grown = [*past, Message(role="user", parts=[TextPart(text="new")])]
    assert estimator.request_bytes("sys", grown) == sized(grown)
    assert estimator.looked == 201
    replaced = [*past, Message(role="user", parts=[TextPart(text="new, and a queued message")])]
    assert estimator.request_bytes("sys", replaced) == sized(replaced)
    assert estimator.looked == 202
    edited = list(replaced)
    edited[100] = Message(role="user", parts=[TextPart(text="edited")])
    assert estimator.request_bytes("sys", edited) == sized(edited)
    assert estimator.looked == 202 + 101
    assert estimator.request_bytes("sys", edited[:10]) == sized(edited[:10])  # a compaction's shorter list
    assert estimator.looked == 303
