'use strict';
// The transport to a remote `sandboxd serve` (docs/service.md): each JSON-RPC request of the
// SDK becomes the service's REST calls, and a run's output comes over its WebSocket stream.
// A port of the Python SDK's `_service.py`, which says why it translates rather than
// tunnels: a sandbox there is a session, a fork another session, a run a record with a
// numbered frame stream. What the service has no counterpart for rejects with
// `NotSupportedError` before anything is sent.
//
// A network adds two things the other transports never face: a request whose answer was lost
// may have been carried out (creating requests carry an `Idempotency-Key` and are sent again
// with the same key), and a stream may drop mid-run (it is resumed from the frame after the
// last one seen, and frames are deduplicated by `seq`).
const crypto = require('node:crypto');
const { StringDecoder } = require('node:string_decoder');
const {
  InvalidParamsError,
  NotSupportedError,
  SandboxDestroyedError,
  SandboxError,
  WaitTimeoutError,
  errorFromWire,
} = require('./errors');

const BASE_PATH = '/api/v1/sandbox';
const SPEC_VERSION = '1.0';
const DEFAULT_FS_LIMIT_BYTES = 256 * 1024 * 1024;
const RETRIES = 4;
const RETRY_AFTER_CAP_MS = 10_000;
// The service sends a heartbeat every 10 s while a run goes on: a stream silent this long is
// a dead connection, resumed like a drop.
const STREAM_IDLE_MS = 45_000;
const MAX_ATTEMPTS = 64;
// The longest one `.../wait` request holds (the service's own cap is 30 s).
const WAIT_SLICE_MS = 30_000;

function notSupported(feature) {
  return new NotSupportedError(
    `${feature} is not supported by the service transport (sandboxd serve); use transport 'inprocess' or 'rpc' for it`,
    null,
    { kind: 'not_supported', feature, transport: 'service' },
  );
}

function destroyed() {
  return new SandboxDestroyedError('sandbox has been killed', null, { kind: 'sandbox_destroyed' });
}

/** The API's base URL: the one `serve` prints (with the base path), or the server's root. */
function baseUrl(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    u = null;
  }
  if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:')) {
    throw new InvalidParamsError(`url must be the http:// or https:// URL of a sandboxd service, not ${url}`, -32602, {
      kind: 'invalid_params',
    });
  }
  const p = u.pathname.replace(/\/+$/, '') || BASE_PATH;
  return `${u.protocol}//${u.host}${p}`;
}

const seg = encodeURIComponent;

/** Whole seconds, rounded up, at least 1 (the service refuses 0). */
function seconds(ms) {
  return Math.max(1, Math.ceil(ms / 1000));
}

function backoff(attempt) {
  // Exponential with jitter, so that clients cut off together do not come back together.
  return Math.min(5000, 200 * 2 ** attempt) * (0.5 + Math.random() / 2);
}

function retryAfter(headers) {
  const raw = headers.get('retry-after');
  if (raw === null) return null;
  const n = Number(raw);
  return Number.isFinite(n) ? Math.min(Math.max(n * 1000, 0), RETRY_AFTER_CAP_MS) : null;
}

function envelope(text) {
  try {
    const v = JSON.parse(text);
    const err = v && typeof v === 'object' ? v.error : null;
    if (!err || typeof err !== 'object') return ['', '', {}];
    const d = err.details && typeof err.details === 'object' ? err.details : {};
    return [String(err.code || ''), String(err.message || ''), d];
  } catch {
    return ['', '', {}];
  }
}

/** The SDK's `data.kind` for an error of the service, from its code and details. */
function kindOf(status, code, details) {
  const reason = details.reason;
  if (typeof details.errno === 'string') return 'filesystem';
  if (reason === 'not_supported') return 'not_supported';
  if (code === 'conflict') return typeof reason === 'string' ? reason : 'conflict';
  if (code === 'not_found') {
    if (status === 410) return 'sandbox_destroyed';
    return { process: 'no_such_process', snapshot: 'unknown_snapshot', session: 'unknown_sandbox' }[details.resource] || 'not_found';
  }
  if (code === 'session_lost') return 'sandbox_destroyed';
  if (code === 'invalid_request' || code === 'invalid_spec_version') return 'invalid_params';
  if (code === 'quota_exceeded' && reason === 'processes') return 'limit_exceeded';
  return code || `http_${status}`;
}

