"use strict";
// State of the open session. `last` is the highest seq rendered: every (re)connect asks for
// since=last, so nothing is lost or shown twice; `seen` drops duplicates (and re-sent approvals).
const S = { sid: null, last: 0, ws: null, gen: 0, backoff: 0, timer: null, seen: new Set(),
            rendered: [], streams: {}, tools: {}, approvals: {}, status: "", reconnects: 0, text: "" };
window.acagent = S;
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- faithful display
// The page's copy of acagent/render/_safe.py `safe_text` (tested against the same corpus,
// tests/render/unsafe_corpus.json): control, bidi, zero-width, other format/invisible characters
// and non-ASCII spaces are shown as escapes (\x1b, \u202e, \U000e0041) and counted per kind.
const SAFE_BIDI = new Set([0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                           0x2066, 0x2067, 0x2068, 0x2069]);
const SAFE_ZW = new Set([0x180E, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF]);
const SAFE_BLANK = new Set([0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800]);
const SAFE_KINDS = { control: "control", bidi: "bidi control", "zero-width": "zero-width",
                     invisible: "invisible/format", space: "non-ASCII space" };
function safeKind(ch) {
  const cp = ch.codePointAt(0);
  if (cp < 0x80) return (cp < 0x20 || cp === 0x7F) && cp !== 9 && cp !== 10 ? "control" : null;
  if (SAFE_BIDI.has(cp)) return "bidi";
  if (SAFE_ZW.has(cp)) return "zero-width";
  if (SAFE_BLANK.has(cp)) return "invisible";
  if (/^[\p{Cc}\p{Zl}\p{Zp}]$/u.test(ch)) return "control";
  if (/^[\p{Cf}\p{Cs}]$/u.test(ch)) return "invisible";
  if (/^\p{Zs}$/u.test(ch)) return "space";
  return null;
}
function safeEscape(ch) {
  const cp = ch.codePointAt(0), h = cp.toString(16);
  if (cp <= 0xFF) return "\\x" + h.padStart(2, "0");
  if (cp <= 0xFFFF) return "\\u" + h.padStart(4, "0");
  return "\\U" + h.padStart(8, "0");
}
// {parts: [[chunk, escaped]], counts: {kind: n}, text, warning}
function safeParts(s) {
  const parts = [], counts = {};
  let plain = "";
  for (const ch of String(s)) {
    const kind = safeKind(ch);
    if (kind === null) { plain += ch; continue; }
    if (plain) { parts.push([plain, false]); plain = ""; }
    parts.push([safeEscape(ch), true]);
    counts[kind] = (counts[kind] || 0) + 1;
  }
  if (plain) parts.push([plain, false]);
  const found = Object.entries(counts).map(([k, n]) => n + " " + SAFE_KINDS[k]).join(", ");
  return { parts, counts, text: parts.map((p) => p[0]).join(""),
           warning: found ? "⚠ hidden characters shown escaped: " + found : null };
}
window.acagentSafe = safeParts;
// A node showing `s` under that rule: escapes in <span class="esc">, text only via textContent.
function safeNode(tag, cls, s) {
  const node = el(tag, cls);
  for (const [chunk, escaped] of safeParts(s).parts) {
    node.append(escaped ? el("span", "esc", chunk) : document.createTextNode(chunk));
  }
  return node;
}
function jsonStrings(v) {
  if (typeof v === "string") return [v];
  if (Array.isArray(v)) return v.flatMap(jsonStrings);
  if (v && typeof v === "object") return Object.entries(v).flatMap(([k, x]) => [k, ...jsonStrings(x)]);
  return [];
}
// What an approval asks (command, question or arguments), escaped, plus the warning if any:
// the page's copy of acagent/render/_approval.py `approval_lines`.
function approvalNodes(p) {
  let raw, warn;
  if (p.kind === "question") raw = p.question || "";
  else if (typeof p.command === "string") raw = "$ " + p.command;
  else {
    raw = JSON.stringify(p.arguments || {}, null, 2);
    const lines = raw.split("\n");
    if (lines.length > 40) raw = lines.slice(0, 40).join("\n") + "\n… (" + (lines.length - 40) + " more lines)";
    warn = safeParts(jsonStrings(p.arguments || {}).join("\n")).warning;
  }
  if (!warn) warn = safeParts(raw).warning;
  const nodes = [safeNode("code", "", raw)];
  if (warn) nodes.push(el("div", "warnline", warn));
  for (const n of (Array.isArray(p.notes) ? p.notes : [])) nodes.push(el("div", "warnline", "! " + safeParts(String(n)).text));
  if (typeof p.always === "string" && p.always) nodes.push(el("div", "always", safeParts(p.always).text));
  return nodes;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) { opts.headers["content-type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  let data = null;
  try { data = await r.json(); } catch (_) {}
  if (r.status === 401) showLogin();
  if (!r.ok) {
    const e = (data && data.error) || { code: "http_" + r.status, message: "HTTP " + r.status };
    const err = new Error(e.message); err.code = e.code; err.status = r.status; err.detail = e.detail;
    throw err;
  }
  return data;
}

function showLogin() {
  if ($("login")) return;
  $("log").replaceChildren($("tpl-login").content.cloneNode(true));
}

function setErr(msg) { $("err").textContent = msg || ""; }

async function listSessions() {
  setErr("");
  const cwd = $("cwd").value.trim();
  localStorage.setItem("acagent.cwd", cwd);
  try {
    const wanted = $("sfilter").value;          // "archived": only those; otherwise they stay hidden
    const q = new URLSearchParams({ archived: wanted === "archived" ? "true" : "false" });
    if (cwd) q.set("cwd", cwd);
    const rows = (await api("GET", "/v1/sessions?" + q.toString()))
      .filter((s) => !wanted || wanted === "archived" || s.status === wanted);
    S.rows = Object.fromEntries(rows.map((s) => [s.id, s]));
    if (S.rows[S.sid]) S.openRow = S.rows[S.sid];
    drawArchive();
    const ul = $("sessions"); ul.replaceChildren();
    for (const s of rows) {
      const li = el("li"); li.dataset.id = s.id;
      if (s.id === S.sid) li.classList.add("active");
      li.append(el("div", "t", s.title || "(untitled)"),
                el("div", "m", s.status + " · " + s.id + " · seq " + s.last_seq +
                                (s.pending_approvals.length ? " · approval pending" : "") +
                                (s.archived ? " · archived" : "")),
                el("div", "m", cwd ? "" : s.cwd));
      li.onclick = () => openSession(s.id);
      ul.append(li);
    }
    if (!rows.length) ul.append(el("li", "m", wanted === "archived" ? "No archived sessions." : "No sessions here yet."));
    listMcp(cwd);
  } catch (e) { setErr(e.message); }
}

async function listMcp(cwd) {            // MCP servers this daemon started (GET /v1/mcp, docs/mcp.md)
  const box = $("mcp"); box.replaceChildren();
  try {
    const data = await api("GET", "/v1/mcp" + (cwd ? "?cwd=" + encodeURIComponent(cwd) : ""));
    if (!data.servers.length) return;
    box.append(el("div", "t", "MCP servers"));
    for (const s of data.servers) {
      box.append(el("div", "m", s.name + " · " + s.state + " · " + s.tools.length + " tools" +
                                 (s.error ? " · " + s.error : "") + (cwd ? "" : " · " + s.cwd)));
    }
  } catch (_) { /* an older daemon without /v1/mcp */ }
}

async function createSession() {
  setErr("");
  const cwd = $("cwd").value.trim();
  try {
    const s = await api("POST", "/v1/sessions", { cwd });
    await listSessions();
    openSession(s.id);
  } catch (e) { setErr(e.message); }
}

function openSession(id) {
  if (S.ws) { S.gen++; S.ws.onclose = null; S.ws.close(); S.ws = null; }
  clearTimeout(S.timer);
  Object.assign(S, { sid: id, last: 0, backoff: 0, failed: "", seen: new Set(), rendered: [], streams: {}, tools: {},
                     approvals: {}, status: "", text: "" });
  $("log").replaceChildren(); $("approvals").replaceChildren();
  Object.assign(ST, { active: false, turn: null, tokens: 0, cost: null, ctx: null }); drawStatus();
  S.openRow = (S.rows && S.rows[id]) || null; drawArchive();
  if (!S.openRow) {                      // not in the list (archived, or another directory): ask
    api("GET", "/v1/sessions/" + encodeURIComponent(id))
      .then((row) => { if (S.sid === id) { S.openRow = row; drawArchive(); } }).catch(() => {});
  }
  $("text").disabled = $("send").disabled = $("cancel").disabled = false;
  for (const li of document.querySelectorAll("#sessions li")) li.classList.toggle("active", li.dataset.id === id);
  $("shead").textContent = "Session " + id;
  $("tools").classList.remove("hidden");
  history.replaceState(null, "", "#" + id);
  connect();
}

function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = cls || ""; }

