"""WebSocket and SSE streams: identical seq lists, ``since`` cursors, reconnects (F09), pending approvals (F14)."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import websockets

from acagent.client import DaemonInfo, RemoteSessionClient
from tests.server.conftest import ACAGENT, Daemon, wait_for
from tests.server.proxy import CutProxy

pytestmark = pytest.mark.anyio

END = ("turn.completed", "turn.failed", "turn.interrupted")


async def ws_collect(
    d: Daemon, sid: str, since: int, until: Any, *, timeout: float = 20.0
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with anyio.fail_after(timeout):
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since={since}", additional_headers=d.auth, max_size=None
        ) as conn:
            async for frame in conn:
                ev = json.loads(frame)
                out.append(ev)
                if until(ev):
                    return out
    return out


async def sse_collect(
    d: Daemon,
    sid: str,
    since: int,
    until: Any,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 20.0,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Events and the raw field lines (to check ``id:`` and keep-alives)."""
    events: list[dict[str, Any]] = []
    lines: list[str] = []
    with anyio.fail_after(timeout):
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream(
                "GET",
                f"{d.url}/v1/sessions/{sid}/stream",
                params={"since": since},
                headers={**d.auth, **(headers or {})},
            ) as resp,
        ):
            assert resp.status_code == 200
            assert resp.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            async for line in resp.aiter_lines():
                lines.append(line)
                if line == "":
                    if "data" in fields:
                        ev = json.loads(fields["data"])
                        if "id" in fields:
                            assert int(fields["id"]) == ev["seq"]
                            assert fields.get("event") == ev["type"]
                        else:
                            assert ev.get("replay") or fields.get("event") in ("evicted", "closed")
                        events.append(ev)
                        if until(ev):
                            return events, lines
                    fields = {}
                    continue
                if line.startswith(":"):
                    continue
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value
    return events, lines


def _ended(turn_id: str | None = None) -> Any:
    def check(ev: dict[str, Any]) -> bool:
        return ev["type"] in END and (turn_id is None or ev["payload"].get("turn_id") == turn_id)

    return check


class TestFanOut:
    async def test_two_ws_and_one_sse_identical(self, daemon: Daemon, workspace: Path) -> None:
        """Two WebSocket attachers and one SSE client see the same seqs for a turn with tool calls,
        equal to the journal, gapless from since+1."""
        sid = daemon.create(workspace)["id"]
        results: dict[str, list[dict[str, Any]]] = {}

        async def ws_client(name: str) -> None:
            results[name] = await ws_collect(daemon, sid, 1, _ended())

        async def sse_client() -> None:
            results["sse"], _ = await sse_collect(daemon, sid, 1, _ended())

        async with anyio.create_task_group() as tg:
            tg.start_soon(ws_client, "ws1")
            tg.start_soon(ws_client, "ws2")
            tg.start_soon(sse_client)
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: daemon.stats()["sessions"].get(sid, {}).get("attachers") == 3, 10)
            )
            r = await anyio.to_thread.run_sync(
                lambda: daemon.send(sid, "shells echo a ;; echo b", auto_approve=True)
            )
            assert r.status_code == 202
        journal = [e for e in daemon.events(sid) if e["seq"] > 1]
        journal = journal[: next(i for i, e in enumerate(journal) if e["type"] in END) + 1]
        seqs = [e["seq"] for e in journal]
        assert seqs == list(range(2, seqs[-1] + 1))
        for name, events in results.items():
            assert [e["seq"] for e in events] == seqs, name
            assert events == journal, name
        types = [e["type"] for e in journal]
        assert types.count("tool.call") == 2 and types.count("tool.result") == 2

    async def test_since_mid_turn_gets_exactly_the_rest(self, daemon: Daemon, workspace: Path) -> None:
        """An attacher with since = a mid-turn seq (while the turn streams) gets exactly the events after it."""
        sid = daemon.create(workspace)["id"]
        assert daemon.send(sid, "deltas 300 20 3").status_code == 202
        mid = await anyio.to_thread.run_sync(
            lambda: daemon.wait_event(
                sid, lambda e: e["type"] == "assistant.delta" and e["payload"]["text"].startswith("d000050")
            )
        )
        got = await ws_collect(daemon, sid, mid["seq"], _ended())
        journal = [e for e in daemon.events(sid) if e["seq"] > mid["seq"]]
        journal = journal[: len(got)]
        assert [e["seq"] for e in got] == list(range(mid["seq"] + 1, got[-1]["seq"] + 1))
        assert got == journal
        sse, _ = await sse_collect(daemon, sid, mid["seq"], _ended())
        assert sse == got

    async def test_sse_last_event_id_overrides_since(self, daemon: Daemon, workspace: Path) -> None:
        sid = daemon.create(workspace)["id"]
        assert daemon.send(sid, "say hi").status_code == 202
        daemon.wait_status(sid, ("done",))
        events, lines = await sse_collect(daemon, sid, 0, _ended(), headers={"Last-Event-ID": "3"})
        assert events[0]["seq"] == 4
        assert lines[0].startswith(":")  # the opening comment carries no id


