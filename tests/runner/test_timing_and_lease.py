"""Timing constants are validated against each other; a worker that loses its lease stops."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from acagent.errors import ConfigError
from acagent.runner import SessionRegistry
from acagent.settings import Timing, load_settings
from acagent.testing import Reply, ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("field", "value", "relation"),
    [
        ("lease_renew_s", 20.0, "lease_renew_s < lease_ttl_s / 2"),
        ("tool_redelivery_idle_s", 10.0, "tool_redelivery_idle_s > tool_timeout_s"),
        ("llm_idle_timeout_s", 400.0, "llm_idle_timeout_s < llm_timeout_s"),
        ("busy_timeout_ms", 100, "busy_timeout_ms >= 5000"),
    ],
)
def test_inconsistent_timing_names_the_violated_relation(field: str, value: float, relation: str) -> None:
    with pytest.raises(ConfigError) as info:
        Timing(**{field: value}).check()
    assert relation in info.value.message


def test_timing_from_env_is_validated(tmp_path: Path) -> None:
    """ACAGENT_TIMING_* overrides go through the same check at start-up."""
    with pytest.raises(ConfigError, match="lease_renew_s < lease_ttl_s / 2"):
        load_settings({"home": str(tmp_path)}, env={"ACAGENT_TIMING_LEASE_TTL_S": "5"})
    s = load_settings(
        {"home": str(tmp_path)}, env={"ACAGENT_TIMING_LEASE_TTL_S": "5", "ACAGENT_TIMING_LEASE_RENEW_S": "1"}
    )
    assert s.timing.lease_ttl_s == 5


def test_config_file_errors_are_clear(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("model = \n")
    with pytest.raises(ConfigError, match=r"config\.toml"):
        load_settings({"home": str(tmp_path)}, env={})
    (tmp_path / "config.toml").write_text("unknown_key = 1\n")
    with pytest.raises(ConfigError, match="unknown_key"):
        load_settings({"home": str(tmp_path)}, env={})


async def test_worker_that_loses_its_lease_aborts_and_writes_nothing_more(tmp_path: Path) -> None:
    """Another worker takes the lease mid-call: the LLM call is aborted, no zombie write lands."""
    s = load_settings(
        {"home": str(tmp_path / "h")},
        env={"ACAGENT_TIMING_LEASE_TTL_S": "0.6", "ACAGENT_TIMING_LEASE_RENEW_S": "0.2"},
    )
    model = ScriptedModel([Reply(text="slow answer", delay_s=30)])
    ws = tmp_path / "w"
    ws.mkdir()
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        row = await reg.create_session(ws)
        runner = await reg.get_runner(row.id)
        await runner.step("hi")
        with anyio.fail_after(5):
            while not model.requests:
                await anyio.sleep(0.02)
        # Simulate a takeover by another process: bump the fencing token under a new owner.
        await reg.journal._run(
            lambda db: db.execute(
                "UPDATE session SET lease_owner = 'other', fencing_token = fencing_token + 1 WHERE id = ?",
                (row.id,),
            )
        )
        before = (await reg.journal.get_session(row.id)).last_seq
        with anyio.fail_after(5):
            await runner.wait()
        after = await reg.journal.get_session(row.id)
        assert after.last_seq == before, "the zombie wrote nothing after losing the lease"
        assert after.lease_owner == "other"


async def test_cancel_flag_set_by_another_process_interrupts_the_turn(tmp_path: Path) -> None:
    """Another process sets the journal's cancel flag: the running turn ends cancelled within ~1 s."""
    s = load_settings({"home": str(tmp_path / "h")}, env={})
    model = ScriptedModel([Reply(text="slow answer", delay_s=30)])
    ws = tmp_path / "w"
    ws.mkdir()
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        row = await reg.create_session(ws)
        runner = await reg.get_runner(row.id)
        await runner.step("hi")
        with anyio.fail_after(5):
            while not model.requests:
                await anyio.sleep(0.02)
        import sqlite3

        db = sqlite3.connect(s.db_path)
        db.execute("UPDATE session SET cancel_requested = 1 WHERE id = ?", (row.id,))
        db.commit()
        db.close()
        with anyio.fail_after(5):
            await runner.wait()
        after = await reg.journal.get_session(row.id)
        assert after.status == "cancelled"
        assert after.cancel_requested == 0


async def test_worker_that_cannot_renew_for_a_ttl_stops_writing(tmp_path: Path) -> None:
    """The journal stops answering the renewals (a blackholed network, F98): after one TTL
    without a renewal the worker stops its turn without writing — its lease may be another's —
    instead of streaming on and committing later."""
    from acagent.errors import JournalError

    s = load_settings(
        {"home": str(tmp_path / "h")},
        env={"ACAGENT_TIMING_LEASE_TTL_S": "0.6", "ACAGENT_TIMING_LEASE_RENEW_S": "0.2"},
    )
    model = ScriptedModel([Reply(text="slow answer", delay_s=30)])
    ws = tmp_path / "w"
    ws.mkdir()
    async with SessionRegistry.open(s, provider_factory=lambda m: model) as reg:
        row = await reg.create_session(ws)
        runner = await reg.get_runner(row.id)
        await runner.step("hi")
        with anyio.fail_after(5):
            while not model.requests:
                await anyio.sleep(0.02)
        before = (await reg.journal.get_session(row.id)).last_seq

        async def unreachable(*args: object, **kwargs: object) -> None:
            raise JournalError("cannot reach the journal: timed out")

        reg.journal.keep_leases = unreachable  # type: ignore[method-assign]
        with anyio.fail_after(5):
            await runner.wait()
        assert runner.halted is not None  # its watchers were told the turn stopped here
        after = await reg.journal.get_session(row.id)
        assert after.last_seq == before, "nothing written after the renewals failed"
        assert after.status == "running"  # still active: a peer (or a restart) continues it