function connect() {
  if (!S.sid) return;
  const gen = ++S.gen, sid = S.sid;
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host +
              "/v1/sessions/" + encodeURIComponent(sid) + "/attach?since=" + S.last;
  let ws;
  try { ws = new WebSocket(url, ["acagent.v1"]); } catch (e) { scheduleReconnect(gen); return; }
  S.ws = ws;
  setConn((S.reconnects ? "reconnecting… since seq " : "connecting… since seq ") + S.last, "down");
  ws.onopen = () => { if (gen === S.gen) { S.live = true; setConn("live · since seq " + S.last, "up"); } };
  ws.onmessage = (m) => {
    if (gen !== S.gen) return;
    let ev; try { ev = JSON.parse(m.data); } catch (_) { return; }
    S.backoff = 0;
    if (ev.type === "stream.error") {      // the stream failed (F148): show it; a re-attach would fail again
      S.failed = (ev.error && (ev.error.message + " [" + ev.error.code + "]")) || "stream error";
      return;
    }
    if (ev.type === "stream.reset") { S.last = ev.last_seq; return; }  // cursor ahead: go on from last_seq
    if (ev.replay) {                       // a re-sent pending approval: never moves the cursor
      if (!S.seen.has(ev.seq)) { S.seen.add(ev.seq); render(ev); }
      return;
    }
    if (ev.seq <= S.last || S.seen.has(ev.seq)) return;   // duplicate
    S.last = ev.seq; S.seen.add(ev.seq); S.rendered.push(ev.seq);
    render(ev);
  };
  ws.onclose = (c) => {
    if (gen !== S.gen) return;
    S.ws = null; S.live = false; drawStatus();
    if (S.failed || c.code === 1011) {     // an error, not a restart: never reconnect (F148)
      setConn("stream failed: " + (S.failed || c.reason || "daemon error"), "down");
      return;
    }
    setConn("reconnecting… since seq " + S.last + " (" + c.code + (c.reason ? ": " + c.reason : "") + ")", "down");
    scheduleReconnect(gen, c.code);
  };
}

