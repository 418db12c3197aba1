// The wasmsand panel: plain browser JavaScript over the service's REST API and run stream.
// Nothing is fetched from anywhere but this server.
"use strict";

const BASE = "/api/v1/sandbox";
const SPEC_VERSION = "1.0";
const $ = (id) => document.getElementById(id);

const state = {
  token: localStorage.getItem("wasmsand.token") || "",
  sessions: JSON.parse(localStorage.getItem("wasmsand.sessions") || "[]"),
  history: JSON.parse(localStorage.getItem("wasmsand.history") || "[]"),
  session: null, // the selected session's view
  run: null, // { id, created, view, lastSeq, ended, ws, reconnects, retryMs, poll }
};

// ---- HTTP ----

function authHeaders() {
  return state.token ? { Authorization: `Bearer ${state.token}` } : {};
}

class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e ? `${status} ${e.code}: ${e.message}` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(method, path, body, extraHeaders) {
  const headers = { ...authHeaders(), ...(extraHeaders || {}) };
  let payload;
  if (body instanceof FormData) {
    payload = body;
  } else if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  const resp = await fetch(BASE + path, { method, headers, body: payload });
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

// ---- small UI helpers ----

let toastTimer;
function toast(msg, isError) {
  const t = $("toast");
  t.textContent = msg;
  t.className = "toast show" + (isError ? " error" : "");
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.className = "toast"; }, isError ? 6000 : 2500);
}

function kv(el, pairs) {
  el.replaceChildren();
  for (const [k, v] of pairs) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v === null || v === undefined ? "–" : String(v);
    el.append(dt, dd);
  }
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function wsBase() {
  return (location.protocol === "https:" ? "wss://" : "ws://") + location.host;
}

// ---- server ----

async function loadServer() {
  try {
    const r = await api("GET", "/runtimes");
    // Every image an available runtime offers, and its aliases, for one-shot runs.
    const names = r.runtimes.filter((x) => x.available)
      .flatMap((x) => (x.images || []).flatMap((i) => [i.name, ...(i.aliases || [])]));
    $("images").replaceChildren(...names.map((n) => Object.assign(document.createElement("option"), { value: n })));
    const w = r.runtimes.find((x) => x.name === r.default_runtime) || r.runtimes[0];
    const el = $("server-info");
    el.replaceChildren();
    el.append(`runtime ${w.name} ${w.runtime_version || ""} · store ${r.store_mode} · queue ${w.queue_length ?? 0}/${w.queue_max_length} · spec ${w.supported_spec_versions.join(", ")}`);
  } catch (e) {
    $("server-info").textContent = `server: ${e.message}`;
  }
}

// ---- sessions ----

function saveSessions() {
  localStorage.setItem("wasmsand.sessions", JSON.stringify(state.sessions.slice(0, 50)));
}

function renderSessionSelect() {
  const sel = $("session-select");
  const current = state.session ? state.session.session_id : "";
  sel.replaceChildren();
  const none = document.createElement("option");
  none.value = "";
  none.textContent = "— one-shot run (no session) —";
  sel.append(none);
  for (const s of state.sessions) {
    const o = document.createElement("option");
    o.value = s.id;
    o.textContent = `${s.id} (${new Date(s.created_at).toLocaleTimeString()})`;
    sel.append(o);
  }
  sel.value = current;
}

function renderSession() {
  const s = state.session;
  $("upload-btn").disabled = !s;
  $("session-delete").disabled = !s;
  if (!s) {
    kv($("session-info"), [["mode", "one-shot: each run gets a fresh sandbox"]]);
    return;
  }
  kv($("session-info"), [
    ["session_id", s.session_id],
    ["expires_at", s.expires_at],
    ["runtime", `${s.runtime} ${s.runtime_version}`],
    ["base_image", s.base_image],
    ["image_digest", s.image_digest],
    ["memory", `${s.resources.memory_mb} MB`],
    ["run timeout", `${s.timeout_sec} s`],
  ]);
}

async function selectSession(id) {
  if (!id) {
    state.session = null;
    renderSessionSelect();
    renderSession();
    return;
  }
  try {
    state.session = await api("GET", `/sessions/${encodeURIComponent(id)}`);
    if (!state.sessions.some((s) => s.id === id)) {
      state.sessions.unshift({ id, created_at: state.session.created_at });
      saveSessions();
    }
  } catch (e) {
    if (e.status === 404) {
      state.sessions = state.sessions.filter((s) => s.id !== id);
      saveSessions();
    }
    state.session = null;
    toast(`session ${id}: ${e.message}`, true);
  }
  renderSessionSelect();
  renderSession();
}