class TestReconnect:
    """F09: the client keeps its cursor across cuts."""

    @pytest.mark.slow
    async def test_random_cuts_union_gapless_and_duplicate_free(
        self, daemon: Daemon, workspace: Path
    ) -> None:
        """Cut the connection at 20 random points; the client reconnects with its last seq each time."""
        sid = daemon.create(workspace)["id"]
        async with anyio.create_task_group() as tg:
            proxy = CutProxy(daemon.port)
            await tg.start(proxy.run)
            info = DaemonInfo(
                pid=daemon.pid, host="127.0.0.1", port=proxy.port, url=f"http://127.0.0.1:{proxy.port}"
            )
            client = RemoteSessionClient(daemon.home, info, sid)
            got: list[int] = []
            done = anyio.Event()

            async def consume() -> None:
                async for ev in client.events(0):
                    got.append(ev.seq)
                    if ev.type in END:
                        done.set()
                        return

            tg.start_soon(consume)
            await anyio.to_thread.run_sync(lambda: wait_for(lambda: got, 10))
            r = await anyio.to_thread.run_sync(lambda: daemon.send(sid, "deltas 1500 20 4"))
            assert r.status_code == 202
            rng = random.Random(9)
            cuts = 0
            while cuts < 20 and not done.is_set():
                before = len(got)
                with anyio.move_on_after(5):
                    while len(got) == before and not done.is_set():
                        await anyio.sleep(0.005)
                await anyio.sleep(rng.uniform(0, 0.08))
                if proxy.cut(rst=rng.random() < 0.5):
                    cuts += 1
            with anyio.fail_after(30):
                await done.wait()
            await client.aclose()
            tg.cancel_scope.cancel()
        assert cuts >= 20, f"the turn ended after {cuts} cuts"
        assert client.reconnects >= cuts
        journal = [e["seq"] for e in daemon.events(sid)]
        assert got == journal[: len(got)]
        assert got == list(range(1, got[-1] + 1))
        sinces = [int(line.split("since=")[1].split()[0]) for line in proxy.request_lines]
        assert sinces == sorted(sinces) and sinces[0] == 0
        assert all(s > 0 for s in sinces[1:])

    async def test_idle_cursor_survives_cuts_and_duplicate_frame(
        self, daemon: Daemon, workspace: Path
    ) -> None:
        """F09 (B) and (C): cut twice before any new event; every reconnect still asks since=L; a duplicated
        frame is delivered once."""
        sid = daemon.create(workspace)["id"]
        assert daemon.send(sid, "say first").status_code == 202
        last = daemon.wait_status(sid, ("done",))["last_seq"]
        async with anyio.create_task_group() as tg:
            proxy = CutProxy(daemon.port)
            await tg.start(proxy.run)
            info = DaemonInfo(
                pid=daemon.pid, host="127.0.0.1", port=proxy.port, url=f"http://127.0.0.1:{proxy.port}"
            )
            client = RemoteSessionClient(daemon.home, info, sid)
            got: list[int] = []
            done = anyio.Event()

            async def consume() -> None:
                async for ev in client.events(last):
                    got.append(ev.seq)
                    if ev.type in END:
                        done.set()
                        return

            tg.start_soon(consume)
            for n in (1, 2):
                await anyio.to_thread.run_sync(
                    lambda n=n: wait_for(lambda: proxy.live and len(proxy.request_lines) == n, 10)
                )
                await anyio.sleep(0.2)
                proxy.cut()
            await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: proxy.live and len(proxy.request_lines) == 3, 10)
            )
            await anyio.sleep(0.2)
            proxy.dup_next_frame = True
            assert daemon.send(sid, "say second").status_code == 202
            with anyio.fail_after(20):
                await done.wait()
            await client.aclose()
            tg.cancel_scope.cancel()
        assert [f"since={last}" in line for line in proxy.request_lines[:3]] == [True, True, True]
        assert proxy.duplicated == 1
        assert got == list(range(last + 1, got[-1] + 1))

    async def test_attach_cli_json_through_cuts(
        self, daemon: Daemon, workspace: Path, tmp_path: Path
    ) -> None:
        """`acagent attach --json` prints each seq exactly once across reconnects (proxy in daemon.json)."""
        sid = daemon.create(workspace)["id"]
        async with anyio.create_task_group() as tg:
            proxy = CutProxy(daemon.port)
            await tg.start(proxy.run)
            home = tmp_path / "viaproxy"
            home.mkdir()
            (home / "token").write_text(daemon.token)
            (home / "daemon.json").write_text(
                json.dumps(
                    {
                        "pid": daemon.pid,
                        "host": "127.0.0.1",
                        "port": proxy.port,
                        "url": f"http://127.0.0.1:{proxy.port}",
                    }
                )
            )
            env = {**daemon.env, "ACAGENT_HOME": str(home)}
            proc = await anyio.open_process([ACAGENT, "attach", sid, "--since", "0", "--json"], env=env)
            lines: list[dict[str, Any]] = []
            done = anyio.Event()

            async def read() -> None:
                assert proc.stdout is not None
                buf = b""
                async for chunk in proc.stdout:
                    buf += chunk
                    *complete, buf = buf.split(b"\n")
                    for line in complete:
                        lines.append(json.loads(line))
                        if lines[-1]["type"] in END:
                            done.set()

            tg.start_soon(read)
            await anyio.to_thread.run_sync(lambda: wait_for(lambda: lines, 15))
            assert daemon.send(sid, "deltas 400 20 5").status_code == 202
            for _ in range(5):
                await anyio.sleep(random.uniform(0.1, 0.3))
                proxy.cut()
            with anyio.fail_after(30):
                await done.wait()
            proc.terminate()
            await proc.wait()
            tg.cancel_scope.cancel()
        seqs = [e["seq"] for e in lines]
        assert seqs == list(range(1, seqs[-1] + 1))
        assert len(proxy.request_lines) >= 2


