"""The value classes over ``acagent/_value.py``: dataclasses whose ``__init__`` is written out
(issue 12: no per-class code generation at start-up) behave as the generated ones did."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle

import orjson
import pytest

import acagent.models._windows
import acagent.providers._base
import acagent.store._ops
import acagent.store._rows
import acagent.store._usage
import acagent.store._usage_queries
import acagent.usage._caps
import acagent.usage._pricing
from acagent._text import clean_value
from acagent._value import Frozen, Record
from acagent.providers._base import ModelRequest, TextDelta, Usage
from acagent.store._ops import InsertToolCall, SetStatus, SetTitle, SetTurn, UpdateToolCall
from acagent.store._rows import StepRow

MODULES = [
    acagent.models._windows,
    acagent.providers._base,
    acagent.store._ops,
    acagent.store._rows,
    acagent.store._usage,
    acagent.store._usage_queries,
    acagent.usage._caps,
    acagent.usage._pricing,
]


def _frozen_classes() -> list[type]:
    return [
        value
        for module in MODULES
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Frozen) and value.__module__ == module.__name__
    ]


def test_every_written_out_init_takes_the_fields_with_their_defaults() -> None:
    """A field added to the class body but not to its ``__init__`` (or a default that differs)
    would make ``dataclasses.replace`` and the fields' defaults lie."""
    classes = _frozen_classes()
    assert len(classes) >= 20, classes
    for cls in classes:
        assert dataclasses.is_dataclass(cls), cls
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        fields = dataclasses.fields(cls)
        assert [p.name for p in params] == [f.name for f in fields], cls
        for p, f in zip(params, fields, strict=True):
            expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            assert p.default == expected, (cls, f.name)


def test_frozen_values_compare_hash_repr_and_refuse_assignment() -> None:
    a = SetStatus("running", ("pending",), reason="x")
    b = SetStatus("running", ("pending",), reason="x")
    assert a == b and hash(a) == hash(b) and a is not b
    assert a != SetStatus("done", ("pending",), reason="x")
    assert SetTurn("x") != SetTitle("x")  # another class never equals
    assert repr(a) == "SetStatus(to='running', from_=('pending',), reason='x', turn_id=None, worker=True)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.to = "done"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.reason
    assert dataclasses.replace(a, to="done") == SetStatus("done", ("pending",), reason="x")
    assert copy.copy(a) == a and pickle.loads(pickle.dumps(a)) == a
    assert orjson.loads(orjson.dumps(a)) == {
        "to": "running",
        "from_": ["pending"],
        "reason": "x",
        "turn_id": None,
        "worker": True,
    }


def test_the_checks_of_the_old_post_init_still_run() -> None:
    with pytest.raises(ValueError, match="unknown status"):
        SetStatus("bogus", ("pending",))
    with pytest.raises(ValueError, match="not updatable"):
        UpdateToolCall("c", "done", ("running",), (("nope", 1),))
    with pytest.raises(ValueError, match="non-terminal"):
        dataclasses.replace(UpdateToolCall("c", "running", ("dispatched",)), from_=("done",))


def test_clean_value_still_walks_them() -> None:
    """``acagent/_text.py`` ``clean_value`` copies a frozen dataclass with a NUL inside."""
    op = InsertToolCall("c", "t", "s", 0, "shell", {"command": "a\x00b"}, True)
    cleaned = clean_value(op)
    assert cleaned is not op and "\x00" not in cleaned.arguments["command"]
    assert cleaned.tool_call_id == "c" and cleaned.idempotent is True


def test_mutable_records_compare_and_are_unhashable() -> None:
    row = StepRow("s", "r", "st", "t", "d", 1, "inflight", None, "now", None)
    same = StepRow("s", "r", "st", "t", "d", 1, "inflight", None, "now", None)
    assert row == same and row != dataclasses.replace(row, attempt=2)
    with pytest.raises(TypeError):
        hash(row)
    row.status = "done"
    assert row != same and repr(row).startswith("StepRow(session_id='s', request_id='r'")
    assert isinstance(row, Record) and Usage(1, 2) == Usage(1, 2) and Usage(1, 2).total_tokens == 3


def test_model_request_checks_its_history_when_built() -> None:
    request = ModelRequest(system="s", messages=[], tools=[], request_id="r")
    assert request.max_tokens == 4096 and request.messages == []
    assert TextDelta(0, "hi") == TextDelta(index=0, text="hi", kind="text")