async function newSession() {
  try {
    const s = await api("POST", "/sessions", { spec_version: SPEC_VERSION });
    state.sessions.unshift({ id: s.session_id, created_at: s.created_at });
    saveSessions();
    state.session = s;
    renderSessionSelect();
    renderSession();
    toast("session created");
  } catch (e) {
    toast(e.message, true);
  }
}

async function deleteSession() {
  const s = state.session;
  if (!s) return;
  try {
    await api("DELETE", `/sessions/${encodeURIComponent(s.session_id)}`);
  } catch (e) {
    if (e.status !== 404) { toast(e.message, true); return; }
  }
  state.sessions = state.sessions.filter((x) => x.id !== s.session_id);
  saveSessions();
  await selectSession("");
  toast("session deleted");
}

async function upload() {
  const files = $("upload-input").files;
  const note = $("upload-result");
  if (!state.session || !files.length) {
    note.textContent = "choose a session and files first";
    return;
  }
  const form = new FormData();
  for (const f of files) form.append("files[]", f, f.name);
  note.className = "note";
  note.textContent = "uploading…";
  try {
    const r = await api("POST", `/sessions/${encodeURIComponent(state.session.session_id)}/files`, form);
    note.textContent = `uploaded ${r.file_count} file(s), ${fmtBytes(r.bytes_received)}: ${r.paths.join(", ")}`;
    if (r.excluded_count) {
      // The server's default rules leave out binaries and VCS folders (docs/service.md).
      note.textContent += `; left out by the upload rules: ${r.excluded.join(", ")}`;
    }
    note.dataset.paths = r.paths.join(",");
  } catch (e) {
    note.className = "note error";
    note.textContent = e.message;
  }
}

// ---- runs ----

const consoleEl = () => $("console");

function appendOutput(cls, text) {
  const c = consoleEl();
  const stick = c.scrollTop + c.clientHeight >= c.scrollHeight - 4;
  const last = c.lastElementChild;
  // Consecutive chunks of one stream share a span, so the DOM stays small for chatty runs.
  if (last && last.className === cls && cls !== "evt") {
    last.textContent += text;
  } else {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    c.append(span);
  }
  if (stick) c.scrollTop = c.scrollHeight;
}

function note(text) {
  appendOutput("evt", `[${text}]\n`);
}

const decoder = { stdout: new TextDecoder(), stderr: new TextDecoder() };

function decodeData(frame) {
  if (frame.encoding === "base64") {
    const bin = atob(frame.data);
    const bytes = Uint8Array.from(bin, (ch) => ch.charCodeAt(0));
    return decoder[frame.type].decode(bytes, { stream: true });
  }
  return frame.data;
}

function setPhase(phase) {
  const el = $("phase");
  el.textContent = phase;
  el.dataset.phase = phase;
  const active = !["completed", "failed", "timed_out", "killed", "idle"].includes(phase);
  $("cancel-btn").disabled = !active;
}

function renderUsage(v) {
  if (!v) return;
  setPhase(v.phase);
  $("exit-code").textContent = v.exit_code ?? "–";
  const u = v.resource_usage;
  kv($("usage"), [
    ["wall time", `${u.wall_time_sec.toFixed(2)} s`],
    ["cpu time", `${u.cpu_time_sec.toFixed(2)} s`],
    ["peak rss", u.peak_rss_mb === null ? "not measured" : `${u.peak_rss_mb} MB`],
    ["log bytes", fmtBytes(u.log_bytes) + (v.log_truncated ? " (truncated)" : "")],
    ["artifact bytes", fmtBytes(u.artifact_bytes)],
    ["limits", `memory ${u.limits.memory_mb} MB · timeout ${u.limits.timeout_sec} s · cpu ${u.limits.cpu}`],
    ["reason", v.reason_code ? `${v.reason_code}${v.message ? ": " + v.message : ""}` : null],
  ]);
}

