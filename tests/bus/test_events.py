"""The event envelope: the journal's unvalidated construction equals the validated one."""

from __future__ import annotations

import copy
import pickle

import pydantic
import pytest

from acagent.events import Event


def test_a_trusted_envelope_is_the_validated_one() -> None:
    payload = {"turn_id": "turn_0123456789abcdef", "text": "hi", "nested": {"a": [1, 2.5, None]}}
    checked = Event(
        seq=7, ts="2026-12-02T11:07:19.859952Z", session_id="ses_a", type="user.message", payload=payload
    )
    trusted = Event.trusted(7, "2026-12-02T11:07:19.859952Z", "ses_a", "user.message", dict(payload))
    assert trusted == checked and checked == trusted
    assert trusted.__dict__ == checked.__dict__
    assert trusted.model_fields_set == checked.model_fields_set
    assert repr(trusted) == repr(checked)
    assert trusted.to_json_bytes() == checked.to_json_bytes()
    assert trusted.model_dump() == checked.model_dump()
    assert trusted.model_dump_json() == checked.model_dump_json()
    assert pickle.loads(pickle.dumps(trusted)) == checked
    assert copy.copy(trusted) == checked and copy.deepcopy(trusted) == checked
    assert trusted.model_copy(update={"seq": 8}).seq == 8
    with pytest.raises(pydantic.ValidationError):  # frozen like any envelope
        trusted.seq = 8  # type: ignore[misc]
    assert trusted != Event.trusted(8, checked.ts, "ses_a", "user.message", dict(payload))


def test_a_trusted_envelope_keeps_its_payload_object() -> None:
    """The journal passes a copy (as validation made one); the reader's fresh dicts are kept."""
    payload = {"text": "x"}
    assert Event.trusted(1, "t", "s", "user.message", payload).payload is payload
    assert Event(seq=1, ts="t", session_id="s", type="user.message", payload=payload).payload is not payload