async function scheduleReconnect(gen, code) {
  if (gen !== S.gen) return;
  S.backoff = Math.min(10000, S.backoff ? S.backoff * 2 : 250);
  const delay = S.backoff * (0.75 + Math.random() / 2);
  S.reconnects++;
  if (code === 1006 || code === undefined) {       // handshake refused? tell 404/401 from a drop
    try { await api("GET", "/v1/sessions/" + encodeURIComponent(S.sid)); }
    catch (e) {
      if (e.status === 404 || e.status === 401) { setConn("session unavailable: " + e.message, "down"); return; }
    }
  }
  S.timer = setTimeout(() => { if (gen === S.gen) connect(); }, delay);
}

// ---------------------------------------------------------------- rendering

function add(node) {
  const log = $("log");
  const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
  log.append(node);
  if (stick) log.scrollTop = log.scrollHeight;
  return node;
}
function note(text, cls) { return add(el("div", "note " + (cls || ""), text)); }
function stream(p) {
  const key = (p.step_id || "") + "|" + (p.kind || "text");
  let s = S.streams[key];
  if (!s) {
    s = S.streams[key] = { node: add(el("div", "msg assistant streaming" + (p.kind === "reasoning" ? " reasoning" : ""), "")),
                           text: "", step: p.step_id || "" };
  }
  return s;
}
function dropPartial() {                // llm.retry supersedes the failed attempt's partial text
  for (const [k, s] of Object.entries(S.streams)) {
    if (!s.final) { s.node.remove(); delete S.streams[k]; }
  }
}
function short(v, n) { const t = typeof v === "string" ? v : JSON.stringify(v); return t.length > n ? t.slice(0, n) + " …" : t; }