function renderSpec() {
  const r = state.run;
  if (!r) return;
  const c = r.created;
  const v = r.view || {};
  const spec = {
    spec_version: c.spec_version,
    policy_hash: c.policy_hash,
    runtime: c.runtime,
    runtime_version: c.runtime_version,
    base_image: c.base_image,
    image_digest: c.image_digest,
    command: r.request.command,
    env: r.request.env || {},
    capture_patterns: r.request.capture_patterns || [],
    resources: c.resources,
    startup_timeout_sec: c.startup_timeout_sec,
    timeout_sec: c.timeout_sec,
    session_id: c.session_id,
    run_id: c.run_id,
    created_at: c.created_at,
    phase: v.phase,
    exit_code: v.exit_code ?? null,
  };
  r.spec = JSON.stringify(spec, null, 2);
  $("spec").textContent = r.spec;
  $("copy-spec-btn").disabled = false;
}

async function refreshRun() {
  const r = state.run;
  if (!r) return;
  try {
    r.view = await api("GET", `/runs/${encodeURIComponent(r.id)}`);
    renderUsage(r.view);
    renderSpec();
    updateHistory(r.id, r.view.phase, r.view.exit_code);
    if (r.streamDead && !r.ended && ["completed", "failed", "timed_out", "killed"].includes(r.view.phase)) {
      r.ended = true;
      finish(r);
    }
  } catch (e) {
    toast(e.message, true);
  }
}

async function loadArtifacts() {
  const r = state.run;
  const body = $("artifacts");
  if (!r) return;
  try {
    const a = await api("GET", `/runs/${encodeURIComponent(r.id)}/artifacts`);
    body.replaceChildren();
    if (!a.items.length) {
      const tr = document.createElement("tr");
      tr.innerHTML = '<td colspan="4" class="muted"></td>';
      tr.firstChild.textContent = a.expired ? "expired" : "none captured";
      body.append(tr);
      return;
    }
    for (const item of a.items) {
      const tr = document.createElement("tr");
      for (const t of [item.path, fmtBytes(item.size), item.type]) {
        const td = document.createElement("td");
        td.textContent = t;
        tr.append(td);
      }
      const td = document.createElement("td");
      const b = document.createElement("button");
      b.className = "small";
      b.textContent = "Download";
      b.dataset.path = item.path;
      b.addEventListener("click", () => download(item));
      td.append(b);
      tr.append(td);
      body.append(tr);
    }
  } catch (e) {
    toast(e.message, true);
  }
}

async function download(item) {
  // Fetched rather than linked, so that the Authorization header goes with it.
  try {
    const resp = await fetch(item.download_url, { headers: authHeaders() });
    if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
    const blob = await resp.blob();
    const a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = item.path.split("/").pop() || "artifact";
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  } catch (e) {
    toast(`download ${item.path}: ${e.message}`, true);
  }
}

/// The `token` and `exp` of a signed `log_stream_url` (servers with SANDBOX_WS_SIGNED_URLS):
/// a browser cannot put an Authorization header on a WebSocket, so with authentication on
/// this is how the stream is authorized.
function signedParams(logStreamUrl) {
  if (!logStreamUrl) return null;
  try {
    const q = new URL(logStreamUrl, location.href).searchParams;
    return q.get("token") && q.get("exp") ? { token: q.get("token"), exp: q.get("exp") } : null;
  } catch {
    return null;
  }
}

function streamUrl(r) {
  let url = `${wsBase()}${BASE}/runs/${encodeURIComponent(r.id)}/stream?from_seq=${r.lastSeq + 1}`;
  if (r.signed) url += `&token=${encodeURIComponent(r.signed.token)}&exp=${encodeURIComponent(r.signed.exp)}`;
  return url;
}

function signedExpired(r) {
  return r.signed && Date.parse(r.signed.exp) <= Date.now();
}

function connect(r) {
  if (r !== state.run || r.ended) return;
  if (signedExpired(r)) {
    // Its signed URL is spent and the server gives no new one: status by polling only.
    r.streamDead = true;
    note("the stream's signed URL expired; following the run's status only");
    return;
  }
  const ws = new WebSocket(streamUrl(r));
  r.ws = ws;
  let opened = false;
  ws.onopen = () => { opened = true; r.failedOpens = 0; };
  ws.onmessage = (ev) => {
    let f;
    try { f = JSON.parse(ev.data); } catch { return; }
    // A `resume` note has the seq of the first frame delivered after it (seed 003's rule):
    // counting it as seen would drop that frame as a duplicate.
    if (f.type === "event" && f.event === "resume") {
      onFrame(r, f);
      return;
    }
    // Every frame has a seq; one at or below the last seen was delivered before a reconnect.
    if (typeof f.seq === "number") {
      if (f.seq <= r.lastSeq) return;
      r.lastSeq = f.seq;
      $("last-seq").textContent = r.lastSeq;
    }
    r.retryMs = 250;
    onFrame(r, f);
  };
  ws.onclose = () => {
    if (r.ws === ws) r.ws = null;
    if (r !== state.run || r.ended) return;
    if (!opened && ++r.failedOpens >= 3) {
      // Refused three times (credentials the stream does not take?): stop knocking.
      r.streamDead = true;
      note("the stream refused the connection; following the run's status only");
      return;
    }
    // The run goes on: resume from the frame after the last one seen.
    r.reconnects += 1;
    $("reconnects").textContent = r.reconnects;
    const wait = r.retryMs;
    r.retryMs = Math.min(r.retryMs * 2, 5000);
    setTimeout(() => connect(r), wait);
  };
}

