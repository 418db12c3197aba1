'use strict';
// The `Sandbox` object: commands, files, tools, snapshots and forks, over any transport.
const crypto = require('node:crypto');
const path = require('node:path');
const {
  CommandExitError,
  InvalidParamsError,
  SandboxError,
  WaitTimeoutError,
  destroyedError,
  errorFromWire,
  invalidParams,
  notSupported,
} = require('./errors');
const {
  resultFromWire,
  fileInfoFromWire,
  processInfoFromWire,
  mergeResultFromWire,
  changesFromWire,
  mountInfoFromWire,
} = require('./results');
const { openTransport } = require('./transports');

// A run's timeout when neither the sandbox nor the run names one.
const DEFAULT_TIMEOUT_MS = 30_000;
// Bytes per files.write / files.read request of a chunked transfer (base64 makes the line a
// third longer; sandboxd's default line cap is 8 MiB).
const CHUNK_BYTES = 1 << 20;
// How long an idle reader of a background process waits between polls when no notification
// wakes it (a missed wake-up costs at most this much latency, never output).
const POLL_MS = 250;
// The longest one `process.wait` request blocks when the wait can be aborted: an abort is
// then seen within this long without leaving a request behind.
const WAIT_SLICE_MS = 1000;

const LIMIT_NAMES = [
  'stdoutBytes',
  'stderrBytes',
  'commandBytes',
  'fileCount',
  'memoryBytes',
  'toolCalls',
  'rpcBytes',
  'fsBytes',
  'timeoutMs',
  'spillBytes',
  'backgroundProcesses',
  'openFiles',
  'sessionOpenFiles',
  'pids',
];

const PRIVATE = Symbol('wasmsand.private');

function checkMs(name, v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
    throw invalidParams(`${name} must be a non-negative integer of milliseconds, not ${String(v)}`);
  }
  return v;
}

