"""Public surface of acagent.tools: __all__, the contract tools, the registration hook."""

from __future__ import annotations

import pytest

import acagent.tools as tools
from acagent.tools._testing import NoopProbeTool

pytestmark = pytest.mark.anyio

CONTRACT = {"shell", "read_file", "write_file", "edit_file", "list_dir", "glob", "ask_user"}


def test_all_names_exist_and_are_sorted():
    for name in tools.__all__:
        assert hasattr(tools, name), name
    assert list(tools.__all__) == sorted(tools.__all__)


def test_default_tools_are_the_contract_tools():
    found = tools.default_tools()
    assert set(found) == CONTRACT
    for name, tool in found.items():
        assert tool.name == name
        schema = tool.parameters_schema()
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False
        for prop in schema["properties"].values():
            assert prop.get("description"), (name, prop)


def test_flags():
    found = tools.default_tools()
    assert {n for n, t in found.items() if t.read_only} == {"read_file", "list_dir", "glob", "ask_user"}
    assert {n for n, t in found.items() if t.idempotent} == {"read_file", "write_file", "list_dir", "glob"}
    assert [n for n, t in found.items() if t.interactive] == ["ask_user"]


async def test_noop_probe_is_registered_only_on_request(make_ctx):
    assert "noop_probe" not in tools.default_tools()
    probe = NoopProbeTool()
    tools.register_tool(probe)
    try:
        registered = tools.default_tools()["noop_probe"]
        assert registered is probe
        args, error = tools.validate_arguments(probe, {})
        assert error is None
        assert tools.validate_arguments(probe, {"x": 1})[0] is None
        result = await probe.run(args, make_ctx())
        assert result.status == "ok"
        assert probe.calls == 1
        assert probe.received == [{}]
        assert probe.parameters_schema()["properties"] == {}
    finally:
        tools.unregister_tool("noop_probe")
    assert "noop_probe" not in tools.default_tools()


def test_contract_names_cannot_be_replaced():
    class Fake(NoopProbeTool):
        name = "shell"

    with pytest.raises(ValueError):
        tools.register_tool(Fake())
