"""Figure 1: overhead per turn (one tool call) at history 10/100/1,000 turns, and bytes written.

Three implementations of the same session run the same turn, interleaved in rounds in one
process so machine noise hits them alike:

- **acagent**: ``SessionRegistry`` + ``InProcessRunner.run_turn`` with a ``ScriptedModel`` (no
  delay: every millisecond of the turn is runtime) and an in-process ``echo`` tool; journal on a
  file (WAL, ``synchronous=NORMAL``, the default), JSONL transcript on.
- **LangGraph**: ``StateGraph(MessagesState)`` with a fake model node and a ``ToolNode`` running the
  same ``echo`` tool, ``AsyncSqliteSaver`` on a file (WAL; set to ``synchronous=NORMAL`` like
  acagent, so neither pays an fsync per commit).
- **naive JSON**: the whole session as one JSON file, rewritten after every turn with
  tmp + fsync + rename.

History is seeded (see :mod:`benchmarks._seed`; LangGraph gets its messages through
``aupdate_state``, the JSON file is written once), then measured turns run on top. "Bytes
written" is ``wchar`` of ``/proc/self/io`` (bytes handed to ``write()``, including SQLite's WAL
frames, checkpoints back into the database and the transcript), per turn; "file growth" is the
growth of the files on disk.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import (
    ASSISTANT_TEXT,
    PREAMBLE_TEXT,
    TOOL_ARG,
    USER_TEXT,
    Figure,
    Profiled,
    Target,
    bench_settings,
    dir_bytes,
    echo_tools,
    io_written,
    scripted_factory,
    stats,
    tmp_home,
)
from benchmarks._seed import Template, make_template, seed_session


class AcagentPeer:
    """One acagent session driven through the registry."""

    name = "acagent"

    def __init__(self, home: Path, template: Template) -> None:
        self.home = home
        self.template = template
        self.stack = AsyncExitStack()

    async def setup(self, history: int) -> None:
        from acagent.runner import SessionRegistry
        from acagent.testing import ScriptedModel

        factory = scripted_factory()
        settings = bench_settings(self.home)
        self.registry = await self.stack.enter_async_context(
            SessionRegistry.open(
                settings, provider_factory=lambda m: ScriptedModel(factory=factory), tools_factory=echo_tools
            )
        )
        row = await self.registry.create_session(self.home, model="test:scripted")
        await seed_session(self.registry.journal, row.id, history, self.template)
        self.runner = await self.registry.get_runner(row.id)
        await self.turn()  # warm-up (and the transcript catches up)
        journal = self.registry.journal
        inner = journal._run
        self.round_trips = {"write": 0, "read": 0}
        self.seq0 = self.runner.bus.last_seq

        async def counting(fn: Any, *, read: bool = False) -> Any:  # counts journal thread hops
            self.round_trips["read" if read else "write"] += 1
            return await inner(fn, read=read)

        journal._run = counting  # type: ignore[method-assign]

    async def turn(self) -> None:
        await self.runner.run_turn(USER_TEXT)

    def disk(self) -> int:
        return dir_bytes(self.home)

    async def close(self) -> None:
        await self.stack.aclose()


class LangGraphPeer:
    """The same session as a LangGraph graph with an AsyncSqliteSaver."""

    name = "LangGraph"

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = {"configurable": {"thread_id": "bench"}}

    async def setup(self, history: int) -> None:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        from benchmarks._langgraph import HumanMessage, build_graph, history_messages

        self.conn = await aiosqlite.connect(self.home / "langgraph.db")
        saver = AsyncSqliteSaver(self.conn)
        await saver.setup()
        await self.conn.execute("PRAGMA synchronous=NORMAL")
        self.app = build_graph().compile(checkpointer=saver)
        self.human = HumanMessage
        if history:
            await self.app.aupdate_state(
                self.config, {"messages": history_messages(history)}, as_node="model"
            )
        await self.turn()  # warm-up

    async def turn(self) -> None:
        await self.app.ainvoke({"messages": [self.human(content=USER_TEXT)]}, self.config)

    def disk(self) -> int:
        return dir_bytes(self.home)

    async def close(self) -> None:
        if hasattr(self, "conn"):
            await self.conn.close()


class JsonFilePeer:
    """The naive baseline: the whole session in one JSON file, rewritten per turn (tmp+fsync+rename)."""

    name = "naive JSON file"

    def __init__(self, home: Path) -> None:
        self.path = home / "session.json"
        self.home = home
        self.state: dict[str, Any] = {"id": "bench", "messages": []}

    async def setup(self, history: int) -> None:
        for _ in range(history):
            self._turn_messages()
        self._save()
        await self.turn()

    def _turn_messages(self) -> None:
        msgs = self.state["messages"]
        msgs.append({"role": "user", "content": USER_TEXT})
        cid = f"call_{uuid.uuid4().hex[:24]}"
        msgs.append(
            {
                "role": "assistant",
                "content": PREAMBLE_TEXT,
                "tool_calls": [{"id": cid, "name": "echo", "arguments": {"text": TOOL_ARG}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": TOOL_ARG})
        msgs.append({"role": "assistant", "content": ASSISTANT_TEXT})

    def _save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(self.state))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    async def turn(self) -> None:
        self._turn_messages()
        self._save()

    def disk(self) -> int:
        return dir_bytes(self.home)

    async def close(self) -> None:
        pass


async def _measure(histories: list[int], turns: int, rounds: int) -> dict[int, dict[str, dict[str, Any]]]:
    template = await make_template()
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for history in histories:
        with tmp_home("f1a") as h1, tmp_home("f1b") as h2, tmp_home("f1c") as h3:
            peers = [AcagentPeer(h1, template), LangGraphPeer(h2), JsonFilePeer(h3)]
            res: dict[str, dict[str, Any]] = {
                p.name: {"ms": [], "cpu_s": 0.0, "written": 0, "growth": 0, "turns": 0} for p in peers
            }
            try:
                for p in peers:
                    await p.setup(history)
                per_round = max(1, turns // rounds)
                for _ in range(rounds):
                    for p in peers:
                        r = res[p.name]
                        w0, d0, c0 = io_written(), p.disk(), time.process_time()
                        for _ in range(per_round):
                            t0 = time.perf_counter()
                            await p.turn()
                            r["ms"].append((time.perf_counter() - t0) * 1000)
                        r["cpu_s"] += time.process_time() - c0
                        r["written"] += io_written() - w0
                        r["growth"] += p.disk() - d0
                        r["turns"] += per_round
                a = peers[0]
                assert isinstance(a, AcagentPeer)
                res["acagent"]["round_trips"] = dict(a.round_trips)
                res["acagent"]["events"] = a.runner.bus.last_seq - a.seq0
            finally:
                for p in peers:
                    await p.close()
            out[history] = res
    return out


def _kb(n: float) -> str:
    return f"{n / 1024:,.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:,.2f} MB"


def run(quick: bool) -> Figure:
    fig = Figure(1, "Overhead per turn (one tool call, model time excluded)")
    histories = [10, 100] if quick else [10, 100, 1000]
    turns, rounds = (6, 2) if quick else (20, 4)
    data = anyio.run(_measure, histories, turns, rounds)
    fig.text.append(
        f"Each cell: median ms per turn (p95, min–max) over {turns} measured turns per implementation and "
        f"history length, run in {rounds} interleaved rounds. The scripted model answers instantly, so the "
        "whole turn is runtime overhead: 2 LLM steps, 1 tool call, ~1 KB messages."
    )
    rows = []
    ratio_rows = []
    worst = 0.0
    for history, res in data.items():
        a = stats(res["acagent"]["ms"])
        lg = stats(res["LangGraph"]["ms"])
        js = stats(res["naive JSON file"]["ms"])
        rows.append([history, a.fmt(), lg.fmt(), js.fmt()])
        ratio = a.median / lg.median
        worst = max(worst, ratio)
        ratio_rows.append([history, f"{ratio:.2f}", f"{a.median / js.median:.2f}"])
    fig.table(["history (turns)", "acagent ms", "LangGraph ms", "naive JSON ms"], rows)
    fig.table(
        ["history (turns)", "acagent / LangGraph", "acagent / naive JSON"],
        ratio_rows,
        "Ratios of medians (same run):",
    )
    crows = []
    for history, res in data.items():
        crows.append(
            [history]
            + [
                f"{res[n]['cpu_s'] * 1000 / res[n]['turns']:.2f}"
                for n in ("acagent", "LangGraph", "naive JSON file")
            ]
            + [f"{res['acagent']['cpu_s'] / res['LangGraph']['cpu_s']:.2f}"]
        )
    fig.table(
        ["history (turns)", "acagent CPU ms", "LangGraph CPU ms", "naive JSON CPU ms", "acagent / LangGraph"],
        crows,
        "CPU time per turn (process CPU, all threads; less sensitive to the machine's load than wall time):",
    )
    wrows = []
    for history, res in data.items():
        cells = [history]
        for name in ("acagent", "LangGraph", "naive JSON file"):
            r = res[name]
            cells.append(f"{_kb(r['written'] / r['turns'])} / {_kb(r['growth'] / r['turns'])}")
        wrows.append(cells)
    fig.table(
        ["history (turns)", "acagent", "LangGraph", "naive JSON"],
        wrows,
        "Bytes per turn: written (`wchar`: journal WAL + database checkpoints + transcript) / file growth on disk:",
    )
    last = data[histories[-1]]["acagent"]
    n = last["turns"]
    fig.text.append(
        f"Per acagent turn (history {histories[-1]}): {last['events'] / n:.0f} events, "
        f"{last['round_trips']['write'] / n:.0f} round trips to the journal's writer thread and "
        f"{last['round_trips']['read'] / n:.0f} to its reader thread (each an aiosqlite thread hop; counted by "
        "wrapping `SqliteJournal._run`)."
    )
    passed = worst <= 0.1
    fig.targets.append(
        Target(
            "overhead per turn vs LangGraph",
            "≤ 1/10 of LangGraph's at every history length (ratio ≤ 0.10)",
            f"worst ratio {worst:.2f} ("
            + ", ".join(f"{h}: {r[1]}" for h, r in zip(data, ratio_rows, strict=True))
            + ")",
            passed,
        )
    )
    if not passed and not quick:
        history = max(
            data,
            key=lambda h: stats(data[h]["acagent"]["ms"]).median / stats(data[h]["LangGraph"]["ms"]).median,
        )
        fig.profiles.append((f"acagent, 20 turns at history {history} (the worst ratio)", _profile(history)))
    return fig


def _profile(history: int, turns: int = 20) -> str:
    """cProfile of ``turns`` acagent turns: the event-loop thread and the journal's writer thread."""
    import cProfile

    from benchmarks._common import format_profile

    async def go() -> str:
        template = await make_template()
        with tmp_home("f1p") as home:
            peer = AcagentPeer(home, template)
            try:
                await peer.setup(history)
                writer = peer.registry.journal._w
                worker = cProfile.Profile()
                await writer._execute(worker.enable)  # enabled on the writer thread itself
                t0 = time.perf_counter()
                with Profiled() as prof:
                    for _ in range(turns):
                        await peer.turn()
                wall = time.perf_counter() - t0
                await writer._execute(worker.disable)
            finally:
                await peer.close()
        return (
            prof.text
            + "\njournal writer thread (aiosqlite worker):\n"
            + format_profile(worker, wall, 14, "acagent", "journal writer thread")
        )

    return anyio.run(go)