function envParam(envs) {
  if (envs === undefined || envs === null) return undefined;
  if (typeof envs !== 'object') throw new TypeError('envs must be an object of strings');
  const out = {};
  for (const [k, v] of Object.entries(envs)) {
    if (typeof v !== 'string') throw new TypeError(`envs must map strings to strings, not ${k}: ${typeof v}`);
    out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

function toBytes(data) {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new TypeError('data must be a string, a Uint8Array, an ArrayBuffer or an (async) iterable of them');
}

function b64(data) {
  return toBytes(data).toString('base64');
}

function fromB64(s) {
  const buf = Buffer.from(String(s), 'base64');
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

function stdinParams(stdin, textKey, bytesKey) {
  if (stdin === undefined || stdin === null) return {};
  if (typeof stdin === 'string') return { [textKey]: stdin };
  return { [bytesKey]: b64(stdin) };
}

function runParams(cmd, opts) {
  if (typeof cmd !== 'string') throw new TypeError(`command must be a string, not ${typeof cmd}`);
  const params = { command: cmd };
  const env = envParam(opts.envs);
  if (env) params.env = env;
  if (opts.cwd !== undefined && opts.cwd !== null) params.cwd = String(opts.cwd);
  const t = checkMs('timeoutMs', opts.timeoutMs);
  if (t !== undefined) params.timeoutMs = t;
  return params;
}

/** What a sandbox object shares with its `commands`, `files` and `tools`. */
class Handle {
  constructor(transport, sandboxId, tools) {
    this.t = transport;
    this.sandboxId = sandboxId;
    this.destroyed = false;
    this.chunkBytes = CHUNK_BYTES;
    // The functions behind registered tools, shared by a root and its forks (one transport
    // answers every `tool.call`).
    this.tools = tools || new Map();
    if (!tools) transport.setRequestHandler((method, params) => this.answer(method, params));
  }

  async answer(method, params) {
    if (method !== 'tool.call') throw new Error(`unknown request from the sandbox: ${method}`);
    const name = String(params.name);
    const fn = this.tools.get(name);
    if (!fn) throw new Error(`no tool named '${name}'`);
    return fn(params.args ?? {});
  }

  call(method, params = {}, opts = {}) {
    if (this.destroyed) return Promise.reject(destroyedError());
    if (this.sandboxId !== null) params.sandboxId = this.sandboxId;
    return this.t.call(method, params, opts);
  }
}

/** A background process (`commands.run(cmd, { background: true })`, `commands.connect(pid)`). */
class CommandHandle {
  constructor(h, pid, { onStdout, onStderr, check = false } = {}) {
    this.h = h;
    this.pid = pid;
    this.check = check;
    this.offsets = [0, 0];
    this.droppedStdout = 0;
    this.droppedStderr = 0;
    this.wakers = [];
    this.unsubscribe = h.t.subscribe(h.sandboxId, pid, () => this.wake());
    /** Settles once the callbacks have seen all the output (at once when there are none). */
    this.drained = Promise.resolve();
    if (onStdout || onStderr) {
      // The callbacks read the rings with offsets of their own, so they see every byte in
      // order, and take nothing from an iterator of this handle.
      const pump = new CommandHandle(h, pid);
      this.drained = (async () => {
        try {
          for await (const { stdout, stderr } of pump) {
            if (stdout && onStdout) onStdout(stdout);
            if (stderr && onStderr) onStderr(stderr);
          }
        } catch (e) {
          if (!(e instanceof SandboxError)) throw e;
          // the sandbox was destroyed or the process forgotten: nothing more to read
        }
      })();
    }
  }

  wake() {
    const w = this.wakers;
    this.wakers = [];
    for (const fn of w) fn();
  }

  sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakers.push(done);
    });
  }

  /** The output that arrived since the last read, and whether the process still runs. */
  async poll() {
    const r = await this.h.call('process.output', {
      pid: this.pid,
      stdoutOffset: this.offsets[0],
      stderrOffset: this.offsets[1],
    });
    this.offsets = [Number(r.stdoutOffset), Number(r.stderrOffset)];
    this.droppedStdout += Number(r.droppedStdout ?? 0);
    this.droppedStderr += Number(r.droppedStderr ?? 0);
    return { stdout: String(r.stdout ?? ''), stderr: String(r.stderr ?? ''), running: Boolean(r.running) };
  }

  /** Yields `{stdout, stderr}` text chunks as they arrive until the process has ended and
   * all its output was read. */
  async *[Symbol.asyncIterator]() {
    try {
      for (;;) {
        const { stdout, stderr, running } = await this.poll();
        if (stdout || stderr) yield { stdout, stderr };
        if (!running) {
          // Once more: output written just before the end may postdate the read.
          const last = await this.poll();
          if (last.stdout || last.stderr) yield { stdout: last.stdout, stderr: last.stderr };
          return;
        }
        await this.sleep(POLL_MS);
      }
    } finally {
      this.unsubscribe();
    }
  }

  /** Waits until the process ends and returns its result. Past `timeoutMs` rejects with
   * `WaitTimeoutError` and the process goes on; an aborted `signal` rejects with its reason
   * (the process goes on too: `kill()` ends it). */
  async wait({ timeoutMs, signal } = {}) {
    const limit = checkMs('timeoutMs', timeoutMs);
    let r;
    if (!signal) {
      r = await this.h.call('process.wait', limit === undefined ? { pid: this.pid } : { pid: this.pid, timeoutMs: limit });
    } else {
      const deadline = limit === undefined ? Infinity : Date.now() + limit;
      for (;;) {
        signal.throwIfAborted();
        const slice = Math.max(0, Math.min(WAIT_SLICE_MS, deadline - Date.now()));
        try {
          r = await abortable(this.h.call('process.wait', { pid: this.pid, timeoutMs: slice }), signal);
          break;
        } catch (e) {
          if (!(e instanceof WaitTimeoutError) || Date.now() >= deadline) throw e;
        }
      }
    }
    const result = resultFromWire(r);
    await this.drained;
    if (this.check && result.exitCode !== 0) throw new CommandExitError(result);
    return result;
  }

  /** Ends the process (exit 137, `errorClass` `CANCELLED`); `false` when it had ended. */
  async kill() {
    return Boolean((await this.h.call('process.kill', { pid: this.pid })).killed);
  }

  /** Writes to its standard input; resolves with the bytes written. */
  async sendStdin(data) {
    const r = await this.h.call('process.write', { pid: this.pid, ...stdinParams(data, 'data', 'dataBase64') });
    return Number(r.written);
  }

  /** Closes its standard input: it reads end of file once the pipe is drained. */
  async closeStdin() {
    await this.h.call('process.write', { pid: this.pid, eof: true });
  }
}