// Markdown as it streams: re-rendered at most once per frame from the text so far.
function drawMarkdown(s) {
  if (s.pending) return;
  s.pending = true;
  requestAnimationFrame(() => {
    s.pending = false;
    if (s.final) return;
    s.node.classList.add("md"); s.node.replaceChildren(window.acagentMd(s.text));
  });
}

// The live status of a turn, as in the terminal: spinner, phase, elapsed, tokens (and cost).
const ST = { active: false, turn: null, phase: "", started: 0, tokens: 0, cost: null, retryUntil: 0, frame: 0, ctx: null };
// The context fill as the terminal shows it (acagent/render/_status.py fill_text): the runner's
// estimate of the last request (step.started context_tokens / context_window; after a
// compaction its tokens_after) — "ctx 42%", or the tokens alone when the window is unknown.
function ctxFollow(t, p) {
  if (t === "step.started" && Number.isInteger(p.context_tokens)) {
    ST.ctx = { tokens: p.context_tokens, window: p.context_window > 0 ? p.context_window : null };
  } else if (t === "context.compacted" && Number.isInteger(p.tokens_after)) {
    ST.ctx = { tokens: p.tokens_after, window: ST.ctx ? ST.ctx.window : null };
  }
}
function ctxText(c) {
  if (!c) return "";
  if (!c.window) return "ctx " + c.tokens.toLocaleString("en-US") + " tokens";
  const pct = 100 * c.tokens / c.window;
  return "ctx " + (pct >= 1 || c.tokens === 0 ? pct.toFixed(0) + "%" : "<1%");
}
const SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏";
function statusFollow(ev) {
  const p = ev.payload || {}, t = ev.type;
  if (p.turn_id) ST.turn = p.turn_id;  // the turn Cancel targets (a later turn is never cancelled)
  ctxFollow(t, p);
  if (t === "turn.completed" || t === "turn.interrupted" || t === "turn.failed") { ST.active = false; drawStatus(); return; }
  if (t === "turn.started" || t === "user.message" || t === "step.started") {
    if (!ST.active) ST.started = Date.now();
    if (t === "turn.started") ST.started = Math.min(Date.now(), Date.parse(ev.ts) || Date.now());
    ST.active = true; ST.phase = "waiting for the model";
  } else if (!ST.active) return;
  if (t === "assistant.delta") ST.phase = p.kind === "reasoning" ? "thinking" : "streaming";
  else if (t === "tool.call" || t === "tool.started") ST.phase = "running `" + safeParts(p.name || "tool").text + "`";
  else if (t === "approval.requested") ST.phase = p.kind === "question" ? "waiting for your answer" : "waiting for approval";
  else if (t === "tool.result" || t === "assistant.message") ST.phase = "waiting for the model";
  else if (t === "llm.retry") { ST.phase = "retrying"; ST.retryUntil = Date.now() + (p.delay_ms || 0); }
  else if (t === "usage") {
    ST.tokens = (p.session_input_tokens || 0) + (p.session_output_tokens || 0) || ST.tokens + (p.input_tokens || 0) + (p.output_tokens || 0);
    const c = p.session_cost_usd != null ? p.session_cost_usd : p.cost_usd;
    if (typeof c === "number") ST.cost = c;
  }
  drawStatus();
}
function drawStatus() {
  const node = $("status");
  if (!ST.active || !S.live) { node.classList.add("hidden"); node.textContent = ""; return; }
  let phase = ST.phase;
  if (phase === "retrying") { const left = (ST.retryUntil - Date.now()) / 1000; if (left >= 1) phase = "retrying in " + left.toFixed(0) + " s"; }
  const parts = [SPIN[ST.frame++ % SPIN.length] + " " + phase, ((Date.now() - ST.started) / 1000).toFixed(1) + " s"];
  if (ST.tokens) parts.push(ST.tokens.toLocaleString("en-US") + " tokens");
  if (ST.cost != null) parts.push("$" + ST.cost.toFixed(4));
  if (ST.ctx) parts.push(ctxText(ST.ctx));
  parts.push("Cancel to interrupt");
  node.textContent = parts.join(" · ");
  node.classList.remove("hidden");
}
setInterval(() => { if (ST.active) drawStatus(); }, 200);
window.acagentStatus = ST;

