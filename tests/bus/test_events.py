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


_SAMPLES = [
    ("tool.started", {"turn_id": "turn_a", "tool_call_id": "c1", "name": "shell", "pid": None}),
    ("session.status", {"turn_id": "turn_a", "status": "running", "previous": "done"}),
    ("assistant.message", {"turn_id": "t", "text": "hi", "message": {"role": "assistant", "parts": []}}),
    ("approval.requested", {"turn_id": "t", "tool_call_id": "c", "name": "shell", "arguments": {"c": [1]}}),
    ("tool.result", {"tool_call_id": "c", "name": "n", "status": "ok", "content": "x", "is_error": False}),
    ("user.message", {"turn_id": "t", "text": "a", "extra_field": {"kept": True}}),  # extra fields are kept
]


@pytest.mark.parametrize(("event_type", "fields"), _SAMPLES)
def test_make_payload_is_model_validate_then_model_dump(event_type: str, fields: dict[str, object]) -> None:
    """make_payload calls the model's validator and serializer itself: the same payload as the
    public model_validate + model_dump(mode="json", exclude_none=True), defaults and extras included."""
    from acagent.events import EVENT_TYPES, make_payload

    expected = EVENT_TYPES[event_type].model_validate(fields).model_dump(mode="json", exclude_none=True)
    expected.pop("type", None)
    assert make_payload(event_type, **fields) == expected


def test_make_payload_still_refuses_what_does_not_fit() -> None:
    from acagent.events import make_payload

    with pytest.raises(pydantic.ValidationError):
        make_payload("tool.result", tool_call_id="c", name="n", status="maybe", content="x", is_error=False)
    with pytest.raises(pydantic.ValidationError):
        make_payload("user.message", turn_id="t")  # no text
    failed = make_payload("turn.failed", turn_id="t", error_type="provider_error", message="m")
    assert failed["type"] == "provider_error" and "error_type" not in failed