/** Rejects with the signal's reason when it aborts first. */
function abortable(promise, signal) {
  if (!signal) return promise;
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

class Commands {
  constructor(h) {
    this.h = h;
  }

  /** Runs `cmd` (bash syntax). See index.d.ts for the options. */
  async run(cmd, opts = {}) {
    const params = runParams(cmd, opts);
    const { onStdout, onStderr, signal } = opts;
    if (opts.background) {
      if (opts.atomic) throw invalidParams('atomic applies to foreground runs only');
      if (opts.preview) throw invalidParams('preview applies to foreground runs only');
      const pid = await this.start(params, opts.stdin);
      return new CommandHandle(this.h, pid, { onStdout, onStderr, check: opts.check });
    }
    signal?.throwIfAborted();
    Object.assign(params, stdinParams(opts.stdin, 'stdin', 'stdinBase64'));
    if (opts.atomic) params.atomic = true;
    if (opts.preview) params.preview = true;
    if (opts.truncation !== undefined) params.truncation = opts.truncation;
    let onNotify = null;
    if (onStdout || onStderr) {
      params.stream = true;
      onNotify = (p) => {
        const cb = p.stream === 'stdout' ? onStdout : onStderr;
        if (cb) cb(String(p.data ?? ''));
      };
    }
    const result = resultFromWire(await this.h.call('run', params, { onNotify, signal }));
    if (signal?.aborted) throw signal.reason;
    if (opts.check && result.exitCode !== 0) throw new CommandExitError(result);
    return result;
  }

  async start(params, stdin) {
    let raw = null;
    if (stdin !== undefined && stdin !== null && typeof stdin !== 'string') raw = b64(stdin);
    else if (typeof stdin === 'string') params.stdin = stdin;
    const pid = Number((await this.h.call('process.start', params)).pid);
    if (raw) await this.h.call('process.write', { pid, dataBase64: raw });
    return pid;
  }

  /** A handle on a background process of this sandbox started by anyone. */
  async connect(pid, { onStdout, onStderr } = {}) {
    await this.h.call('process.output', { pid: Number(pid), stdoutOffset: 0, stderrOffset: 0 });
    return new CommandHandle(this.h, Number(pid), { onStdout, onStderr });
  }

  /** The sandbox's background processes: running ones, then the most recently ended. */
  async list() {
    return (await this.h.call('process.list', {})).processes.map(processInfoFromWire);
  }

  /** Ends a background process; `false` when it had already ended. */
  async kill(pid) {
    return Boolean((await this.h.call('process.kill', { pid: Number(pid) })).killed);
  }
}

async function* chunksOf(data, size) {
  if (typeof data === 'string' || data instanceof Uint8Array || data instanceof ArrayBuffer || ArrayBuffer.isView(data)) {
    const buf = toBytes(data);
    for (let i = 0; i < Math.max(buf.length, 1); i += size) yield buf.subarray(i, i + size);
    return;
  }
  if (data && (typeof data[Symbol.asyncIterator] === 'function' || typeof data[Symbol.iterator] === 'function')) {
    // Re-cut into chunks of `size`, so that a stream of tiny pieces is not one request each.
    let pending = [];
    let held = 0;
    let any = false;
    for await (const piece of data) {
      const buf = toBytes(piece);
      pending.push(buf);
      held += buf.length;
      while (held >= size) {
        const all = Buffer.concat(pending);
        yield all.subarray(0, size);
        any = true;
        pending = [all.subarray(size)];
        held = all.length - size;
      }
    }
    if (held > 0 || !any) yield Buffer.concat(pending);
    return;
  }
  throw new TypeError('data must be a string, a Uint8Array, an ArrayBuffer or an (async) iterable of them');
}

class Files {
  constructor(h) {
    this.h = h;
  }

  /** The content of a file: bytes (default), `{ format: 'text' }` (UTF-8), or
   * `{ format: 'stream' }` (an async iterable of byte chunks). */
  async read(filePath, { format = 'bytes' } = {}) {
    if (format === 'stream') return this.stream(filePath);
    if (format !== 'bytes' && format !== 'text') {
      throw invalidParams(`format must be 'bytes', 'text' or 'stream', not ${String(format)}`);
    }
    const parts = [];
    for await (const chunk of this.stream(filePath)) parts.push(chunk);
    const all = Buffer.concat(parts);
    if (format === 'text') return all.toString('utf8');
    return new Uint8Array(all.buffer, all.byteOffset, all.byteLength);
  }

  async *stream(filePath, offset = 0) {
    for (;;) {
      const r = await this.h.call('files.read', { path: filePath, offset, length: this.h.chunkBytes });
      const chunk = fromB64(r.data);
      if (chunk.length === 0) return;
      offset += chunk.length;
      yield chunk;
      if (offset >= Number(r.size)) return;
    }
  }

  /** Writes a file, creating missing parents. More than one chunk goes to a hidden name next
   * to the target and is renamed into place when complete, so a failed upload never leaves a
   * partial file at `path`. */
  async write(filePath, data) {
    const chunks = chunksOf(data, this.h.chunkBytes);
    const first = await chunks.next();
    const second = await chunks.next();
    if (second.done) {
      await this.put(filePath, first.value ?? Buffer.alloc(0), false);
      return;
    }
    const temp = path.posix.join(path.posix.dirname(filePath), `.${path.posix.basename(filePath)}.upload-${crypto.randomBytes(6).toString('hex')}`);
    try {
      await this.put(temp, first.value, false);
      await this.put(temp, second.value, true);
      for await (const chunk of chunks) await this.put(temp, chunk, true);
      await this.h.call('files.rename', { from: temp, to: filePath });
    } catch (e) {
      await this.h.call('files.rm', { path: temp, recursive: false }).catch(() => {});
      throw e;
    }
  }

  async put(filePath, chunk, append) {
    const params = { path: filePath, data: Buffer.from(chunk).toString('base64') };
    if (append) params.append = true;
    await this.h.call('files.write', params);
  }

  /** Writes several files, in order. */
  async writeFiles(entries) {
    for (const e of entries) {
      if (Array.isArray(e)) await this.write(e[0], e[1]);
      else await this.write(e.path, e.data);
    }
  }

  /** Whether a file, directory or symlink is at `path`. */
  async exists(filePath) {
    try {
      await this.h.call('files.stat', { path: filePath });
      return true;
    } catch (e) {
      if (e && (e.code === 'ENOENT' || e.code === 'ENOTDIR')) return false;
      throw e;
    }
  }

  /** The entries of a directory, sorted by name. */
  async list(dir) {
    return (await this.h.call('files.list', { path: dir })).entries.map(fileInfoFromWire);
  }

  /** Creates a directory and missing parents; `false` if it already existed. */
  async makeDir(dir) {
    let st;
    try {
      st = await this.stat(dir);
    } catch (e) {
      if (e && e.code === 'ENOENT') {
        await this.h.call('files.mkdir', { path: dir });
        return true;
      }
      throw e;
    }
    if (st.type !== 'dir') {
      throw errorFromWire({ code: 1, message: `File exists: ${dir}`, data: { kind: 'filesystem', errno: 'EEXIST', path: dir } });
    }
    return false;
  }

  /** Creates a directory and any missing parents. */
  async mkdir(dir) {
    await this.h.call('files.mkdir', { path: dir });
  }

  /** Removes a file, or a directory with everything in it. */
  async remove(filePath) {
    await this.h.call('files.rm', { path: filePath, recursive: true });
  }

  /** Removes a file or an empty directory; a whole tree with `{ recursive: true }`. */
  async rm(filePath, { recursive = false } = {}) {
    await this.h.call('files.rm', { path: filePath, recursive: Boolean(recursive) });
  }

  /** Renames by rename(2)'s rules. */
  async rename(from, to) {
    await this.h.call('files.rename', { from, to });
  }

  /** Name, type and size of a path (a symlink itself). */
  async stat(filePath) {
    return fileInfoFromWire(await this.h.call('files.stat', { path: filePath }));
  }
}

class Tools {
  constructor(h) {
    this.h = h;
  }

  /** Offers `fn(args)` to guest Python as `tools.NAME(...)`; its (awaited) return value,
   * JSON-serializable, is what the guest gets; a throw is `host.ToolError` there. */
  async register(name, fn, { description, inputSchema } = {}) {
    if (typeof fn !== 'function') throw new TypeError('a tool must be a function');
    const params = { name, description: description ?? '' };
    if (inputSchema !== undefined) params.inputSchema = inputSchema;
    this.h.tools.set(name, fn);
    await this.h.call('tools.register', params);
  }

  /** Withdraws a tool; `false` if there was none of that name. */
  async unregister(name) {
    return Boolean((await this.h.call('tools.unregister', { name })).removed);
  }

  /** The names of the registered tools, sorted. */
  async list() {
    return (await this.h.call('tools.list', {})).tools.map(String);
  }
}

function limitsParam(limits) {
  if (limits === undefined || limits === null) return undefined;
  if (typeof limits !== 'object') throw new TypeError('limits must be an object');
  const out = {};
  for (const [k, v] of Object.entries(limits)) {
    if (v === undefined || v === null) continue;
    if (!LIMIT_NAMES.includes(k)) {
      throw invalidParams(`unknown limit: ${k}; known: ${LIMIT_NAMES.join(', ')}`);
    }
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
      throw invalidParams(`limit ${k} must be a non-negative integer, not ${String(v)}`);
    }
    out[k] = v;
  }
  return Object.keys(out).length ? out : undefined;
}