function httpError(status, text, statusText = '') {
  let [code, message, details] = envelope(text);
  if (!message) message = `HTTP ${status} ${statusText}`.trim();
  const data = { ...details, kind: kindOf(status, code, details), code: code || null, status };
  if (data.kind === 'limit_exceeded') {
    data.limit ??= 'backgroundProcesses';
    data.value ??= details.max_running;
  }
  return errorFromWire({ code: status, message, data });
}

function utf8Chunk(chunk) {
  const data = String(chunk?.data ?? '');
  return chunk?.encoding === 'base64' ? Buffer.from(data, 'base64').toString('utf8') : data;
}

function frameBytes(frame) {
  if (typeof frame.data !== 'string') return Buffer.alloc(0);
  return frame.encoding === 'base64' ? Buffer.from(frame.data, 'base64') : Buffer.from(frame.data, 'utf8');
}

/** One run's stream: each stream's bytes, and the same decoded for the callbacks as they
 * arrive (a character split between two frames is held until its end arrives). */
class Output {
  constructor(notify) {
    this.data = { stdout: [], stderr: [] };
    this.decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    this.notify = notify;
    this.cut = false;
  }

  add(stream, chunk) {
    this.data[stream].push(chunk);
    if (this.notify) {
      const text = this.decoders[stream].write(chunk);
      if (text) this.notify({ stream, data: text });
    }
  }

  finish() {
    if (!this.notify) return;
    for (const stream of ['stdout', 'stderr']) {
      const text = this.decoders[stream].end();
      if (text) this.notify({ stream, data: text });
    }
  }

  text(stream) {
    return Buffer.concat(this.data[stream]).toString('utf8');
  }
}

/** A run's status and stream as the JSON-RPC `run` result (see `_service.py`'s `_run_result`
 * for why each phase maps as it does). */
function runResult(runId, status, out) {
  const { phase, reason_code: reason, message } = status;
  let exitCode = Number.isInteger(status.exit_code) ? status.exit_code : null;
  let stderr = out.text('stderr');
  let errorClass = null;
  let limitsHit = [];
  if (phase === 'completed') exitCode ??= 0;
  else if (phase === 'timed_out') [exitCode, errorClass, limitsHit] = [exitCode ?? 124, 'TIMEOUT', ['timeoutMs']];
  else if (phase === 'killed') [exitCode, errorClass] = [exitCode ?? 137, 'CANCELLED'];
  else if (phase === 'failed' && reason === 'session_destroyed') {
    throw new SandboxDestroyedError(`sandbox has been destroyed (run ${runId} failed: ${message || reason})`, null, {
      kind: 'sandbox_destroyed',
      run_id: runId,
    });
  } else if (phase === 'failed' && reason === 'oom_killed') {
    [exitCode, errorClass, limitsHit] = [exitCode ?? 137, 'LIMIT_EXCEEDED', ['memoryBytes']];
  } else if (phase === 'failed' && (reason === 'limit_exceeded' || reason === 'pids_limit_exceeded')) {
    [exitCode, errorClass] = [exitCode ?? 1, 'LIMIT_EXCEEDED'];
  } else if (phase === 'failed' && reason === 'provision_failed' && exitCode === null) {
    exitCode = 1;
    if (message) stderr += `${message}\n`;
  } else if (!(phase === 'failed' && exitCode !== null && (reason === null || reason === undefined || reason === 'nonzero_exit'))) {
    throw new SandboxError(`run ${runId} ended ${phase} (${reason}): ${message || 'the command did not complete'}`, null, {
      kind: String(reason || phase || 'run_failed'),
      run_id: runId,
      phase,
      reason_code: reason,
    });
  }
  const u = status.resource_usage && typeof status.resource_usage === 'object' ? status.resource_usage : {};
  const wallS = Number(u.wall_time_sec || 0);
  const truncated = out.cut || Boolean(status.log_truncated);
  return {
    stdout: out.text('stdout'),
    stderr,
    exitCode,
    executionTimeMs: wallS * 1000,
    // The service caps a run's log as a whole, not per stream: once it cut, neither is whole.
    truncated: truncated ? { stdout: true, stderr: true } : null,
    errorClass,
    usage: {
      wallMs: Math.round(wallS * 1000),
      cpuUs: Math.round(Number(u.cpu_time_sec || 0) * 1e6),
      peakMemoryBytes: Math.round(Number(u.peak_rss_mb || 0) * 1024 * 1024),
      netRequests: Number(u.network_requests || 0),
      netBytes: Number(u.network_bytes || 0),
      limitsHit,
    },
  };
}

