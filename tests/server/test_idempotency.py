"""``Idempotency-Key`` on a single daemon, and the CLI client that sends one with every input.

Before: a single daemon (SQLite) ignored the header (only the PostgreSQL inbox honoured it) and
the CLI sent none, so a client whose answer was lost could only retry blind: a second turn and a
second paid LLM call, or a 409 for its own turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from acagent.client._discovery import DaemonInfo
from acagent.client._remote import RemoteSessionClient
from acagent.errors import IdempotencyKeyReused
from acagent.server._idempotency import IdempotencyCache
from tests.server.conftest import Daemon
from tests.server.proxy import CutProxy

pytestmark = pytest.mark.anyio


def _user_messages(d: Daemon, sid: str) -> list[str]:
    return [e["payload"]["text"] for e in d.events(sid) if e["type"] == "user.message"]


async def test_concurrent_requests_with_one_key_apply_once_and_share_the_answer() -> None:
    cache = IdempotencyCache(max_keys=10, ttl_s=60)
    calls = 0

    async def apply() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        await anyio.sleep(0.05)
        return {"turn_id": f"turn_{calls}"}

    answers: list[dict[str, Any]] = []

    async def one() -> None:
        answers.append(await cache.apply(("ses_1", "message", "k"), apply))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert calls == 1 and answers == [{"turn_id": "turn_1"}] * 5
    assert await cache.apply(("ses_2", "message", "k"), apply) == {"turn_id": "turn_2"}  # scoped by session


async def test_a_failed_first_request_is_not_kept_and_old_keys_are_dropped() -> None:
    cache = IdempotencyCache(max_keys=2, ttl_s=60)

    async def busy() -> dict[str, Any]:
        raise RuntimeError("session_busy")

    with pytest.raises(RuntimeError):
        await cache.apply(("s", "message", "k"), busy)
    assert len(cache) == 0

    async def ok() -> dict[str, Any]:
        return {"ok": True}

    for key in ("a", "b", "c"):
        await cache.apply(("s", "message", key), ok)
    assert len(cache) == 2  # the oldest ("a") was dropped
    expired = IdempotencyCache(max_keys=10, ttl_s=0.0)
    await expired.apply(("s", "message", "k"), ok)
    await expired.apply(("s", "message", "other"), ok)
    assert len(expired) == 1


async def test_a_key_still_in_flight_is_not_dropped_by_newer_keys() -> None:
    """Before: more new keys than ``max_keys`` during one slow first request dropped its entry,
    and its retry applied the request a second time (a second turn, or a 409 for its own)."""
    cache = IdempotencyCache(max_keys=2, ttl_s=60)
    calls: list[str] = []
    release = anyio.Event()

    async def slow() -> dict[str, Any]:
        calls.append("slow")
        await release.wait()
        return {"turn_id": "turn_slow"}

    async def quick() -> dict[str, Any]:
        calls.append("quick")
        return {"turn_id": "turn_quick"}

    answers: list[dict[str, Any]] = []

    async def first_and_retry() -> None:
        answers.append(await cache.apply(("s", "message", "slow"), slow, "hi"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(first_and_retry)
        await anyio.sleep(0.01)
        for key in ("a", "b", "c"):
            await cache.apply(("s", "message", key), quick, key)
        tg.start_soon(first_and_retry)  # the retry of the slow one
        await anyio.sleep(0.01)
        release.set()
    assert calls.count("slow") == 1
    assert answers == [{"turn_id": "turn_slow"}] * 2
    assert len(cache) == 2


async def test_a_key_reused_with_another_body_is_refused_not_answered() -> None:
    """A message with another text (or an approval of another tool call) under a key already
    used is refused (IETF draft: 422); the first answer stays for true retries."""
    cache = IdempotencyCache(max_keys=10, ttl_s=60)
    applied: list[object] = []

    def fn(body: dict[str, Any]) -> Any:
        async def apply() -> dict[str, Any]:
            applied.append(body)
            return {"turn_id": "turn_1"}

        return apply

    first = {"text": "a"}
    assert await cache.apply(("s", "message", "k"), fn(first), first) == {"turn_id": "turn_1"}
    with pytest.raises(IdempotencyKeyReused, match="different request body"):
        await cache.apply(("s", "message", "k"), fn({"text": "b"}), {"text": "b"})
    assert await cache.apply(("s", "message", "k"), fn(dict(first)), dict(first)) == {"turn_id": "turn_1"}
    assert applied == [first]


def test_a_retried_message_with_its_key_gets_the_first_turn(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    headers = {"Idempotency-Key": "retry-1"}
    first = d.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    again = d.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert first.status_code == again.status_code == 202, (first.text, again.text)
    assert again.json()["turn_id"] == first.json()["turn_id"]
    d.wait_status(sid, ("done",), timeout=30)
    late = d.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert late.json()["turn_id"] == first.json()["turn_id"]  # after the turn too: no second turn
    # The key again with another text: 422, not the first 202 for a message never applied.
    reused = d.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say more"}, headers=headers)
    assert reused.status_code == 422, reused.text
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    assert _user_messages(d, sid) == ["say once"]
    other = d.http.post(
        f"/v1/sessions/{sid}/messages", json={"text": "say twice"}, headers={"Idempotency-Key": "2"}
    )
    assert other.status_code == 202 and other.json()["turn_id"] != first.json()["turn_id"]


async def test_the_client_retries_a_lost_answer_without_a_second_turn(
    start_daemon: Any, workspace: Path
) -> None:
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    async with anyio.create_task_group() as tg:
        proxy = CutProxy(d.port, drop_answers=1)
        await tg.start(proxy.run)
        info = DaemonInfo(pid=d.pid, host="127.0.0.1", port=proxy.port, url=f"http://127.0.0.1:{proxy.port}")
        client = RemoteSessionClient(d.home, info, sid, auto_approve=True)
        try:
            turn_id = await client.send("say hello")
        finally:
            await client.aclose()
            tg.cancel_scope.cancel()
    assert proxy.dropped == 1  # the first answer was lost after the daemon applied the request
    await anyio.to_thread.run_sync(lambda: d.wait_status(sid, ("done",), timeout=30))
    assert _user_messages(d, sid) == ["say hello"]
    started = [e for e in d.events(sid) if e["type"] == "turn.started"]
    assert [e["payload"]["turn_id"] for e in started] == [turn_id]


def test_an_empty_key_is_refused_not_shared(start_daemon: Any, workspace: Path) -> None:
    """Before: ``Idempotency-Key: ""`` was a key like any other, so every client sending an empty
    header shared one answer. A key is a non-empty string (the IETF draft's sf-string)."""
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    r = d.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say x"}, headers={"Idempotency-Key": ""})
    assert r.status_code == 422 and r.json()["error"]["code"] == "bad_request", r.text
    assert _user_messages(d, sid) == []


def test_a_retry_after_the_daemon_died_before_answering_gets_the_first_turn(
    start_daemon: Any, workspace: Path, tmp_path: Path
) -> None:
    """Before: the keys lived only in the daemon's memory. A daemon killed after it accepted a
    message but before the answer reached the client forgot the key: the client's retry to the
    next daemon got 409 while the recovered turn ran, and once it had ended the retry started a
    second turn (a second LLM call for one message). The key now rides in the accept commit."""
    home = tmp_path / "home"
    first = start_daemon("--yes", home=home, ACAGENT_CRASH_AT="after_turn_accepted")
    sid = first.create(workspace)["id"]
    headers = {"Idempotency-Key": "lost-answer-1"}
    with pytest.raises(httpx.HTTPError):  # the daemon dies before it answers
        first.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    first.proc.wait(20)
    second = start_daemon("--yes", home=home)
    retry = second.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert retry.status_code == 202, retry.text  # not 409 for its own, recovered turn
    started = [e["payload"]["turn_id"] for e in second.events(sid) if e["type"] == "turn.started"]
    assert retry.json()["turn_id"] == started[0]
    second.wait_status(sid, ("done",), timeout=30)
    late = second.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert late.status_code == 202 and late.json()["turn_id"] == started[0]  # no second turn
    reused = second.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say more"}, headers=headers)
    assert reused.status_code == 422 and reused.json()["error"]["code"] == "idempotency_key_reused"
    assert _user_messages(second, sid) == ["say once"]
    stored = [e["payload"] for e in second.events(sid) if e["type"] == "user.message"]
    assert stored[0]["idempotency_key"] != "lost-answer-1"  # a hash, never the client's key
    assert [e["payload"]["turn_id"] for e in second.events(sid) if e["type"] == "turn.started"] == started


async def test_a_journaled_key_expires_with_the_ttl(tmp_path: Path) -> None:
    from acagent.server._idempotency import journaled_turn, key_digest
    from acagent.store import SqliteJournal

    journal = await SqliteJournal.open(tmp_path / "acagent.db")
    try:
        row, _ = await journal.create_session(cwd="/tmp", model="test:scripted", title=None)
        payload = {"turn_id": "turn_a", "text": "hi", "idempotency_key": key_digest("k")}
        await journal.commit_unfenced(row.id, [("user.message", payload)], reason="test")
        assert await journaled_turn(journal, row.id, "k", "hi", ttl_s=60) == "turn_a"
        assert await journaled_turn(journal, row.id, "other", "hi", ttl_s=60) is None
        assert await journaled_turn(journal, row.id, "k", "hi", ttl_s=-1) is None  # expired
        with pytest.raises(IdempotencyKeyReused):
            await journaled_turn(journal, row.id, "k", "bye", ttl_s=60)
    finally:
        await journal.aclose()


def test_two_keys_on_one_request_are_refused(start_daemon: Any, workspace: Path) -> None:
    """Before: two ``Idempotency-Key`` headers were accepted and the first silently used, so a
    client (or a proxy that added one) could not know which key its retry had to repeat."""
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    two = [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    for path, body in (
        (f"/v1/sessions/{sid}/messages", {"text": "say x"}),
        (f"/v1/sessions/{sid}/cancel", {}),
        (f"/v1/sessions/{sid}/approvals/call_1", {"decision": "allow"}),
    ):
        r = d.http.post(path, json=body, headers=two)
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request", (path, r.text)
        assert "one Idempotency-Key" in r.json()["error"]["message"]
    assert _user_messages(d, sid) == []
    one = d.http.post(
        f"/v1/sessions/{sid}/messages", json={"text": "say x"}, headers={"Idempotency-Key": "a"}
    )
    assert one.status_code == 202, one.text


def test_a_key_reused_with_another_auto_approve_is_refused_after_a_restart_too(
    start_daemon: Any, workspace: Path, tmp_path: Path
) -> None:
    """F135. Before: the journal kept only the key and the text, so after a restart a retry with
    the same text but another ``auto_approve`` got the first turn's id (202, a request reported as
    applied that never was), where the daemon that took the first one answered 422."""
    home = tmp_path / "home"
    first = start_daemon(home=home)
    sid = first.create(workspace)["id"]
    headers = {"Idempotency-Key": "auto-flag-1"}
    sent = first.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert sent.status_code == 202, sent.text
    first.wait_status(sid, ("done",))
    flipped = {"text": "say once", "auto_approve": True}
    before = first.http.post(f"/v1/sessions/{sid}/messages", json=flipped, headers=headers)
    assert before.status_code == 422, before.text
    first.kill()
    second = start_daemon(home=home)
    after = second.http.post(f"/v1/sessions/{sid}/messages", json=flipped, headers=headers)
    assert after.status_code == 422 and after.json()["error"]["code"] == "idempotency_key_reused", after.text
    same = second.http.post(f"/v1/sessions/{sid}/messages", json={"text": "say once"}, headers=headers)
    assert same.status_code == 202 and same.json()["turn_id"] == sent.json()["turn_id"]
    other = {"Idempotency-Key": "auto-flag-2"}
    on = second.http.post(f"/v1/sessions/{sid}/messages", json=flipped, headers=other)
    assert on.status_code == 202, on.text
    second.wait_status(sid, ("done",))
    second.kill()
    third = start_daemon(home=home)
    again = third.http.post(f"/v1/sessions/{sid}/messages", json=flipped, headers=other)
    assert again.status_code == 202 and again.json()["turn_id"] == on.json()["turn_id"]
    assert _user_messages(third, sid) == ["say once", "say once"]
