// wasmsand for the Vercel AI SDK (`wasmsand/ai`, docs/integrations.md): the SDK's sandbox
// session (`Experimental_SandboxSession`, handed to `generateText` as `experimental_sandbox`)
// over a wasmsand sandbox, and the five tools of every wasmsand provider built with the SDK's
// own `tool()` and `jsonSchema()`. ESM, as the SDK is; `require('wasmsand')` never loads it.
import { posix } from 'node:path';
import { jsonSchema, tool } from 'ai';
import wasmsand from '../index.js';
import core from './agent-tools.js';

const { Sandbox, FileSystemError, ProcessNotFoundError, SandboxDestroyedError } = wasmsand;
const { DEFAULT_SETTINGS, TOOL_SPECS, describeError, runNotes, runTool, settingsOf } = core;

// The shell's "cannot execute": what `run` answers when the sandbox refused the command itself
// (shut down, arguments refused), with the reason on stderr, as the Python session does.
const REFUSED = 126;

/** The AI SDK's sandbox session over a wasmsand `Sandbox`. Relative paths, and a command's
 * `workingDirectory`, resolve against `workingDirectory` (default `/home/user`), which never
 * changes: a `cd` inside a command lasts for that command, as the SDK's contract says. */
export class WasmsandSandboxSession {
  /** A session over the caller's sandbox, which `close()` leaves running. */
  constructor(sandbox, { workingDirectory = '/home/user', timeoutMs } = {}) {
    if (!(sandbox instanceof Sandbox)) throw new TypeError('WasmsandSandboxSession needs a wasmsand Sandbox');
    if (typeof workingDirectory !== 'string' || !workingDirectory.startsWith('/')) {
      throw new TypeError(`workingDirectory must be an absolute path, not ${String(workingDirectory)}`);
    }
    this.sandbox = sandbox;
    this.workingDirectory = posix.normalize(workingDirectory);
    this.timeoutMs = timeoutMs;
    this.owned = false;
  }

  /** A session over a sandbox of its own (`Sandbox.create(options)`), ended by `close()`. */
  static async create({ workingDirectory, ...options } = {}) {
    const sandbox = await Sandbox.create(options);
    let session;
    try {
      session = new WasmsandSandboxSession(sandbox, { workingDirectory, timeoutMs: options.timeoutMs });
    } catch (e) {
      await sandbox.kill(); // refused options: no one else holds this sandbox to end it
      throw e;
    }
    session.owned = true;
    return session;
  }

  get description() {
    return [
      'A wasmsand sandbox: a bash session compiled to WebAssembly, with coreutils, grep, sed, awk, jq, git, ' +
        'python3 (numpy, pandas) and more, over an in-memory filesystem. There are no host processes, and no ' +
        'network unless this sandbox was given an allowlist.',
      'Writable places are /home/user and /tmp; the rest of the filesystem is read-only.',
      'Every command is bounded in time, memory and output; a command stopped at its time limit exits with 124.',
      `Commands start in ${this.workingDirectory}, and relative paths resolve against it.`,
    ].join('\n');
  }

  resolve(p) {
    if (typeof p !== 'string' || p === '') throw new TypeError('a path must be a non-empty string');
    return posix.resolve(this.workingDirectory, p);
  }

  runOptions(workingDirectory, env) {
    const opts = { cwd: this.resolve(workingDirectory ?? '.') };
    if (env) opts.envs = env;
    if (this.timeoutMs !== undefined) opts.timeoutMs = this.timeoutMs;
    return opts;
  }