function onFrame(r, f) {
  switch (f.type) {
    case "stdout":
    case "stderr":
      appendOutput(f.type === "stdout" ? "out" : "err", decodeData(f));
      break;
    case "event":
      if (f.event === "phase") {
        setPhase(f.data.phase);
      } else if (f.event === "start") {
        note(`started ${f.data.started_at}`);
      } else if (f.event === "resume") {
        note(`resumed at seq ${f.data.delivered_from_seq}: ${f.data.lost_count} frame(s) no longer available`);
      } else if (f.event === "end") {
        r.ended = true;
        setPhase(f.data.phase);
        $("exit-code").textContent = f.data.exit_code ?? "–";
        note(`end: ${f.data.phase}${f.data.exit_code !== null && f.data.exit_code !== undefined ? ", exit " + f.data.exit_code : ""}${f.data.reason_code ? ", " + f.data.reason_code : ""}`);
        finish(r);
      }
      break;
    case "truncated":
      note(`log truncated (${f.reason}): further output is dropped`);
      break;
    default:
      break; // heartbeats only advance the seq
  }
}

async function finish(r) {
  clearInterval(r.poll);
  $("reconnect-btn").disabled = true;
  if (r.ws) r.ws.close(1000);
  await refreshRun();
  await loadArtifacts();
  document.body.dataset.runDone = r.id;
}

async function startRun() {
  const script = $("command").value;
  if (!script.trim()) { toast("the command is empty", true); return; }
  const req = { spec_version: SPEC_VERSION, command: ["bash", "-c", script] };
  if (state.session) req.session_id = state.session.session_id;
  else req.base_image = $("image").value.trim() || "wasmsand/default";
  const patterns = $("capture").value.split(",").map((p) => p.trim()).filter(Boolean);
  if (patterns.length) req.capture_patterns = patterns;
  const t = parseInt($("timeout").value, 10);
  if (t > 0) req.timeout_sec = t;

  if (state.run) {
    const old = state.run;
    old.ended = true;
    clearInterval(old.poll);
    if (old.ws) old.ws.close(1000);
  }
  consoleEl().replaceChildren();
  decoder.stdout = new TextDecoder();
  decoder.stderr = new TextDecoder();
  $("artifacts").replaceChildren();
  delete document.body.dataset.runDone;
  let created;
  try {
    created = await api("POST", "/runs", req);
  } catch (e) {
    toast(e.message, true);
    note(e.message);
    return;
  }
  const r = {
    id: created.run_id, created, request: req, view: null, lastSeq: 0, ended: false,
    ws: null, reconnects: 0, retryMs: 250, poll: null, spec: "",
    signed: signedParams(created.log_stream_url), streamDead: false, failedOpens: 0,
  };
  state.run = r;
  $("run-id").textContent = r.id;
  $("last-seq").textContent = "0";
  $("reconnects").textContent = "0";
  $("exit-code").textContent = "–";
  $("reconnect-btn").disabled = false;
  setPhase(created.phase);
  state.history.unshift({ id: r.id, command: script, phase: created.phase, at: created.created_at });
  state.history = state.history.slice(0, 30);
  saveHistory();
  renderSpec();
  connect(r);
  r.poll = setInterval(() => { if (!r.ended) refreshRun(); }, 1000);
}