function networkParam(network) {
  const known = ['hosts', 'cidrs', 'ips', 'resolve', 'caPem'];
  const unknown = Object.keys(network).filter((k) => !known.includes(k));
  if (unknown.length) throw invalidParams(`network: unknown key(s): ${unknown.join(', ')}; known: ${known.join(', ')}`);
  const wire = { allowlist: {} };
  for (const k of ['hosts', 'cidrs', 'ips']) if (network[k]) wire.allowlist[k] = [...network[k]];
  if (network.resolve) wire.resolve = network.resolve;
  if (network.caPem) wire.caPem = [...network.caPem];
  return wire;
}

function mountParam(m) {
  if (typeof m === 'string') {
    let spec = m;
    let readOnly = false;
    for (const [suffix, ro] of [
      [':ro', true],
      [':rw', false],
    ]) {
      if (spec.endsWith(suffix)) {
        spec = spec.slice(0, -suffix.length);
        readOnly = ro;
        break;
      }
    }
    const i = spec.lastIndexOf(':');
    if (i <= 0 || i === spec.length - 1) throw invalidParams(`mount '${m}': expected 'HOST:PATH[:ro]'`);
    return { host: spec.slice(0, i), path: spec.slice(i + 1), ...(readOnly ? { readOnly } : {}) };
  }
  const w = { host: String(m.host), path: String(m.path) };
  for (const k of ['readOnly', 'gitignore', 'exclude', 'allowSecrets', 'maxHostBytes']) {
    if (m[k] !== undefined && m[k] !== null) w[k] = m[k];
  }
  return w;
}

