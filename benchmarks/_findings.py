"""Findings for failed targets, written from this benchmark's profiles and the code (shown only on FAIL).

Keys are target names (prefixes). The text names functions and files, not numbers: the numbers
are in the generated tables and profiles next to it, so a finding cannot go stale silently — it
disappears when its target passes.
"""

from __future__ import annotations

FINDINGS: dict[str, str] = {
    "overhead per turn vs LangGraph": """
**Finding (figure 1).** The profile above is taken at the history with the worst ratio. The turn no longer
grows with history (incremental context digest and history check, no context reload per turn, requests sized
by their new messages, tool schemas once per tool class); what is left is a constant cost per turn:

- *Journal transactions*: six per tool turn (the lease with the session row and caps, the accept with the
  first `step.started`, the tool-id check, two step commits, the tool start + result with the next
  `step.started`). What the runner wrote is not
  read back (`Turn.open_calls`, `Turn.fresh_seq`, `Turn.limits` in `acagent/runner/_turn.py`), a quick
  read-only call commits its start with its result (`may_defer_start` in `acagent/runner/_tools.py`) and the
  completion commit gives the lease up (`ReleaseLease`). With `durability = "normal"` they run on the event
  loop's thread (`acagent/store/_sqlite_conn.py`, figure 3): the thread hops printed above are only the calls
  that had to wait for another connection's lock or carried a big payload.
- *The step rows*: `step.started` (`InsertStep`, invariant 2) rides in the preceding commit (the accept, the
  tool result, a compaction before the call: `acagent/runner/_stepstart.py`); its step id names the turn and
  the context's digest (`session|turn|digest16`), not the context's seq, which the journal assigns in that
  very commit.
- *Per-event work on the loop*: the transcript pump (`TranscriptKeeper._start_transcript.pump` →
  `TranscriptWriter.append_next` in `acagent/store/_transcript_writer.py`: one `flock`, `stat` and `fstat` per
  batch the pump drained), `SessionWriter.commit()` (its lock no longer yields to the loop when
  free), the bus, and pydantic validation of payloads (`make_payload` calls the validator and serializer
  without `model_validate`/`model_dump`'s wrappers) and messages. The journal builds its envelopes unvalidated
  (`Event.trusted`), writes a session's row once per commit (the ops' row changes ride in the commit's
  `UPDATE session`, `TxContext.sets` in `acagent/store/_sqlite_ops.py`) and no copy of the last message (m014).
- *Payload compression* (`encode_payload`, `acagent/store/_payload.py`): deflate level 6 of the turn's ~9 KB of
  payloads, ~11 % of the turn's samples in a py-spy profile (the delta's text is compressed again inside the
  message). The stored format and bytes are fixed by the file format; a cheaper level or a faster deflate
  would change them.

**Fixes.** Fold the accept into `Journal.lease_session` (the lease, the session row and its caps in one hop
already), so a turn's start is one round trip, not two.
""",
    "resume flat": """
**Finding (figure 2).** Opening a session reads no message: `SessionPorts.load()` (`acagent/runner/_session.py`)
reads the session row and marks the context stale; the first turn rebuilds it (`SessionWriter.build_context`,
the *build* column). What can still grow with the session is `get_runner` (`SessionRegistry._start_transcript`:
a transcript whose recorded stat does not match is read in full) and noise: the anchor is a few ms, mostly
`SessionRegistry.open` (two connections, pragmas, migration check), so a busy machine moves the ratio — compare
the p95 and min columns before reading a FAIL as growth. The *build* column is O(context) by design (the
first request sends the whole context anyway); with no compaction its SQL read scans every event of the
session for the context types (`SqliteReads.context_events`), which an index or a list of context seqs in
the session row would avoid.
""",
    "bytes written per turn": """
**Finding (figure 3, bytes).** The texts are real prose and code now (a sentence repeated 15× compressed 12× and
would have passed on repetition). With those texts and the same 7 + 2 transactions per turn, the storage layout
of m007 (events in one INTEGER PRIMARY KEY b-tree `session.num << 32 | seq`, no session id per row, payloads
compressed one event at a time with a preset dictionary, `store/_payload.py`) and 512-byte pages took history 50
from 160 KB to 87 KB per turn (11.9× → 6.5×); m008/m009 (`usage` and `step` keyed the same way, without their
`(session_id, request_id)` text indexes) and the runner's folded transactions (6 + 1) to ~70 KB (5.25×).
m010–m013 then took the WAL at history 50–90 from 79.1 to 58.9 frames of 512 bytes per turn (41.4 → 30.8 KB;
the checkpoint's copy into the database file, one page per distinct page of ~1000 frames, 10.3 → 8.7 KB):
m013 −14.7 frames — the session row, ~1.1 KB with its 500-character `last_message` and warnings list, lived
mostly on two overflow pages that every commit rewrote, or, the row's size having changed, freed and
reallocated (~12 freelist-trunk writes per turn); the long texts now sit beside it in `session_text`, one small
row each; m012 −3.0 (`step` rows ~110 bytes instead of ~300, `store/_step_row.py`: a page held one, so every
step started a leaf and rewrote its parent); m011 −1.6 (the daily totals as one `usage_by_day` row per day and
model, kept by a trigger, instead of the `usage_day` index, whose right-edge leaf rebalanced every few calls);
m010 −1.0 (`tool_call` keyed like `step`, no 70-byte text key index). Per turn now (WAL frames named by
`dbstat`, `PRAGMA wal_autocheckpoint = 0`, 40 turns after 50): the event b-tree
24.7 (its last leaf rewritten by each of the ~7 transactions, a new leaf and its parent in most: an overflowing
payload keeps up to 477 bytes in the leaf), the session leaf 7.2, page 1 5.4 (written whenever a transaction
allocates a page), `step_log` 4.6 + its hash index 3.3, `tool_call` 4.3 (1.9 of them its overflow page, rewritten
by both status updates: the compressed arguments are in the updated row) + 1.6, `session_text` 3.0, `usage` 2.9 +
`usage_by_day` 2.1. The transcript holds the events once (~17 KB, 1.3×). What is left, in order of size: (1)
fewer transactions per turn (each costs at least page 1, the session leaf, the event leaf and usually its parent:
~4 frames); (2) compressing a commit's events against each other (an assistant reply's text is in its delta, its
message and `turn.completed`: per-commit compression is ~4.9× on these events against ~3× per event, but an event
would no longer decode on its own); (3) the compaction snapshot (`checkpoint`, ~33 KB every few turns) as a
position. Tried and not kept: `WITHOUT ROWID` tables (m007); `tool_call.arguments` in a row of its own, written
once (its table then started a leaf per call: 59.4 frames against 58.9, m010). The transcript alone is 1.3×, so ≤ 2.5× leaves the journal ~1.2× of the events:
about 20 page writes per turn against ~59. Since then (1) in part: each `step.started` rides in the commit
before it (`acagent/runner/_stepstart.py`: the accept, the last tool result, a compaction before the call), 6 →
4 transactions per tool turn, the WAL at history 50 54.4 → 50.2 frames per turn (checkpoints off, 20 turns):
a folded intent saves the session leaf and the event leaf of its own commit, not the `step_log` leaf and the
`step_log_rid` leaf it writes (a random one: the index is a hash) — without that index the WAL took 3.2
frames fewer per turn (49.6 → 46.4), before the checkpoint's copies. 4 is the floor for this turn while a tool's intent is durable before it runs (invariant 3). m017 then dropped both hash
indexes (`step_log_rid` 3.8 frames per turn, `tool_call_tid` 1.3): a session's newest 32 ids are checked by
their hash in its own key range, older ones in `step_ids` / `tool_call_ids`, which the insert that finds the
window full fills with the whole window in one statement (0.3 + 0.2 frames per turn; `acagent/store/_row_ids.py`):
50.5 → 45.7 frames per turn at history 50, bytes per turn 37.2/48.6/49.4 KB → 35.6/46.2/47.6 KB at history
1/50/200 (2.77/3.56/3.62× → 2.65/3.39/3.49×). m018 put an LLM call's usage in its step's own row,
which the `FinishStep` of the same commit rewrites anyway (`acagent/store/_usage_step.py`; `usage` is a view
of those rows and `usage_log`): the `usage` table's 3.2 frames per turn went, `step_log` 4.5 → 4.6; 45.7 →
42.8 frames, 34.0/43.8/45.3 KB per turn (2.54/3.21/3.32×). Since then (2): a commit of two or more
events is one `event_log` row, a frame, its payloads compressed together (m016, `acagent/store/_frames.py`;
the types as one letter each in the row's `type`, so type filters and counts stay SQL; a one-event commit
keeps its own row): the event b-tree 22.0 → 10.9 frames per turn, 42.8 → 31.6 frames at history 50 (20
turns, checkpoints off), 34.0/44.0/45.5 KB → 29.1/34.9/36.3 KB per turn (2.54/3.23/3.33× → 2.17/2.56/2.66×),
and a five-event commit's CPU ~190 → ~125 µs (one row and one compression instead of five). m019 read a tool call's arguments from its `tool.call` event
(`tool_call.args_seq`, `acagent/store/_tool_args.py`) instead of a compressed copy in the row, which put the
row on an overflow page rewritten by the status update: `tool_call` 4.3 → 2.5 frames, 42.8 → 40.5 per turn,
33.2/42.7/44.0 KB per turn (2.47/3.13/3.22×); on top of m016 (a commit's events in one row) 31.7 → 29.9
frames, 28.3/33.5/34.9 KB per turn at history 1/50/200 (2.11/2.45/2.56×). m020 holds an inflight step in
its session's row, which every commit rewrites anyway, instead of a `step_log` row inserted by the intent's
commit and rewritten by the `FinishStep` commit (`acagent/store/_step_held.py`; the `step` view reads both):
the accept commit and the tool result's commit write no `step_log` leaf, `step_log` 4.6 → 2.6 frames
(`step_ids` 0.3, 0.4 in one run), 29.8 → 27.9 frames per turn at history 50, 28.3/33.5/34.9 KB → 27.1/32.5/33.9 KB per turn
(2.11/2.45/2.56× → 2.02/2.38/2.48–2.49×). At history 200 `step_ids` was 1.5 frames per turn (it grows with the
table: each window move inserts its 32 random hashes into up to 32 of its leaves); a window of 128 rows
(`_row_ids.WINDOW`) shares those rewrites among 4× as many ids: 34.0 → 32.8 KB per turn at history 200
(2.49 → 2.40×), and ~1 ms less CPU per turn there (fewer moves). What is left of the state tables per turn: the
`step_log` leaf of the two finished steps (2.6), the `tool_call` leaf of the intent and of its result (2.5), the
day's `usage_by_day` row per LLM call (2.0); an id table with many more leaves than the window still costs about
one leaf per id at each move.
""",
    "durable commit vs raw WAL commit": """
**Finding (figure 3).** What a `durability = "normal"` commit costs now, on the event loop's thread
(`SqliteJournal._run_short`, `acagent/store/_sqlite_conn.py`; the two rows below it show what it avoids):

- *No thread hop*: the "aiosqlite NORMAL" row (the raw commit through aiosqlite's worker thread) is ~3× the raw
  commit on its own, and more on an idle machine (a thread woken on a halted vCPU waits for the host), so the
  commit runs inline whenever the write connection's thread is idle. It never waits there: the write connection's
  busy timeout is 0 except inside a thread job, so a lock held by another connection (a CLI next to the daemon)
  sends the commit to the thread at once — the "via the thread" row is that path. `durability = "full"` commits
  stay on the thread (their fsync), and so do migrations, imports, big lease batches and WAL checkpoints (the
  write connection's automatic checkpoint is off; the journal checkpoints on the read connection's thread about
  every 1,000 pages).
- *The transaction* (`acagent/store/_sqlite_commit.py`): BEGIN IMMEDIATE, one `UPDATE session` whose WHERE checks
  the fencing token and the `(num, last_seq)` this journal wrote last (a compare-and-set under the write lock; a
  miss — another writer, a stale token, no session — takes the general path that reads the row; the same UPDATE
  names the message's seq as the session's last message, m014, instead of upserting a compressed copy of its text
  into `session_text` as m013 did), the INSERT, and COMMIT. `UPDATE … RETURNING` was tried and cost as much as the
  SELECT it replaced (~5 µs in SQLite 3.40).
- *Python*: ~10 µs per single-event commit, of which payload compression ~4.5 µs (a copy of one primed
  small-window compressor for payloads ≤ 1 KiB, `store/_payload.py`), the `Event` envelope ~1 µs (`Event.trusted`:
  the store's own values, not validated again), `now_ts` ~0.7 µs (formats the second once).

What is left against the raw commit, which writes one row into one 4 KiB page: one more statement (the session
row, ~3 µs) and its page in the WAL at COMMIT, and the Python above: per statement timings in a quiet loop of this
commit were BEGIN 2.5, UPDATE 3.2, INSERT 2.5, COMMIT 5.5 µs (the m013 upsert was 2.1 µs more, plus its
compression). The ratio moves with the machine's load (m014 measured 2.6–2.9× in interleaved quick runs at load
7–11, m013 3.6–3.8× in the same runs); read the p95 and min columns with it.
""",
    "bus vs raw stream": """
**Finding (figure 4).** See the profile: `RunnerEventBus.publish()` (`acagent/bus/_bus.py`) copies the subscriber
list per event and updates per-subscriber counters, and `Subscription._iter()` adds an async-generator layer per
delivered event. Fix: iterate `self._subs` directly (removals are deferred to after the loop) and let callers
iterate the receive stream directly.
""",
    "concurrent sessions": """
**Finding (figure 5).** Both threads that serve all sessions saturate. The event loop's CPU per turn (the
"CPU per turn" column) bounds a process to a few hundred turns/s where 1,000 sessions with 1 s model calls
offer 1,000 turns/s; every turn then queues behind the other sessions' work, before its model request (the
"where the added latency sits" line) and after. On this shared machine the process also gets less than a
core (CPU column), which stretches the queue further. The per-session items of earlier runs are gone (tool
schemas once per tool class: the benchmark's tool was a class made per session; `busy_count()` is a running
count kept by the runners; `clean_value` decides a clean payload in one orjson pass). Where the time goes now:

- the transcript pump (`TranscriptKeeper._start_transcript.pump` → `TranscriptWriter.append_next` in
  `acagent/store/_transcript_writer.py`): `fcntl.flock`, `fstat` and `stat` once per drained batch;
- three journal transactions per one-step turn (the lease with the session row and caps, the accept with
  `step.started`, the reply with `turn.completed` and the lease release), inline on the loop while the
  journal's writer thread is idle and queued on that thread while it is busy (`acagent/store/_sqlite_conn.py`);
- SQLite's `execute`, several statements per commit (each op is its own `UPDATE session` in
  `acagent/store/_sqlite_ops.py`: the accept's `SetTurn`, `SetCancel`, `SetStatus`, `SetTitle`).

**Fixes.** (1) Group commits from all sessions into one
transaction while the writer thread is busy, and fold a commit's session-row ops into the one
`UPDATE session` it already runs. (2) Figure 1's fix (2): one transaction fewer per turn. A p99 of
≤ 20 ms at 1,000 turns/s offered needs well under 1 ms of loop CPU per turn (or several processes sharing the
sessions).
""",
    "metrics + tracing cost per turn": """
**Finding (figure 9).** What metrics and tracing add to a turn is a constant: the Prometheus recorder's
counters and histograms (`acagent/obs/_metrics.py`) and the spans of the turn, its model call and its tool
calls (`acagent/obs/_tracing.py` `span`, used in `runner/_runner.py`, `runner/_reply.py`,
`runner/_tools.py`), whose batch processor encodes and posts them to the OTLP receiver in its own thread —
counted here, since the CPU is the whole process's. The turn it is compared with got cheaper in this wave
(journal commits on the event loop's thread, figure 3), so the same addition is a larger ratio, and the two
phases run one after the other in one process, so the machine's drift between them moves the ratio by
about as much as the margin (compare the p95 column, and repeat with `--only 9`). Next: run the phases
interleaved in fresh processes (off, on, off, on) and report the loop thread's share apart from the
exporter's thread.
""",
    "hibernated sessions": """
**Finding (figure 5, memory).** See the tracemalloc list above: the resident set is mostly imported code, not
sessions (an empty journal costs the same). Keep heavy imports lazy in `acagent/runner` and `acagent/tools`.
""",
    "openai CPU per call flat in history": """
**Finding (figure 8).** A call's own work is O(new messages) except handing the bytes to the kernel:
`BodyEncoder.messages` (`acagent/providers/_body.py`) keeps the previous call's messages, items and marks and
updates them in place (the shared prefix is found with one or two list-slice comparisons in the usual cases,
`_shared`), the shared items are kept joined (`_Runs`) and the body is posted as its parts; on plain http a large
part that the previous request sent too goes from a memory file (`os.sendfile`, `Spool` in
`acagent/providers/_h1_send.py`), so the kernel references its pages instead of copying ≈ 2 MB per call
(`_copy_from_iter` under `send` was ≈ 0.5 ms of a 500-turn call). What still grows is the kernel's per-page work of
that `sendfile` (≈ 0.25 ms at 500 turns). In a failing profile look for `stream.send` of a large part or
`_copy_from_iter` (the spool not used: `Spool.sent_from_files` stays 0 — a stream without a real socket, or a
kernel that refuses the first write), a `bytes.join` of megabytes (a body joined again: `encode_body` instead of
`encode_parts` on the send path), copies of the history in `BodyEncoder.messages` (`list_slice`), and, for the
measurement, the mock's answer time differing between lengths: `benchmarks/_mock_server.py` pads it to
`LATENCY_S`, and a machine so loaded that validating a 500-turn body takes longer makes those calls wait longer
(cold caches after the wait cost ≈ 0.8 ms of CPU per call).
""",
    "1 MB of arguments in 9-byte fragments": """
**Finding (figure 8, argument assembly).** Each fragment is one wire event. The OpenAI adapter reads the commonest
chunk without its general path (`_args_fragment` and `_next_fragment` in `acagent/providers/_openai_stream.py`) and,
after the first, without decoding it (`FragmentTemplate` in `acagent/providers/_stream.py`); the Anthropic adapter
maps `content_block_delta` without a generator; `ArgsBuffer.append` skips a fragment inside a string value in one
regular-expression match. What is left per fragment is spread out: the frozen `ToolCallArgsDelta` (its
`object.__setattr__` per field), `PartsBuilder.feed`, `next_chunk` and the async generator's yield per event, and,
for Anthropic, decoding each event (`orjson.loads`, which is already cheaper than matching a template for these
escape-heavy fragments). The next step would be to map the events one read of the wire delivers together and emit
one argument delta per call for them.
""",
    "one-shot CPU ≤ Codex's": """
**Finding (section P).** Sampled with py-spy (every thread, 8 runs of `acagent run --yes --json` against the
mock) and timed per phase (`acagent/_entry.py settled`, once the session is open): about 75 % of the process's CPU
is start-up — importing and building classes — and the turn with its exit the rest, much of that in worker threads
(httpx's import and client, SQLite). Done: the collector is held off while start-up builds its long-lived objects
(`settled`), event payload models are built per type on first use (`acagent/_payloads.py`), tomllib loads only
with a config file, pydantic's plugin scan of every distribution's entry points is off (`PYDANTIC_DISABLE_PLUGINS`,
`_entry.py`), a built-in provider is found without package metadata (`runner/_sdk.py`), and a plain-http endpoint
builds no TLS context. What is left, in CPU per one-shot run on this machine:

- `@dataclass` code generation, ~65 ms in all (`dataclasses._process_class`; Python 3.11 `exec`s each generated
  method apart): acagent's 49 classes ~28 ms (`store/_ops.py`, `providers/_base.py`, `store/_rows.py`), pydantic's
  own ~15 ms, anyio's ~7 ms, annotated_types' ~6 ms;
- pydantic: its import and first-use imports (~60 ms before the first model) and 36 models (~28 ms:
  `acagent/settings.py` 7 ms, `acagent/_payloads.py` 7.5 ms, `acagent/messages.py` 3 ms);
- typer and click (~25 ms), httpx and httpcore (~35 ms in a worker thread), asyncio and anyio (~25 ms).

**Fixes.** (1) Plain `__slots__` classes for the store ops, rows and provider stream types (most of acagent's
28 ms). (2) Keep pydantic off the one-shot path (plain classes validated at the edges for messages, tool arguments
and settings). (3) A lighter HTTP client for the wire adapters. Each is a few per cent of the run; the ratio is
within ~5 % of parity.
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

Since issue 12, `acagent run` imports only the `run` command's module (`_load_commands(argv)`) and no provider
SDK (the adapters post and parse the wire with httpx); `--help` still registers every command.
""",
}
