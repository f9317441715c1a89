"""Findings for failed targets, written from this benchmark's profiles and the code (shown only on FAIL).

Keys are target names (prefixes). The text names functions and files, not numbers: the numbers
are in the generated tables and profiles next to it, so a finding cannot go stale silently — it
disappears when its target passes.
"""

from __future__ import annotations

FINDINGS: dict[str, str] = {
    "overhead per turn vs LangGraph": """
**Finding (figure 1).** The turn is O(history) and does ~20 small transactions.

- *Grows with history* — at long histories the profile is led by `context_digest()` (`acagent/messages.py`),
  called by `AgenticLoop.llm_step()` (`acagent/runner/_loop.py`) on every LLM step: it `model_dump`s,
  `json.dumps(sort_keys=True)` and hashes the whole context (`iterencode`, `SchemaSerializer.to_python`).
  Next, `InProcessRunner.step()` (`acagent/runner/_runner.py`) sets `_loaded = False` and calls
  `load()` on every turn, so `SqliteJournal.context_events()` (`acagent/store/_journal.py`) re-reads the latest
  checkpoint plus the tail and `ContextBuilder.apply_raw()` (`acagent/runner/_context.py`) re-validates every
  message with pydantic (`orjson.loads` and `validate_python` lead the own-time list at long histories), although
  the runner's context is already current: `SessionWriter.commit()` folds every committed event into it. And
  `AgenticLoop._commit_response()` loads every `tool_call` row of the session (`journal.tool_calls(session_id)`)
  to check id uniqueness.
- *Constant part* — about 20 writer-thread round trips per turn (the count is printed above): lease, accept,
  open-call queries, `step_attempts`, `step.started`, the delta flush, the response commit, tool start and result,
  completion, checkpoint check, lease release — each an aiosqlite thread hop plus a 4 KiB-page WAL append, which is
  also why acagent writes ~300 KB per turn where the naive JSON file writes the file once. Read-only queries
  (`tool_calls`, `step_attempts`) use the write connection and queue behind writes. `Tool.parameters_schema()`
  (`acagent/tools/_base.py`) regenerates the pydantic JSON schema of every tool on every LLM step.

**Fixes, in order of effect.** (1) Keep a running digest in `ContextBuilder` (hash-chain each folded message;
or identify the step by `(checkpoint_seq, last_seq)`), instead of hashing the full context per step. (2) In
`step()`, skip `load()` when the row's `last_seq` equals the runner's own last committed seq (reload only if
another process wrote). (3) Look up only the new ids in
`_commit_response` (`WHERE tool_call_id IN (…)`). (4) Cache tool schemas per tool class. (5) Fewer transactions per
step, as DESIGN.md asks ("one durable commit per step"): fold `acquire_lease` + `_accept` (+ title), and
`step.started` into the previous commit, and serve the read-only queries from the in-memory state or the read
connection. (1)–(4) make the turn flat in history; reaching 1/10 of LangGraph at history 10 additionally needs
(5): 20 commits × acagent's commit latency of figure 3 already exceed a tenth of LangGraph's turn at history 10.
""",
    "resume flat with checkpoints": """
**Finding (figure 2).** The breakdown columns show where resume grows: `get_runner` and `load`.

- `SessionRegistry.get_runner()` → `_start_transcript()` → `_repair_transcript()` (`acagent/runner/_registry.py`)
  reads the whole transcript (`TranscriptWriter.read()` → `parse_transcript()` in `acagent/store/_transcript.py`),
  parsing *and pydantic-validating every line* (`orjson.loads` + `Event` validation per record, the top of the
  own-time list) to compare it with the journal. It is O(session length) on every wake and dominates the profile
  at 10,000 events; checkpoints make it worse, not better, since they are in the transcript too (compare the
  transcript sizes with and without checkpoints).
- `InProcessRunner.load()` reads one checkpoint + tail (flat in *events*), but the checkpoint holds the full
  context and `ContextBuilder.apply_raw()` validates every message of it (`MESSAGES_ADAPTER.validate_python`):
  O(context size).

**Fixes.** (1) In `_repair_transcript`, read only the transcript's tail: seek back from the end to the last
complete line, parse that one record for its seq, and compare with the journal's `last_seq`; fall back to the full
`read_transcript` only when the tail is torn or the file is shorter than expected (size recorded in the session
row). That removes the dominant term. (2) For `load`, keep the checkpoint's message list as validated-once JSON
(e.g. `model_construct` / `TypeAdapter.validate_json` on the raw payload bytes instead of `orjson.loads` +
`validate_python` per message), or defer building `Message` objects until the first LLM step. What is left after
(1) is linear in the *context* (not the event count); a resume that is truly flat needs context compaction, which
the design does not have yet.
""",
    "durable commit vs raw WAL commit": """
**Finding (figure 3).** Two costs, both visible in the table and the two-thread profile above.

- *The thread hop*: `SqliteJournal._run()` (`acagent/store/_journal.py`) sends every transaction to aiosqlite's
  worker thread (queue `put` → worker wakes → `call_soon_threadsafe` writes the self-pipe → the event loop wakes).
  The "aiosqlite NORMAL" row — the raw commit through the same hop — is already ~3× the raw commit on its own, so
  no design that hops once per commit can meet ≤ 3×. In the writer thread's profile `socket.send` (the self-pipe
  write, waiting for the GIL held by the event loop) typically costs more than SQLite's `execute`.
- *The transaction*: `SqliteJournal.commit()`'s `tx` runs five statements (BEGIN IMMEDIATE, SELECT of the session
  row for `last_seq`/fencing token/status, INSERT, UPDATE session, COMMIT) and builds an `Event` per row; the
  "no hop" row measures it alone.

**Fixes.** (1) Run `durability="normal"` commits inline on the event-loop thread with a stdlib connection (a
20–40 µs WAL append blocks the loop for less than the hop costs) or batch commits from all sessions into one
transaction per hop (group commit in one writer task). (2) Fold the SELECT into the UPDATE:
`UPDATE session SET last_seq = last_seq + ? … WHERE id = ? AND fencing_token = ? RETURNING last_seq, status,
cancel_requested, tail_bytes` (SQLite ≥ 3.35; this machine has 3.40), leaving BEGIN, UPDATE…RETURNING, INSERT,
COMMIT.
""",
    "bus vs raw stream": """
**Finding (figure 4).** See the profile: `RunnerEventBus.publish()` (`acagent/bus/_bus.py`) copies the subscriber
list per event and updates per-subscriber counters, and `Subscription._iter()` adds an async-generator layer per
delivered event. Fix: iterate `self._subs` directly (removals are deferred to after the loop) and let callers
iterate the receive stream directly.
""",
    "concurrent sessions": """
**Finding (figure 5).** Both threads that serve all sessions saturate, the event loop first. The event loop needs
~5 ms of CPU per turn (the "CPU per turn" column), so one process finishes at most ~200 turns/s where 1,000
sessions with 1 s model calls offer 1,000 turns/s; every turn then queues behind the other sessions' loop work,
before its model request (the "where the added latency sits" line) and after. The journal writer thread (second
profile) splits its time between waiting for work (`SimpleQueue.get`) and SQLite's `execute` for the ~20 small
transactions per turn. On this shared machine the process also gets less than a core (CPU column), which
stretches the queue further. Where the loop's time goes (event-loop profile):

- `AgenticLoop._tool_definitions()` → `Tool.parameters_schema()` (`acagent/runner/_loop.py`,
  `acagent/tools/_base.py`): pydantic regenerates every tool's JSON schema on every LLM step
  (`pydantic/json_schema.py` in the own-time list) — the largest single item per turn;
- the transcript pump (`SessionRegistry._start_transcript.pump` → `TranscriptWriter.sync()` and `write()` in
  `acagent/store/_transcript.py`): several `flock`, `stat` and `fstat` calls per event, with `fcntl.flock` at the
  top of the own-time list;
- `SessionRegistry.busy_count()` (`acagent/runner/_registry.py`) scanning every runner's `is_busy` on each
  `start_turn`: O(N) per turn, O(N²) per wave (the `<genexpr>` and `is_busy` call counts);
- ~20 aiosqlite round trips per turn (figure 1 counts 24 for a turn with a tool call), each a future, a queue `put` and a wake-up on the loop;
  `InProcessRunner.load()` on every `step()`; `_renew_loop` polling `cancel_requested` once a second per running
  session.

**Fixes.** (1) Cache tool schemas (per tool class, or once per runner). (2) Let the transcript pump drain what is
queued (`receive_nowait`) and write it in one locked `write`, checking the file's state once per batch, not per
event. (3) Keep a running count of busy runners instead of `busy_count()`'s scan. (4) Cut the round trips per turn
(figure 1, fixes 2 and 5) and group commits from all sessions into one transaction per hop. (5) Poll the cancel
flag for all running sessions in one query per interval. A p99 of ≤ 20 ms at 1,000 turns/s offered needs well
under 1 ms of loop CPU per turn (or several processes sharing the sessions); today it is ~5 ms.
""",
    "hibernated sessions": """
**Finding (figure 5, memory).** See the tracemalloc list above: the resident set is mostly imported code, not
sessions (an empty journal costs the same). Keep heavy imports lazy in `acagent/runner` and `acagent/tools`.
""",
    "`acagent --help`": """
**Finding (figure 6).** `acagent --help` spends its time importing and formatting, not in acagent:

- typer renders help with rich when rich is installed: `typer.rich_utils` pulls in `rich.markdown`,
  `markdown_it`, `pygments`, `rich.columns`… (the importtime tables above), then lays out the panels. The
  what-if row `TYPER_USE_RICH=0` is the same command with plain click help; in the cProfile above,
  `typer/rich_utils.py <module>` is most of `format_help`.
- `acagent/cli/_doctor.py` imports `importlib.metadata` (and through it `email`, `zipfile`, `csv`) and `platform`
  at module level, and `acagent/cli/__init__.py` `_load_commands()` imports every command module (run, chat,
  sessions, serve, attach, models, doctor) before typer parses argv.
- What is left is typer itself (the `import typer` row): the floor for a typer CLI on this machine.

**Fixes.** (1) `typer.Typer(..., rich_markup_mode=None)` in `acagent/cli/_app.py` (plain click help; typer then
skips `rich_utils`), or keep rich help but only import it when a help screen is rendered. (2) Move
`from importlib import metadata` and `import platform` inside the doctor command. (3) Register commands lazily (a
click `Group` subclass whose `get_command` imports the command module on demand), so `--help` and each command
import only what they use. With (1)–(3) the command lands close to the `TYPER_USE_RICH=0` row, under the target
while typer's own import stays under ~0.15 s.

Not a target, but the same table shows `acagent run` needing seconds to reach the provider: the importtime table
of a real `acagent run` puts the `openai` SDK first (`acagent/providers/_openai.py` imports `openai`, whose
`openai/__init__` → `openai.types` builds hundreds of pydantic models). Importing only the client
(`from openai import AsyncOpenAI` still loads `openai.types`), or speaking Chat Completions over the `httpx` client
acagent already ships, would remove most of it.
""",
}