  /** Runs a command to its end. The notes of the Python providers (output cut, time limit,
   * other limits) follow the command's own stderr, so a tool that hands the model this result
   * shows them; a command the sandbox refused is exit 126 with the reason on stderr. */
  async run({ command, workingDirectory, env, abortSignal }) {
    abortSignal?.throwIfAborted();
    let r;
    try {
      const opts = this.runOptions(workingDirectory, env);
      r = await this.sandbox.commands.run(command, abortSignal ? { ...opts, signal: abortSignal } : opts);
    } catch (e) {
      if (abortSignal?.aborted) throw abortSignal.reason;
      return { exitCode: REFUSED, stdout: '', stderr: `${describeError(e)}\n` };
    }
    const notes = runNotes(r, this.timeoutMs).map((n) => `note: ${n}\n`).join('');
    const stderr = !notes || !r.stderr || r.stderr.endsWith('\n') ? r.stderr : `${r.stderr}\n`;
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: stderr + notes };
  }

  /** Starts a background process (docs/processes.md): its output streams as it comes, its
   * standard input is open only with `stdin: true`. */
  async spawn({ command, workingDirectory, env, abortSignal, stdin = false }) {
    abortSignal?.throwIfAborted();
    const out = pushStream();
    const err = pushStream();
    const encoder = new TextEncoder();
    const handle = await this.sandbox.commands.run(command, {
      ...this.runOptions(workingDirectory, env),
      background: true,
      onStdout: (s) => out.push(encoder.encode(s)),
      onStderr: (s) => err.push(encoder.encode(s)),
    });
    handle.drained.then(
      () => {
        out.close();
        err.close();
      },
      (e) => {
        out.fail(e);
        err.fail(e);
      },
    );
    if (!stdin) await handle.closeStdin();
    const kill = async () => {
      try {
        await handle.kill();
      } catch (e) {
        // Already ended and forgotten, or the sandbox is gone: nothing left to end.
        if (!(e instanceof ProcessNotFoundError || e instanceof SandboxDestroyedError)) throw e;
      }
    };
    const onAbort = () => kill().catch(() => {});
    abortSignal?.addEventListener('abort', onAbort, { once: true });
    const proc = {
      pid: handle.pid,
      stdout: out.stream,
      stderr: err.stream,
      async wait() {
        let r;
        try {
          r = await handle.wait();
        } finally {
          abortSignal?.removeEventListener('abort', onAbort);
        }
        if (abortSignal?.aborted) throw abortSignal.reason;
        return { exitCode: r.exitCode };
      },
      kill,
    };
    if (stdin) {
      proc.stdin = new WritableStream({
        write: (chunk) => handle.sendStdin(chunk),
        close: () => handle.closeStdin(),
        abort: () => handle.closeStdin(),
      });
    }
    return proc;
  }

  async readFile({ path, abortSignal }) {
    abortSignal?.throwIfAborted();
    const it = (await this.sandbox.files.read(this.resolve(path), { format: 'stream' }))[Symbol.asyncIterator]();
    // The first chunk is read now: a missing file is `null`, not a stream that fails later.
    let first;
    try {
      first = await it.next();
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
    return new ReadableStream({
      async pull(controller) {
        const next = first ?? (await it.next());
        first = null;
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel() {
        await it.return?.();
      },
    });
  }

  async readBinaryFile({ path, abortSignal }) {
    abortSignal?.throwIfAborted();
    try {
      return await this.sandbox.files.read(this.resolve(path));
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
  }

  async readTextFile({ path, encoding = 'utf-8', startLine, endLine, abortSignal }) {
    const bytes = await this.readBinaryFile({ path, abortSignal });
    if (bytes === null) return null;
    const text = Buffer.isEncoding(encoding)
      ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString(encoding)
      : new TextDecoder(encoding).decode(bytes);
    return extractLines(text, startLine, endLine);
  }

  async writeFile({ path, content, abortSignal }) {
    abortSignal?.throwIfAborted();
    await this.sandbox.files.write(this.resolve(path), content);
  }

  async writeBinaryFile({ path, content, abortSignal }) {
    abortSignal?.throwIfAborted();
    await this.sandbox.files.write(this.resolve(path), content);
  }

  async writeTextFile({ path, content, encoding = 'utf-8', abortSignal }) {
    if (!Buffer.isEncoding(encoding)) throw new RangeError(`unsupported encoding: ${encoding}`);
    await this.writeBinaryFile({ path, content: Buffer.from(content, encoding), abortSignal });
  }

  /** Type and size, a symbolic link followed (wasmsand's own `stat` describes the link). */
  async stat({ path, abortSignal }) {
    abortSignal?.throwIfAborted();
    const p = this.resolve(path);
    let info;
    try {
      info = await this.sandbox.files.stat(p);
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
    if (info.type === 'file') return { type: 'file', size: info.size };
    if (info.type === 'dir') return { type: 'directory', size: info.size };
    if (info.type !== 'symlink') return { type: 'other', size: info.size };
    // A link: listing follows it to a directory; otherwise the target's size is what reading
    // it yields (there is no readlink call to stat the target by name).
    try {
      await this.sandbox.files.list(p);
      return { type: 'directory', size: 0 };
    } catch (e) {
      // Before `missing`, which counts ENOTDIR as a path that is not there: here it is a
      // link to something other than a directory.
      if (!(e instanceof FileSystemError && e.errno === 'ENOTDIR')) {
        if (missing(e)) return null;
        throw e;
      }
    }
    let size = 0;
    try {
      for await (const chunk of await this.sandbox.files.read(p, { format: 'stream' })) size += chunk.length;
    } catch (e) {
      if (missing(e)) return null;
      throw e;
    }
    return { type: 'file', size };
  }

  async listDirectory({ path, abortSignal }) {
    abortSignal?.throwIfAborted();
    let entries;
    try {
      entries = await this.sandbox.files.list(this.resolve(path));
    } catch (e) {
      if (e instanceof FileSystemError && e.errno === 'ENOENT') return null;
      throw e;
    }
    return entries.map((e) => ({ name: e.name, type: ENTRY_TYPES[e.type] ?? 'other' }));
  }

  async deleteFile({ path, abortSignal }) {
    abortSignal?.throwIfAborted();
    const p = this.resolve(path);
    let info;
    try {
      info = await this.sandbox.files.stat(p);
    } catch (e) {
      if (missing(e)) return false;
      throw e;
    }
    if (info.type === 'dir') {
      throw new FileSystemError(`EISDIR: is a directory: ${p}`, null, { kind: 'filesystem', errno: 'EISDIR', path: p });
    }
    await this.sandbox.files.rm(p);
    return true;
  }

  /** Ends the sandbox if this session made it (`create`); a caller's sandbox stays. */
  async close() {
    if (this.owned) await this.sandbox.kill();
  }

  async [Symbol.asyncDispose]() {
    await this.close();
  }
}

const ENTRY_TYPES = { file: 'file', dir: 'directory', symlink: 'symlink' };

/** "Does not exist" for the SDK: the path, or a directory on the way to it, is not there. */
function missing(e) {
  return e instanceof FileSystemError && (e.errno === 'ENOENT' || e.errno === 'ENOTDIR');
}

/** Lines `startLine`..`endLine` (1-based, inclusive) of `text`, its line ending detected as
 * the SDK's own sessions do (`\r\n`, else `\n`, else `\r`). */
function extractLines(text, startLine, endLine) {
  if (startLine == null && endLine == null) return text;
  const eol = text.includes('\r\n') ? '\r\n' : text.includes('\n') ? '\n' : text.includes('\r') ? '\r' : '\n';
  const lines = text.split(eol);
  return lines.slice(Math.max(1, startLine ?? 1) - 1, Math.min(lines.length, endLine ?? lines.length)).join(eol);
}

/** A byte stream fed by pushes; pushes after the reader cancelled it are dropped. */
function pushStream() {
  let controller;
  let open = true;
  const stream = new ReadableStream({
    start(c) {
      controller = c;
    },
    cancel() {
      open = false;
    },
  });
  return {
    stream,
    push(chunk) {
      if (open) controller.enqueue(chunk);
    },
    close() {
      if (open) controller.close();
      open = false;
    },
    fail(e) {
      if (open) controller.error(e);
      open = false;
    },
  };
}

/** The five wasmsand tools as AI SDK tools: `run_shell`, `run_python`, `read_file`,
 * `write_file`, `list_directory`. Each runs in the step's `experimental_sandbox` when that is a
 * `WasmsandSandboxSession`, else in `sandbox` (a `Sandbox` or a session); each resolves with
 * the text the model reads (docs/integrations.md), whatever happened in the sandbox. */
export function createWasmsandTools({ sandbox, settings } = {}) {
  if (sandbox !== undefined && !(sandbox instanceof Sandbox || sandbox instanceof WasmsandSandboxSession)) {
    throw new TypeError('sandbox must be a wasmsand Sandbox or a WasmsandSandboxSession');
  }
  const caps = settingsOf(settings);
  const fallback = sandbox instanceof WasmsandSandboxSession ? sandbox.sandbox : sandbox;
  const tools = {};
  for (const [name, spec] of Object.entries(TOOL_SPECS)) {
    tools[name] = tool({
      description: spec.description,
      // No `validate`: the operations check their arguments themselves and answer the model
      // in the words of every wasmsand provider, rather than with a schema library's error.
      inputSchema: jsonSchema(spec.inputSchema),
      execute: (input, options) => runTool(name, sandboxFor(options, fallback), input, caps, options?.abortSignal),
    });
  }
  return tools;
}

function sandboxFor(options, fallback) {
  const session = options?.experimental_sandbox;
  if (session instanceof WasmsandSandboxSession) return session.sandbox;
  if (fallback) return fallback;
  // A program error, not the model's: it reaches the developer as the step's tool error.
  throw new Error(
    session
      ? 'the wasmsand tools run only in a wasmsand sandbox: pass a WasmsandSandboxSession as experimental_sandbox, ' +
          'or a sandbox to createWasmsandTools({ sandbox })'
      : 'no sandbox for the wasmsand tools: pass a WasmsandSandboxSession as experimental_sandbox, or a sandbox to ' +
          'createWasmsandTools({ sandbox })',
  );
}

export { DEFAULT_SETTINGS, TOOL_SPECS };