function render(ev) {
  statusFollow(ev);
  const p = ev.payload || {};
  switch (ev.type) {
    case "session.created":
      $("shead").textContent = "Session " + ev.session_id + " · " + (p.model || "") + " · " + p.cwd; break;
    case "session.status":
      S.status = p.status; $("hinfo").textContent = "status: " + p.status; break;
    case "user.message": add(el("div", "msg user", p.text)); break;
    case "assistant.delta": {
      const s = stream(p); s.text += p.text; S.text = s.text;
      if (p.kind === "reasoning") s.node.textContent = s.text; else drawMarkdown(s);
      break;
    }
    case "llm.retry":
      dropPartial();
      note("model call failed (" + (p.reason || "error") + "); retrying, attempt " + (p.attempt + 1), "warn"); break;
    case "assistant.message": {
      let key = (p.step_id || "") + "|text";
      if (!S.streams[key]) {          // e.g. the partial text kept after a cancel names no step: adopt the open stream
        const open = Object.keys(S.streams).filter((k) => k.endsWith("|text") && !S.streams[k].final);
        if (open.length) key = open[open.length - 1];
      }
      let s = S.streams[key];
      if (!p.text) { if (s) { s.node.remove(); delete S.streams[key]; } break; }
      if (!s) s = S.streams[key] = { node: add(el("div", "msg assistant", "")), step: p.step_id || "" };
      s.final = true; s.node.classList.remove("streaming");
      s.text = p.text; s.pending = false;
      s.node.classList.add("md"); s.node.replaceChildren(window.acagentMd(p.text));
      if (p.interrupted) s.node.append(el("span", "note warn", "  [interrupted]"));
      S.text = p.text;
      const r = S.streams[(p.step_id || "") + "|reasoning"]; if (r) r.final = true;
      break;
    }
    case "tool.call": {
      const node = add(el("details", "msg tool"));   // expandable: the summary names the call
      const summary = el("summary");
      summary.append("⚙ " + safeParts(p.name).text + " ",
                     safeNode("span", "", p.name === "shell" && p.arguments && typeof p.arguments.command === "string"
                       ? "$ " + p.arguments.command : short(p.arguments, 400)));
      const badge = el("span", "note", ""); summary.append(" ", badge);
      const out = el("pre", "out", ""); node.append(summary, out);
      S.tools[p.tool_call_id] = { node, out, len: 0, badge, started: Date.parse(ev.ts) }; break;
    }
    case "tool.started": { const t = S.tools[p.tool_call_id]; if (t) t.started = Date.parse(ev.ts) || t.started; break; }
    case "tool.output": {
      const t = S.tools[p.tool_call_id]; if (!t) break;
      if (t.len < 20000) { t.out.textContent += p.text; t.len += p.text.length; } break;
    }
    case "tool.result": {
      let t = S.tools[p.tool_call_id];
      if (!t) { const node = add(el("div", "msg tool")); t = { node, out: el("pre", "out", ""), len: 0 }; node.append(t.out); }
      if (p.status !== "ok") t.node.classList.add(p.status === "error" ? "err" : "int");
      if (!t.len) t.out.textContent = short(p.content || "", 4000);
      const took = Date.parse(ev.ts) - t.started;   // tool.started (else tool.call) → tool.result
      const result = "→ " + p.status + (p.exit_code != null ? " (exit " + p.exit_code + ")" : "") +
                     (took >= 0 ? " · " + (took / 1000).toFixed(1) + " s" : "");
      if (t.badge) { t.badge.textContent = result; t.badge.className = "note " + (p.status === "ok" ? "ok" : "warn"); }
      else t.node.append(el("div", "note " + (p.status === "ok" ? "ok" : "warn"), result));
      break;
    }
    case "approval.requested": showApproval(ev); break;
    case "approval.resolved": {
      const card = S.approvals[p.tool_call_id]; if (card) { card.remove(); delete S.approvals[p.tool_call_id]; }
      note("approval " + p.tool_call_id + ": " + p.decision + (p.reason ? " (" + p.reason + ")" : ""), "ok"); break;
    }
    case "turn.completed": note("turn completed", "ok"); refreshSoon(); break;
    case "turn.interrupted": note("turn interrupted (" + (p.reason || "user") + ")", "warn"); refreshSoon(); break;
    case "turn.failed": note("turn failed: " + (p.message || ""), "err"); refreshSoon(); break;
    case "error": note((p.code ? p.code + ": " : "") + (p.message || ""), "err"); break;
    case "usage": $("hinfo").textContent = "status: " + (S.status || "?") + " · tokens " +
                  (p.session_input_tokens || 0) + " in / " + (p.session_output_tokens || 0) + " out" +
                  (ST.ctx ? " · " + ctxText(ST.ctx) : ""); break;
    default: break;
  }
}