function previewId(p) {
  if (p && typeof p === 'object' && 'exitCode' in p) {
    if (!p.preview) throw invalidParams('this result is not a preview: run it with preview: true');
    return p.preview.sandboxId;
  }
  return p.sandboxId;
}

function changesParams({ since = 'mount', snapshotId, path: p } = {}) {
  if (snapshotId !== undefined) since = 'snapshot';
  if (!['mount', 'parent', 'snapshot'].includes(since)) {
    throw invalidParams(`since must be 'mount', 'parent' or 'snapshot', not ${String(since)}`);
  }
  if (since === 'snapshot' && snapshotId === undefined) throw invalidParams("since: 'snapshot' needs snapshotId");
  const params = { since };
  if (snapshotId !== undefined) params.snapshotId = String(snapshotId);
  if (p !== undefined) params.path = p;
  return params;
}

class Sandbox {
  constructor(token, h) {
    if (token !== PRIVATE) throw new TypeError('use Sandbox.create(options)');
    this.h = h;
    this.commands = new Commands(h);
    this.files = new Files(h);
    this.tools = new Tools(h);
    this.killing = null;
  }

  /** A new sandbox on the transport the options select (index.d.ts, `SandboxOptions`). */
  static async create(opts = {}) {
    const t = openTransport(opts);
    const params = { timeoutMs: checkMs('timeoutMs', opts.timeoutMs) ?? DEFAULT_TIMEOUT_MS };
    if (opts.fsLimitBytes !== undefined) params.fsLimitBytes = opts.fsLimitBytes;
    const limits = limitsParam(opts.limits);
    if (limits) params.limits = limits;
    if (opts.deterministic) params.deterministic = opts.deterministic;
    if (opts.network) params.network = networkParam(opts.network);
    if (opts.mounts && opts.mounts.length) params.mounts = opts.mounts.map(mountParam);
    try {
      if (t.name === 'service') {
        if (params.mounts) throw notSupported("host folders (mounts): the service's sandboxes see no host files");
        if (opts.tools && Object.keys(opts.tools).length) throw notSupported('host tools (tools, sb.tools)');
        for (const [k, v] of Object.entries({ runtime: opts.runtime, baseImage: opts.image, ttlSec: opts.ttlSec, env: envParam(opts.env) })) {
          if (v !== undefined) params[k] = v;
        }
      }
      await t.call('create', params);
    } catch (e) {
      await t.close();
      throw e;
    }
    const h = new Handle(t, null);
    if (limits && limits.rpcBytes !== undefined) {
      // A request line holds a chunk in base64 plus its JSON envelope.
      h.chunkBytes = Math.max(256, Math.min(CHUNK_BYTES, Math.floor(((limits.rpcBytes - 512) * 3) / 4)));
    }
    const sb = new Sandbox(PRIVATE, h);
    try {
      for (const [name, fn] of Object.entries(opts.tools || {})) await sb.tools.register(name, fn);
    } catch (e) {
      await sb.kill();
      throw e;
    }
    return sb;
  }

