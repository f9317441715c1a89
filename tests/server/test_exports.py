"""``acagent.server.__all__`` names resolve (lazily) to real objects."""

from __future__ import annotations

import importlib


def test_server_all_resolves() -> None:
    server = importlib.import_module("acagent.server")
    for name in server.__all__:
        assert getattr(server, name) is not None, name
    assert sorted(server.__all__) == server.__all__


def test_client_import_does_not_load_fastapi() -> None:
    import subprocess
    import sys

    code = "import sys, acagent.client._remote; print('fastapi' in sys.modules, 'uvicorn' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]