function processResult(r) {
  return {
    stdout: String(r.stdout ?? ''),
    stderr: String(r.stderr ?? ''),
    exitCode: Number(r.exit_code),
    executionTimeMs: Number(r.execution_time_ms || 0),
    truncated: r.truncated ? { stdout: true, stderr: true } : null,
    errorClass: r.error_class ?? null,
    usage: {
      wallMs: Number(r.execution_time_ms || 0),
      cpuUs: Number(r.cpu_time_ms || 0) * 1000,
      peakMemoryBytes: Number(r.peak_memory_bytes || 0),
      limitsHit: (r.limits_hit || []).map(String),
    },
  };
}

function createBody(params) {
  let timeoutMs = params.timeoutMs ?? 30_000;
  const limits = { ...(params.limits || {}) };
  if ('timeoutMs' in limits) {
    // A session's run timeout is the one limit the service takes from a client.
    timeoutMs = limits.timeoutMs;
    delete limits.timeoutMs;
  }
  if (Object.keys(limits).length) throw notSupported(`limits (${Object.keys(limits).sort().join(', ')}; the service's own limits apply)`);
  if (params.deterministic) throw notSupported('deterministic');
  if ((params.fsLimitBytes ?? DEFAULT_FS_LIMIT_BYTES) !== DEFAULT_FS_LIMIT_BYTES) {
    throw notSupported("fsLimitBytes (the service's workspace cap applies)");
  }
  const body = { spec_version: SPEC_VERSION, timeout_sec: seconds(timeoutMs) };
  const network = params.network;
  if (!network) {
    // A sandbox without `network` has none, whatever the server's default policy.
    body.network_policy = 'deny_all';
  } else {
    if (network.resolve) throw notSupported("network resolve (the server's SANDBOX_EGRESS_RESOLVE applies)");
    if (network.caPem) throw notSupported("network caPem (the server's SANDBOX_EGRESS_CA_FILE applies)");
    body.network_policy = 'allowlist';
    body.egress_allowlist = { ...(network.allowlist || {}) };
  }
  for (const [key, field] of [
    ['runtime', 'runtime'],
    ['baseImage', 'base_image'],
    ['ttlSec', 'ttl_sec'],
    ['env', 'env'],
  ]) {
    if (params[key] !== undefined && params[key] !== null) body[field] = params[key];
  }
  return body;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function shellQuote(s) {
  return `'${String(s).replace(/'/g, "'\\''")}'`;
}

class ServiceTransport {
  constructor(url, apiKey = null) {
    this.name = 'service';
    this.url = baseUrl(url);
    const u = new URL(this.url);
    this.wsBase = `${u.protocol === 'https:' ? 'wss:' : 'ws:'}//${u.host}${u.pathname}`;
    this.auth = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
    this.closed = false;
    this.root = null;
    this.forks = new Set();
    this.parents = new Map();
    this.runtime = null;
    this.ttlSec = null;
    this.runtimes = null;
    this.sockets = new Set();
    this.streamReconnects = 0;
    this.subs = new Map();
  }

  // Background processes' output is read by offset (`.../output`), which CommandHandle
  // polls; the service's per-process frame stream is not needed for that.
  subscribe() {
    return () => {};
  }

  setRequestHandler() {
    // The service's sandboxes cannot call into this process (no host tools).
  }

  async close() {
    this.closed = true;
    for (const ws of this.sockets) ws.terminate();
  }

  async call(method, params, { onNotify = null, signal = null } = {}) {
    if (this.closed) throw destroyed();
    const handler = METHODS[method];
    if (handler) return handler.call(this, params, onNotify, signal);
    if (method.startsWith('tools.')) throw notSupported('host tools (tools, sb.tools)');
    if (['sandbox.mount', 'sandbox.mounts', 'sandbox.exportChanges'].includes(method)) {
      throw notSupported('host folders (mount, mounts, exportChanges)');
    }
    if (method === 'sandbox.export') throw notSupported('exportState()');
    if (method === 'sandbox.import') throw notSupported('importState()');
    throw new SandboxError(`unknown method '${method}'`, -32601, { kind: 'method_not_found' });
  }

  // ---- HTTP ----

  /** One request, sent again (a bounded number of times) when that is safe: when it never
   * left, on 429 or a 503 with Retry-After, and for idempotent requests on a lost answer or a
   * 502/503/504. Resolves with `{status, headers, body: Buffer}`. */
  async request(method, path, { query, json, body, headers = {}, idempotent = false, idempotencyKey = false } = {}) {
    const hdrs = { ...this.auth, ...headers };
    if (idempotencyKey) {
      hdrs['Idempotency-Key'] = crypto.randomUUID();
      idempotent = true;
    }
    let payload = body;
    if (json !== undefined) {
      payload = JSON.stringify(json);
      hdrs['Content-Type'] = 'application/json';
    }
    let target = `${this.url}${path}`;
    if (query) target += `?${new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]))}`;
    for (let attempt = 0; ; attempt++) {
      let resp;
      try {
        resp = await fetch(target, { method, headers: hdrs, body: payload });
      } catch (e) {
        // fetch cannot tell a refused connection from a lost answer: only idempotent
        // requests are sent again, unless the connection was refused outright.
        const refused = e?.cause?.code === 'ECONNREFUSED';
        if (!(refused || idempotent) || attempt >= RETRIES || this.closed) {
          if (this.closed) throw destroyed();
          throw new SandboxError(`${method} ${path}: no answer from the service at ${this.url}: ${e.cause?.message || e.message}`, null, {
            kind: 'unavailable',
            url: this.url,
          });
        }
        await sleep(backoff(attempt));
        continue;
      }
      const buf = Buffer.from(await resp.arrayBuffer());
      const delay = this.retryDelay(resp, buf, attempt, idempotent);
      if (delay === null || attempt >= RETRIES) return { status: resp.status, statusText: resp.statusText, headers: resp.headers, body: buf };
      await sleep(delay);
    }
  }

  retryDelay(resp, buf, attempt, idempotent) {
    const after = retryAfter(resp.headers);
    if (resp.status === 429) {
      if (envelope(buf.toString('utf8'))[2].reason === 'processes') return null;
      return after ?? backoff(attempt);
    }
    if (resp.status === 503 && after !== null) return after;
    if ([502, 503, 504].includes(resp.status) && idempotent) return after ?? backoff(attempt);
    return null;
  }

  json(resp, ...ok) {
    if (!ok.includes(resp.status)) throw httpError(resp.status, resp.body.toString('utf8'), resp.statusText);
    if (resp.body.length === 0) return {};
    const v = JSON.parse(resp.body.toString('utf8'));
    if (!v || typeof v !== 'object' || Array.isArray(v)) {
      throw new SandboxError(`unexpected answer from the service: ${resp.body}`, resp.status, { kind: 'protocol' });
    }
    return v;
  }

  session(params) {
    if (typeof params.sandboxId === 'string') return params.sandboxId;
    if (this.root === null) throw new SandboxError('no sandbox yet: create must be the first request', null, { kind: 'invalid_request' });
    return this.root;
  }

  filesPath(params, tail = '') {
    return `/sessions/${seg(this.session(params))}/files${tail}`;
  }

  async forkable(what) {
    if (this.runtimes === null) {
      const reply = this.json(await this.request('GET', '/runtimes', { idempotent: true }), 200);
      this.runtimes = new Map((reply.runtimes || []).filter((r) => r && typeof r === 'object').map((r) => [String(r.name), r]));
    }
    const info = this.runtimes.get(this.runtime || '');
    if (info && info.sessions_hibernate === false) throw notSupported(`${what} on runtime '${this.runtime}'`);
  }

  async dropFork(fork) {
    try {
      await METHODS['sandbox.destroy'].call(this, { sandboxId: fork });
    } catch (e) {
      if (!(e instanceof SandboxError)) throw e;
      // `kill` deletes it again, or its TTL ends it
    }
  }

  async previewRun(params, onNotify, signal) {
    const parent = this.session(params);
    const fork = (await METHODS['sandbox.fork'].call(this, { sandboxId: parent })).sandboxId;
    let result;
    let changes;
    try {
      result = await METHODS.run.call(this, { ...params, preview: false, sandboxId: fork }, onNotify, signal);
      changes = await METHODS['sandbox.diff'].call(this, { sandboxId: fork, since: 'parent' });
    } catch (e) {
      await this.dropFork(fork);
      throw e;
    }
    this.parents.set(fork, parent);
    result.preview = { sandboxId: fork, changes };
    return result;
  }

  previewOf(params) {
    const pid = String(params.preview ?? '');
    const parent = this.parents.get(pid);
    if (parent === undefined) {
      throw new SandboxDestroyedError(`no preview '${pid}': it was committed, discarded, or never made by this client`, null, {
        kind: 'unknown_sandbox',
      });
    }
    return [pid, parent];
  }

  async cancel(runId) {
    try {
      await this.request('POST', `/runs/${seg(runId)}/cancel`);
    } catch {
      // best effort: the run's own timeout ends it otherwise
    }
  }

  /** Reads a run's stream to its `end` frame, reconnecting from the frame after the last
   * one seen when the connection drops or stays silent past the heartbeats. */
  async follow(runId, out, signal) {
    const WebSocket = require('ws');
    let last = 0;
    let failures = 0;
    const path = `/runs/${seg(runId)}/stream`;
    for (;;) {
      signal?.throwIfAborted();
      const outcome = await new Promise((resolve) => {
        const ws = new WebSocket(`${this.wsBase}${path}?from_seq=${last + 1}`, {
          headers: this.auth,
          perMessageDeflate: false,
          handshakeTimeout: 10_000,
        });
        this.sockets.add(ws);
        let idle = null;
        const arm = () => {
          clearTimeout(idle);
          idle = setTimeout(() => ws.terminate(), STREAM_IDLE_MS);
        };
        let settled = false;
        const settle = (v) => {
          if (settled) return;
          settled = true;
          clearTimeout(idle);
          signal?.removeEventListener('abort', onAbort);
          this.sockets.delete(ws);
          resolve(v);
        };
        const onAbort = () => {
          ws.terminate();
          settle({ aborted: true });
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        ws.on('open', arm);
        ws.on('unexpected-response', (_req, res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const status = res.statusCode;
            if (status < 500 && status !== 429) {
              // The run or its owner is not this client's: no reconnect changes that.
              settle({ error: httpError(status, Buffer.concat(chunks).toString('utf8'), res.statusMessage) });
            } else settle({ drop: new Error(`HTTP ${status}`) });
          });
        });
        ws.on('message', (raw) => {
          arm();
          let frame;
          try {
            frame = JSON.parse(raw.toString('utf8'));
          } catch {
            return;
          }
          if (!frame || typeof frame !== 'object') return;
          // A resume note carries the seq of the frame after it (seed 003's `seq: m`): it is
          // no frame of the run, so it neither moves nor is judged by the last seq seen.
          if (Number.isInteger(frame.seq) && frame.event !== 'resume') {
            if (frame.seq <= last) return;
            last = frame.seq;
          }
          failures = 0;
          if (take(frame, out)) {
            ws.close();
            settle({ done: true });
          }
        });
        ws.on('error', (e) => settle({ drop: e }));
        ws.on('close', () => settle({ drop: new Error('the stream closed before its end') }));
      });
      if (outcome.done) return;
      if (outcome.aborted) throw signal.reason;
      if (outcome.error) throw outcome.error;
      failures++;
      if (failures > RETRIES || this.closed) {
        if (this.closed) throw destroyed();
        throw new SandboxError(`lost the output stream of run ${runId} (last frame ${last}): ${outcome.drop.message}`, null, {
          kind: 'stream_lost',
          run_id: runId,
          last_seq: last,
        });
      }
      this.streamReconnects++;
      await sleep(backoff(failures - 1));
    }
  }

  processPath(params, tail = '') {
    const sid = seg(this.session(params));
    if (params.pid === undefined) return `/sessions/${sid}/processes${tail}`;
    return `/sessions/${sid}/processes/${Number(params.pid)}${tail}`;
  }
}