class TestPendingApproval:
    """F14: a pending approval is re-sent to every (re)attaching client."""

    async def test_late_attacher_sees_pending_approval(self, daemon: Daemon, workspace: Path) -> None:
        (workspace / "build").mkdir()
        sid = daemon.create(workspace)["id"]
        assert daemon.send(sid, "shell rm -rf build/").status_code == 202
        req = daemon.wait_event(sid, lambda e: e["type"] == "approval.requested")
        snap = daemon.wait_status(sid, ("waiting_user",))
        L = snap["last_seq"]
        assert L >= req["seq"]
        got = await ws_collect(daemon, sid, L, lambda e: e["type"] == "approval.requested", timeout=5)
        assert got[0]["replay"] is True and got[0]["seq"] == req["seq"]
        assert {k: v for k, v in got[0].items() if k != "replay"} == req
        sse, _ = await sse_collect(daemon, sid, L, lambda e: e["type"] == "approval.requested", timeout=5)
        assert sse[0]["replay"] is True and sse[0]["seq"] == req["seq"]
        # the CLI shows it too, whatever its --since
        proc = subprocess.Popen(
            [ACAGENT, "attach", sid, "--since", str(L), "--json"],
            env=daemon.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            first = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
            assert first["seq"] == req["seq"] and first["replay"] is True
            tcid = req["payload"]["tool_call_id"]
            r = daemon.http.post(f"/v1/sessions/{sid}/approvals/{tcid}", json={"decision": "allow"})
            assert r.status_code == 200
            following = [json.loads(proc.stdout.readline()) for _ in range(3)]  # type: ignore[union-attr]
            assert following[0]["seq"] == L + 1  # nothing missed after the cursor
            assert "approval.resolved" in [e["type"] for e in following[:2]]
        finally:
            proc.terminate()
            proc.wait(10)
        daemon.wait_status(sid, ("done",))
        assert not (workspace / "build").exists()
        results = [e for e in daemon.events(sid) if e["type"] == "tool.result"]
        assert len(results) == 1 and results[0]["payload"]["status"] == "ok"


async def test_sse_keepalive_and_stats(start_daemon: Any, workspace: Path) -> None:
    """Keep-alive comments carry no id; the debug endpoint counts live attachers (and drops them)."""
    d = start_daemon("--keepalive", "0.3")
    sid = d.create(workspace)["id"]
    lines: list[str] = []
    async with (
        httpx.AsyncClient(timeout=None) as client,
        client.stream("GET", f"{d.url}/v1/sessions/{sid}/stream", headers=d.auth) as resp,
    ):
        stats: dict[str, Any] = {}
        async for line in resp.aiter_lines():
            lines.append(line)
            if line == ": keep-alive" and not stats:
                stats = await anyio.to_thread.run_sync(d.stats)  # while the stream is open
            if lines.count(": keep-alive") >= 3:
                break
        assert stats["sessions"][sid]["attachers"] == 1 and stats["connections"]["sse"] == 1
        assert stats["busy_timeout_ms"] >= 5000
    assert lines.count(": keep-alive") >= 2
    assert not any(line.startswith("id:") for line in lines[lines.index(": keep-alive") :])
    await anyio.to_thread.run_sync(lambda: wait_for(lambda: d.stats()["connections"]["sse"] == 0, 5))