async function openRun(id) {
  if (state.run) {
    state.run.ended = true;
    clearInterval(state.run.poll);
    if (state.run.ws) state.run.ws.close(1000);
  }
  let view;
  try {
    view = await api("GET", `/runs/${encodeURIComponent(id)}`);
  } catch (e) {
    toast(e.message, true);
    return;
  }
  const created = { ...view, resources: { cpu: view.resource_usage.limits.cpu, memory_mb: view.resource_usage.limits.memory_mb },
    startup_timeout_sec: view.resource_usage.limits.startup_timeout_sec, timeout_sec: view.resource_usage.limits.timeout_sec };
  const r = { id, created, request: { command: view.command }, view, lastSeq: 0, ended: false,
    ws: null, reconnects: 0, retryMs: 250, poll: null, spec: "", signed: null, streamDead: false, failedOpens: 0 };
  state.run = r;
  consoleEl().replaceChildren();
  $("run-id").textContent = id;
  $("reconnect-btn").disabled = false;
  renderUsage(view);
  renderSpec();
  connect(r);
  r.poll = setInterval(() => { if (!r.ended) refreshRun(); }, 1000);
}

async function cancelRun() {
  const r = state.run;
  if (!r) return;
  try {
    const c = await api("POST", `/runs/${encodeURIComponent(r.id)}/cancel`);
    note(c.message);
  } catch (e) {
    toast(e.message, true);
  }
}

function reconnectNow() {
  const r = state.run;
  if (r && r.ws && !r.ended) r.ws.close(4000, "reconnect requested");
}

async function copySpec() {
  const r = state.run;
  if (!r || !r.spec) return;
  let ok = false;
  try {
    await navigator.clipboard.writeText(r.spec);
    ok = true;
  } catch {
    // Clipboard API refused (not a secure context, or no permission): the old way.
    const ta = document.createElement("textarea");
    ta.value = r.spec;
    document.body.append(ta);
    ta.select();
    ok = document.execCommand("copy");
    ta.remove();
  }
  $("copy-note").textContent = ok ? "copied to the clipboard" : "select the text above to copy it";
  toast(ok ? "run spec copied" : "copy failed", !ok);
}

// ---- history ----

function saveHistory() {
  localStorage.setItem("wasmsand.history", JSON.stringify(state.history));
  renderHistory();
}

function updateHistory(id, phase) {
  const h = state.history.find((x) => x.id === id);
  if (h && h.phase !== phase) { h.phase = phase; saveHistory(); }
}

function renderHistory() {
  const ul = $("history");
  ul.replaceChildren();
  if (!state.history.length) {
    const li = document.createElement("li");
    li.className = "muted";
    li.textContent = "none yet";
    ul.append(li);
    return;
  }
  for (const h of state.history) {
    const li = document.createElement("li");
    const phase = document.createElement("span");
    phase.className = "phase";
    phase.dataset.phase = h.phase;
    phase.textContent = h.phase;
    const cmd = document.createElement("code");
    cmd.textContent = h.command.split("\n")[0];
    cmd.title = h.command;
    const b = document.createElement("button");
    b.className = "ghost small";
    b.textContent = "Open";
    b.addEventListener("click", () => openRun(h.id));
    li.append(phase, cmd, b);
    ul.append(li);
  }
}

// ---- wiring ----

function init() {
  $("api-key").value = state.token;
  $("auth-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("api-key").value.trim();
    localStorage.setItem("wasmsand.token", state.token);
    toast(state.token ? "credentials saved" : "credentials cleared");
    loadServer();
  });
  $("session-select").addEventListener("change", (e) => selectSession(e.target.value));
  $("session-new").addEventListener("click", newSession);
  $("session-open").addEventListener("click", () => {
    const id = $("session-id-input").value.trim();
    if (id) selectSession(id);
  });
  $("session-delete").addEventListener("click", deleteSession);
  $("upload-btn").addEventListener("click", upload);
  $("run-btn").addEventListener("click", startRun);
  $("cancel-btn").addEventListener("click", cancelRun);
  $("reconnect-btn").addEventListener("click", reconnectNow);
  $("copy-spec-btn").addEventListener("click", copySpec);
  $("clear-btn").addEventListener("click", () => consoleEl().replaceChildren());
  $("command").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) startRun();
  });
  renderSessionSelect();
  renderSession();
  renderHistory();
  loadServer();
  // A deep link (/webui/sandbox/runs/{id}) opens that run: its log from the start, status and
  // artifacts.
  const link = location.pathname.match(/^\/webui\/sandbox\/runs\/([^/]+)$/);
  if (link) openRun(decodeURIComponent(link[1]));
  document.body.dataset.ready = "1";
}

init();