/** Applies one frame; `true` for the last (`end`). */
function take(frame, out) {
  const kind = frame.type;
  if (kind === 'stdout' || kind === 'stderr') out.add(kind, frameBytes(frame));
  else if (kind === 'truncated') out.cut = true;
  else if (kind === 'event') {
    const data = frame.data && typeof frame.data === 'object' ? frame.data : {};
    if (frame.event === 'resume' && Number(data.lost_count || 0) > 0) out.cut = true;
    else if (frame.event === 'end') return true;
  }
  return false;
}

const METHODS = {
  async create(params) {
    if (this.root !== null) throw new SandboxError('Sandbox already created', null, { kind: 'invalid_request' });
    const body = createBody(params);
    const session = this.json(await this.request('POST', '/sessions', { json: body, idempotencyKey: true }), 200, 201);
    this.root = String(session.session_id);
    this.runtime = session.runtime ? String(session.runtime) : null;
    this.ttlSec = body.ttl_sec ?? null;
    return { ok: true };
  },

  async run(params, onNotify, signal) {
    if (params.atomic) throw notSupported('atomic');
    if (params.preview) return this.previewRun(params, onNotify, signal);
    if (params.truncation !== undefined) throw notSupported('truncation');
    const body = {
      spec_version: SPEC_VERSION,
      session_id: this.session(params),
      // `bash -c LINE` is the line itself to the service's wasm shell: it runs in the
      // session's shell, whose state (cd, variables, functions) the next run sees.
      command: ['bash', '-c', String(params.command)],
    };
    if (params.env) body.env = params.env;
    if (params.cwd !== undefined) body.cwd = params.cwd;
    if (params.timeoutMs !== undefined) body.timeout_sec = seconds(params.timeoutMs);
    if (params.stdin !== undefined) body.stdin = Buffer.from(String(params.stdin), 'utf8').toString('base64');
    else if (params.stdinBase64 !== undefined) body.stdin = String(params.stdinBase64);
    const created = this.json(await this.request('POST', '/runs', { json: body, idempotencyKey: true }), 200, 202);
    const runId = String(created.run_id);
    const out = new Output(params.stream ? onNotify : null);
    try {
      await this.follow(runId, out, signal);
    } catch (e) {
      // The caller gives up on it (an abort, a lost stream): it should not go on holding the
      // session.
      await this.cancel(runId);
      throw e;
    }
    out.finish();
    const status = this.json(await this.request('GET', `/runs/${seg(runId)}`, { idempotent: true }), 200);
    return runResult(runId, status, out);
  },

  async 'process.start'(params) {
    const body = { command: String(params.command) };
    if (params.env) body.env = params.env;
    if (params.cwd !== undefined) body.cwd = params.cwd;
    if (params.timeoutMs !== undefined) body.timeout_ms = Number(params.timeoutMs);
    if (params.stdin !== undefined) body.stdin = String(params.stdin);
    const view = this.json(await this.request('POST', this.processPath(params), { json: body }), 200, 201);
    return { pid: Number(view.pid) };
  },

  async 'process.output'(params) {
    const query = { stdout_offset: Number(params.stdoutOffset || 0), stderr_offset: Number(params.stderrOffset || 0) };
    const r = this.json(await this.request('GET', this.processPath(params, '/output'), { query, idempotent: true }), 200);
    return {
      stdout: utf8Chunk(r.stdout),
      stderr: utf8Chunk(r.stderr),
      stdoutOffset: Number(r.stdout.next_offset),
      stderrOffset: Number(r.stderr.next_offset),
      droppedStdout: Number(r.stdout.dropped_bytes || 0),
      droppedStderr: Number(r.stderr.dropped_bytes || 0),
      running: Boolean(r.running),
    };
  },

  async 'process.wait'(params) {
    const deadline = params.timeoutMs === undefined ? null : Date.now() + Number(params.timeoutMs);
    const path = this.processPath(params, '/wait');
    for (;;) {
      let left = WAIT_SLICE_MS;
      if (deadline !== null) left = Math.min(left, Math.max(0, deadline - Date.now()));
      const r = this.json(await this.request('POST', path, { query: { timeout_ms: left }, idempotent: true }), 200);
      if (!r.running && r.result && typeof r.result === 'object') return processResult(r.result);
      if (deadline !== null && Date.now() >= deadline) {
        throw new WaitTimeoutError(`process ${params.pid} is still running after ${params.timeoutMs} ms`, null, {
          kind: 'wait_timeout',
          pid: params.pid,
        });
      }
    }
  },

  async 'process.kill'(params) {
    const r = this.json(await this.request('POST', this.processPath(params, '/kill')), 200);
    return { killed: Boolean(r.killed) };
  },

  async 'process.write'(params) {
    const body = {};
    if (params.data !== undefined) body.data = String(params.data);
    if (params.dataBase64 !== undefined) body.data_base64 = String(params.dataBase64);
    if (params.eof) body.close = true;
    const r = this.json(await this.request('POST', this.processPath(params, '/stdin'), { json: body }), 200);
    return { written: Number(r.written || 0) };
  },

  async 'process.list'(params) {
    const r = this.json(await this.request('GET', this.processPath(params), { idempotent: true }), 200);
    return {
      processes: (r.processes || [])
        .filter((p) => p && typeof p === 'object')
        .map((p) => ({
          pid: Number(p.pid),
          command: String(p.command ?? ''),
          running: Boolean(p.running),
          exitCode: p.exit_code ?? null,
          startedAtMs: p.started_at ? Date.parse(p.started_at) || 0 : 0,
        })),
    };
  },

  async 'files.read'(params) {
    // Always a Range request: the service refuses a whole-file read past its cap (413).
    const offset = Number(params.offset || 0);
    const length = params.length;
    const end = length === undefined ? '' : String(offset + Math.max(1, Number(length)) - 1);
    const resp = await this.request('GET', this.filesPath(params, '/content'), {
      query: { path: String(params.path) },
      headers: { Range: `bytes=${offset}-${end}` },
      idempotent: true,
    });
    if (resp.status === 416) {
      // A start at or past the end: nothing more. `Content-Range: bytes */SIZE` says the size.
      const cr = resp.headers.get('content-range') || '';
      const tail = cr.split('/').pop();
      return { data: '', size: cr.startsWith('bytes */') && /^\d+$/.test(tail) ? Number(tail) : offset };
    }
    if (resp.status !== 200 && resp.status !== 206) throw httpError(resp.status, resp.body.toString('utf8'), resp.statusText);
    let content = resp.body;
    if (resp.status === 200) content = content.subarray(offset, length === undefined ? undefined : offset + Number(length));
    const total = resp.headers.get('x-file-size');
    return { data: content.toString('base64'), size: total !== null ? Number(total) : offset + content.length };
  },

  async 'files.write'(params) {
    const query = { path: String(params.path) };
    const append = Boolean(params.append);
    if (append) query.append = 'true';
    const resp = await this.request('PUT', this.filesPath(params, '/content'), {
      query,
      body: Buffer.from(params.data || '', 'base64'),
      headers: { 'Content-Type': 'application/octet-stream' },
      // Writing the same bytes again leaves the same file; appending them would not.
      idempotent: !append,
    });
    return this.json(resp, 200, 201);
  },

  async 'files.rename'(params) {
    this.json(await this.request('POST', this.filesPath(params, '/move'), { json: { from: String(params.from), to: String(params.to) } }), 200, 204);
    return { ok: true };
  },

  async 'files.list'(params) {
    const r = this.json(await this.request('GET', this.filesPath(params), { query: { path: String(params.path) }, idempotent: true }), 200);
    return { entries: r.entries || [] };
  },

  async 'files.mkdir'(params) {
    return this.json(await this.request('POST', this.filesPath(params, '/mkdir'), { json: { path: String(params.path) } }), 200, 201);
  },

  async 'files.rm'(params) {
    const query = { path: String(params.path), recursive: params.recursive ? 'true' : 'false' };
    this.json(await this.request('DELETE', this.filesPath(params), { query }), 200, 204);
    return { ok: true };
  },

  async 'files.stat'(params) {
    return this.json(await this.request('GET', this.filesPath(params, '/stat'), { query: { path: String(params.path) }, idempotent: true }), 200);
  },

  async 'snapshot.create'(params) {
    await this.forkable('snapshot()');
    const snap = this.json(await this.request('POST', `/sessions/${seg(this.session(params))}/snapshots`, { json: {} }), 200, 201);
    return { id: String(snap.snapshot_id) };
  },

  async 'snapshot.restore'(params) {
    await this.forkable('restore()');
    this.json(await this.request('POST', `/sessions/${seg(this.session(params))}/snapshots/${seg(String(params.id))}/restore`), 200);
    return { ok: true };
  },

  async 'sandbox.fork'(params) {
    await this.forkable('fork()');
    const body = this.ttlSec === null ? {} : { ttl_sec: this.ttlSec };
    const session = this.json(await this.request('POST', `/sessions/${seg(this.session(params))}/fork`, { json: body }), 200, 201);
    const fork = String(session.session_id);
    this.forks.add(fork);
    return { sandboxId: fork };
  },

  async 'sandbox.merge'(params) {
    await this.forkable('merge()');
    const body = { fork_session_id: String(params.from), env: Boolean(params.env), cwd: Boolean(params.cwd) };
    // The reply has the JSON-RPC result's names (`applied: [{path, change}]`, `env`, `cwd`).
    return this.json(await this.request('POST', `/sessions/${seg(this.session(params))}/merge`, { json: body }), 200);
  },

  async 'sandbox.diff'(params) {
    const since = params.since || 'mount';
    if (since === 'mount') throw notSupported("changes({ since: 'mount' }) (the service mounts no host folders)");
    await this.forkable('changes()');
    const query = { since };
    if (since === 'snapshot') query.snapshot_id = String(params.snapshotId ?? '');
    if (params.path !== undefined) query.path = String(params.path);
    const c = this.json(await this.request('GET', `/sessions/${seg(this.session(params))}/changes`, { query, idempotent: true }), 200);
    return {
      root: c.root,
      files: (c.files || []).map((f) => ({
        path: f.path,
        status: f.status,
        kind: f.kind,
        oldMode: f.old_mode,
        newMode: f.new_mode,
        binary: Boolean(f.binary),
      })),
      patch: c.patch || '',
    };
  },

  async 'sandbox.commit'(params) {
    const [pid, parent] = this.previewOf(params);
    const merged = await METHODS['sandbox.merge'].call(this, { sandboxId: parent, from: pid, env: params.env, cwd: params.cwd });
    this.parents.delete(pid);
    await this.dropFork(pid);
    return { applied: merged.applied || [], env: merged.env || [], cwd: merged.cwd ?? null };
  },

  async 'sandbox.discard'(params) {
    const [pid] = this.previewOf(params);
    await METHODS['sandbox.destroy'].call(this, { sandboxId: pid });
    this.parents.delete(pid);
    return { ok: true };
  },

  async 'sandbox.bestOf'(params) {
    const attempts = params.attempts;
    if (!Array.isArray(attempts) || attempts.length < 1 || attempts.length > MAX_ATTEMPTS) {
      throw new InvalidParamsError(`Invalid param: attempts must hold 1 to ${MAX_ATTEMPTS} attempts`, -32602, { kind: 'invalid_params' });
    }
    const parent = this.session(params);
    const workers = Math.max(1, Math.min(Number(params.concurrency || 0) || require('node:os').availableParallelism(), attempts.length));
    const results = new Array(attempts.length);
    let next = 0;
    const one = async (a) => {
      // The attempt's variables are exported in its fork, as on the other transports.
      const exports = Object.entries(a.env || {})
        .map(([k, v]) => `export ${k}=${shellQuote(v)}; `)
        .join('');
      const run = { sandboxId: parent, command: exports + String(a.command), preview: true };
      if (params.timeoutMs !== undefined) run.timeoutMs = params.timeoutMs;
      try {
        return await this.previewRun(run, null, null);
      } catch (e) {
        if (!(e instanceof SandboxError)) throw e;
        return { error: { code: e.rpcCode, message: e.message, data: e.data } };
      }
    };
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (next < attempts.length) {
          const i = next++;
          results[i] = await one(attempts[i]);
        }
      }),
    );
    return { attempts: results };
  },

  async 'sandbox.destroy'(params) {
    const sid = this.session(params);
    this.json(await this.request('DELETE', `/sessions/${seg(sid)}`), 200, 204);
    // Only once it is gone: a fork whose deletion failed is deleted again by `kill`.
    this.forks.delete(sid);
    return { ok: true };
  },

  async kill() {
    const sessions = [...this.forks].sort();
    if (this.root !== null) sessions.push(this.root);
    this.forks.clear();
    for (const sid of sessions) {
      try {
        await this.request('DELETE', `/sessions/${seg(sid)}`);
      } catch {
        // unreachable now: the session's TTL ends it
      }
    }
    return { ok: true };
  },
};

module.exports = { ServiceTransport, baseUrl, BASE_PATH };