  /** The transport this sandbox runs over. */
  get transport() {
    return this.h.t.name;
  }

  /** The fork's id on its server; `null` for a root sandbox. */
  get sandboxId() {
    return this.h.sandboxId;
  }

  /** Records files and shell state in O(1); resolves with an id for `restore`. */
  async snapshot() {
    return String((await this.h.call('snapshot.create', {})).id);
  }

  /** Puts files and shell state back as they were at `snapshotId`. */
  async restore(snapshotId) {
    await this.h.call('snapshot.restore', { id: snapshotId });
  }

  /** The whole state as a versioned, compressed blob, HMAC-authenticated with `key`. */
  async exportState({ key } = {}) {
    if (this.h.t.name === 'service') throw notSupported('exportState()');
    const params = key !== undefined ? { key: b64(key) } : {};
    return fromB64((await this.h.call('sandbox.export', params)).data);
  }

  /** A new sandbox holding the state `exportState` wrote (its limits included). */
  static async importState(blob, { key, transport, sandboxd } = {}) {
    if (transport === 'service') throw notSupported('importState()');
    const sb = await Sandbox.create({ transport: transport ?? 'inprocess', sandboxd });
    const params = { data: b64(blob) };
    if (key !== undefined) params.key = b64(key);
    try {
      await sb.h.call('sandbox.import', params);
    } catch (e) {
      await sb.kill();
      throw e;
    }
    return sb;
  }

  /** An independent copy in O(1): files, variables, functions, cwd and limits. */
  async fork() {
    const r = await this.h.call('sandbox.fork', {});
    const h = new Handle(this.h.t, String(r.sandboxId), this.h.tools);
    h.chunkBytes = this.h.chunkBytes;
    return new Sandbox(PRIVATE, h);
  }