let refreshTimer = null;
function refreshSoon() { clearTimeout(refreshTimer); refreshTimer = setTimeout(listSessions, 300); }

function showApproval(ev) {
  const p = ev.payload;
  if (S.approvals[p.tool_call_id]) return;
  const card = el("div", "card"); card.dataset.id = p.tool_call_id;
  card.append(el("div", "", p.kind === "question" ? "The agent asks:" : "Allow " + safeParts(p.name).text + "?"),
              ...approvalNodes(p));
  const row = el("div", "row");
  const answer = async (decision, text) => {
    try { await api("POST", "/v1/sessions/" + encodeURIComponent(S.sid) + "/approvals/" + encodeURIComponent(p.tool_call_id),
                    text === undefined ? { decision } : { decision, answer: text }); }
    catch (e) { card.remove(); delete S.approvals[p.tool_call_id]; note(e.message, e.status === 404 ? "warn" : "err"); }
  };
  if (p.kind === "question") {
    const inp = el("input"); inp.placeholder = "Your answer";
    const b = el("button", "primary", "Answer"); b.onclick = () => answer("allow", inp.value);
    row.append(inp, b);
  } else {
    for (const [label, d, cls] of [["Allow", "allow", "primary"], ["Always", "always", ""], ["Deny", "deny", "danger"]]) {
      const b = el("button", cls, label); b.type = "button"; b.dataset.decision = d; b.onclick = () => answer(d); row.append(b);
    }
  }
  card.append(row);
  $("approvals").append(card);
  S.approvals[p.tool_call_id] = card;
}