  /** Applies here, three-way and all or nothing, the files `fork` changed since it was
   * forked (or last merged here); a conflict rejects with `MergeConflictError`. */
  async merge(fork, { env = false, cwd = false } = {}) {
    if (!(fork instanceof Sandbox) || fork.h.t !== this.h.t || fork.h.sandboxId === null) {
      throw new InvalidParamsError('not a fork of this sandbox: only a sandbox forked from this one merges into it', -32602, {
        kind: 'invalid_params',
      });
    }
    if (fork.h.destroyed) throw destroyedError();
    const r = await this.h.call('sandbox.merge', { from: fork.h.sandboxId, env: Boolean(env), cwd: Boolean(cwd) });
    return mergeResultFromWire(r);
  }

  /** Mounts the host directory `host` at `path` (read lazily, never written). */
  async mount(host, at, opts = {}) {
    return mountInfoFromWire(await this.h.call('sandbox.mount', mountParam({ ...opts, host, path: at })));
  }

  /** The host folders mounted in this sandbox. */
  async mounts() {
    return (await this.h.call('sandbox.mounts', {})).mounts.map(mountInfoFromWire);
  }

  /** What the sandbox changed, as paths and as a patch `git apply` takes. */
  async changes(opts = {}) {
    return changesFromWire(await this.h.call('sandbox.diff', changesParams(opts)));
  }

  /** Writes what `changes()` finds into the host directory `dir` (which must exist). */
  async exportChanges(dir, opts = {}) {
    const r = await this.h.call('sandbox.exportChanges', { ...changesParams(opts), dir: String(dir) });
    return { written: (r.written || []).map(String), removed: (r.removed || []).map(String), dirs: (r.dirs || []).map(String) };
  }

  /** Brings a preview's changes into this sandbox (three-way, as `merge`). */
  async commit(preview, { env = false, cwd = false } = {}) {
    return mergeResultFromWire(await this.h.call('sandbox.commit', { preview: previewId(preview), env: Boolean(env), cwd: Boolean(cwd) }));
  }

  /** Drops a preview and what it changed. */
  async discard(preview) {
    await this.h.call('sandbox.discard', { preview: previewId(preview) });
  }

  /** Runs each attempt in a fork of its own; results in order, each with its preview. */
  async bestOf(attempts, { concurrency, timeoutMs } = {}) {
    const wire = attempts.map((a) => (typeof a === 'string' ? { command: a } : { command: a.command, ...(a.env ? { env: a.env } : {}) }));
    const params = { attempts: wire };
    if (concurrency !== undefined) params.concurrency = concurrency;
    const t = checkMs('timeoutMs', timeoutMs);
    if (t !== undefined) params.timeoutMs = t;
    return (await this.h.call('sandbox.bestOf', params)).attempts.map((r) => {
      if (r.error) throw errorFromWire(r.error);
      return resultFromWire(r);
    });
  }

  /** Destroys this fork; a root sandbox is ended with `kill()`. */
  async destroy() {
    if (this.h.sandboxId === null) throw new SandboxError('cannot destroy a root sandbox; use kill()', null, { kind: 'invalid_params' });
    if (this.h.destroyed) throw destroyedError();
    await this.h.t.call('sandbox.destroy', { sandboxId: this.h.sandboxId });
    this.h.destroyed = true;
  }

  /** Destroys the root and every fork, and stops the server of an RPC sandbox. */
  async kill() {
    if (!this.killing) {
      this.killing = (async () => {
        if (this.h.destroyed) return;
        try {
          await this.h.t.call('kill', {});
        } catch {
          // already gone: there is nothing left to end
        }
        this.h.destroyed = true;
        await this.h.t.close();
      })();
    }
    return this.killing;
  }

  /** `await using sb = await Sandbox.create()`: a fork is destroyed, a root killed. */
  async [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]() {
    if (this.h.sandboxId !== null) {
      if (!this.h.destroyed) await this.destroy().catch(() => {});
    } else {
      await this.kill();
    }
  }
}

module.exports = { Sandbox, Commands, CommandHandle, Files, Tools, LIMIT_NAMES, DEFAULT_TIMEOUT_MS };