// ---------------------------------------------------------------- input

async function send(ev) {
  if (ev) ev.preventDefault();
  const text = $("text").value;
  if (!S.sid || !text.trim()) return;
  try {
    await api("POST", "/v1/sessions/" + encodeURIComponent(S.sid) + "/messages", { text });
    $("text").value = "";
  } catch (e) {
    note(e.code === "session_busy" ? "a turn is running; wait or cancel it" : e.message, "warn");
  }
}
async function cancel() {
  if (!S.sid) return;
  const body = ST.active && ST.turn ? { turn_id: ST.turn } : undefined;
  try { await api("POST", "/v1/sessions/" + encodeURIComponent(S.sid) + "/cancel", body); }
  catch (e) { note(e.message, "err"); }
}

$("composer").addEventListener("submit", send);
$("text").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) send(e); });
$("cancel").onclick = cancel;
$("sfilter").addEventListener("change", listSessions);
$("rename").onclick = async () => {
  if (!S.sid) return;
  const title = window.prompt("New title for " + S.sid);
  if (!title || !title.trim()) return;
  try { await api("PATCH", "/v1/sessions/" + encodeURIComponent(S.sid), { title }); listSessions(); }
  catch (e) { note(e.message, "err"); }
};
// Archive / Unarchive the open session (POST /v1/sessions/{id}/archive|unarchive): archived
// sessions leave the list unless the filter asks for them.
function drawArchive() {
  const s = S.openRow && S.openRow.id === S.sid ? S.openRow : null;
  $("archive").textContent = s && s.archived ? "Unarchive" : "Archive";
}
$("archive").onclick = async () => {
  if (!S.sid) return;
  const s = S.openRow && S.openRow.id === S.sid ? S.openRow : null;
  const verb = s && s.archived ? "unarchive" : "archive";
  try {
    const row = await api("POST", "/v1/sessions/" + encodeURIComponent(S.sid) + "/" + verb);
    note("session " + (row.archived ? "archived" : "unarchived"), "ok");
    S.openRow = row; drawArchive();
    await listSessions();
  } catch (e) { note(e.message, "err"); }
};
$("download").onclick = async () => {      // the transcript as JSONL, the format `acagent import` reads
  if (!S.sid) return;
  const lines = [];
  let since = 0;
  try {
    for (;;) {
      const page = await api("GET", "/v1/sessions/" + encodeURIComponent(S.sid) + "/events?since=" + since + "&limit=5000");
      for (const e of page.events) lines.push(JSON.stringify(e));
      if (!page.events.length || !page.more) break;
      since = page.events[page.events.length - 1].seq;
    }
  } catch (e) { note(e.message, "err"); return; }
  const url = URL.createObjectURL(new Blob([lines.join("\n") + "\n"], { type: "application/x-ndjson" }));
  const a = el("a"); a.href = url; a.download = S.sid + ".jsonl"; document.body.append(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  S.downloaded = lines.length;
};
// The session list stays current (status, title, last activity) while the page is visible.
setInterval(() => { if (!document.hidden && !$("login")) listSessions(); }, 3000);
$("refresh").onclick = listSessions;
$("create").onclick = createSession;
$("cwd").addEventListener("keydown", (e) => { if (e.key === "Enter") listSessions(); });
$("cwd").value = new URLSearchParams(location.search).get("cwd") || localStorage.getItem("acagent.cwd") || "";
function openFromHash() {                // #ses_… opens that session (also an archived one)
  const id = decodeURIComponent(location.hash.slice(1));
  if (id && id !== S.sid) openSession(id);
}
window.addEventListener("hashchange", openFromHash);
listSessions().then(openFromHash);
