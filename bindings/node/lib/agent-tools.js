'use strict';
// The tools an agent framework hands its model, and what the model reads back from them,
// written once for every Node provider (`wasmsand/ai`, lib/ai.mjs). Names, arguments and
// replies are those of the Python providers (bindings/python/python/wasmsand/integrations/
// tools.py, docs/integrations.md), so that a prompt or an eval written against one framework
// reads the same on another.
//
// Whatever goes wrong becomes a short message saying what happened and what the model can do
// next (`describeError`), never an exception: a tool call that failed is information for the
// model, not the end of the agent's run. The one exception that passes is an abort of the
// caller's signal, which ends the run on purpose.
const {
  FileSystemError,
  InvalidParamsError,
  LimitExceededError,
  NotSupportedError,
  SandboxDestroyedError,
  SandboxError,
} = require('./errors');

/** The caps of a tool's reply and of a command's time (the Python `ToolSettings`, with the
 * timeouts in milliseconds as everywhere in this package). */
const DEFAULT_SETTINGS = Object.freeze({
  maxOutputChars: 12_000,
  maxReadBytes: 64 * 1024,
  maxListEntries: 500,
  maxTimeoutMs: 300_000,
  timeoutMs: undefined,
});

function settingsOf(given) {
  const s = { ...DEFAULT_SETTINGS };
  if (given === undefined || given === null) return s;
  if (typeof given !== 'object') throw new TypeError('settings must be an object');
  for (const [k, v] of Object.entries(given)) {
    if (!Object.hasOwn(DEFAULT_SETTINGS, k)) {
      throw new TypeError(`unknown setting: ${k}; known: ${Object.keys(DEFAULT_SETTINGS).join(', ')}`);
    }
    if (v === undefined) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      throw new TypeError(`setting ${k} must be a positive integer, not ${String(v)}`);
    }
    s[k] = v;
  }
  return s;
}

const TIMEOUT_PARAM = {
  type: 'number',
  description: "Seconds the command may run before it is stopped (optional; the sandbox's default otherwise).",
};

function objectSchema(properties, required) {
  return { type: 'object', properties, required, additionalProperties: false };
}

function deepFreeze(o) {
  for (const v of Object.values(o)) if (v && typeof v === 'object') deepFreeze(v);
  return Object.freeze(o);
}

/** Each tool's description and JSON schema, word for word those of the Python providers.
 * Frozen all through: every tool set built from it shares these objects. */
const TOOL_SPECS = deepFreeze({
  run_shell: {
    description:
      'Run a bash command line in the sandbox (an isolated WebAssembly machine with coreutils, grep, sed, awk, jq, ' +
      'git, python3 and more; no network). Files, the working directory and variables persist between calls. ' +
      'Returns the exit code, stdout and stderr.',
    inputSchema: objectSchema(
      {
        command: { type: 'string', description: 'The bash command line to run.' },
        cwd: { type: 'string', description: 'Directory to run it in, for this call only (optional).' },
        timeout: TIMEOUT_PARAM,
      },
      ['command'],
    ),
  },
  run_python: {
    description:
      'Run a Python 3 program in the sandbox (CPython with numpy, pandas, scipy, scikit-learn and matplotlib; no ' +
      'network, no subprocesses). Print what you want to see. Returns the exit code, stdout and stderr (an ' +
      "exception's traceback is on stderr).",
    inputSchema: objectSchema(
      { code: { type: 'string', description: "The program's source code." }, timeout: TIMEOUT_PARAM },
      ['code'],
    ),
  },
  read_file: {
    description:
      'Read a text file from the sandbox. Long files are cut at a size limit; the reply says how to read the rest.',
    inputSchema: objectSchema(
      { path: { type: 'string', description: "Absolute, or relative to the shell's directory." } },
      ['path'],
    ),
  },
  write_file: {
    description:
      'Write a text file in the sandbox, replacing it if it exists and creating missing directories. Writable ' +
      'places are /home/user (the home directory) and /tmp.',
    inputSchema: objectSchema(
      {
        path: { type: 'string', description: "Absolute, or relative to the shell's directory." },
        content: { type: 'string', description: 'The whole new content of the file.' },
      },
      ['path', 'content'],
    ),
  },
  list_directory: {
    description: "List a directory in the sandbox: each entry's name, type and size.",
    inputSchema: objectSchema(
      { path: { type: 'string', description: "The directory (optional; the shell's current directory)." } },
      [],
    ),
  },
});

/** Arguments the model got wrong; its message goes back to the model. */
class ArgumentError extends Error {}

// ---- the operations ------------------------------------------------------------------------

function textArg(args, name, required = true) {
  const value = args[name];
  if ((value === undefined || value === null) && !required) return undefined;
  if (typeof value !== 'string' || (required && value === '')) {
    throw new ArgumentError(`argument '${name}' must be a non-empty string`);
  }
  return value;
}

/** `%g` of Python, which the Python replies use for seconds. */
function seconds(ms) {
  return String(Number((ms / 1000).toPrecision(6)));
}

/** The run's options from the model's `cwd` and `timeout` (seconds), and the notes on what
 * was changed on the way. */
function runOptions(args, settings) {
  const opts = {};
  const notes = [];
  const cwd = textArg(args, 'cwd', false);
  if (cwd) opts.cwd = cwd;
  let ms = settings.timeoutMs;
  const asked = args.timeout;
  if (asked !== undefined && asked !== null) {
    if (typeof asked !== 'number' || !Number.isFinite(asked) || asked <= 0) {
      throw new ArgumentError(`timeout must be a positive number of seconds, not ${JSON.stringify(asked)}`);
    }
    // At least a millisecond: the engine counts whole ones, and 0 would mean "none".
    ms = Math.max(1, Math.round(asked * 1000));
  }
  if (ms !== undefined) {
    if (ms > settings.maxTimeoutMs) {
      notes.push(
        `the timeout asked for (${seconds(ms)} s) was lowered to the maximum, ${seconds(settings.maxTimeoutMs)} s.`,
      );
      ms = settings.maxTimeoutMs;
    }
    opts.timeoutMs = ms;
  }
  return { opts, notes };
}

/** The caller's abort ends the command (`commands.run`'s `signal`, docs/node.md): an agent
 * run that is stopped should not wait for a command it no longer wants. */
function signalOption(signal) {
  return signal ? { signal } : {};
}

async function shell(sandbox, args, settings, signal) {
  const command = textArg(args, 'command');
  const { opts, notes } = runOptions(args, settings);
  const r = await sandbox.commands.run(command, { ...opts, ...signalOption(signal) });
  return presentRun(r, settings, { timeoutMs: opts.timeoutMs, notes });
}

async function python(sandbox, args, settings, signal) {
  const code = textArg(args, 'code');
  // `cwd` is not offered to the model; a provider may pass it.
  const { opts, notes } = runOptions(args, settings);
  // The program goes on stdin, not in the command line: no quoting to get wrong, and no
  // command-length limit for a long program.
  const r = await sandbox.commands.run('python3 -', { ...opts, stdin: code, ...signalOption(signal) });
  return presentRun(r, settings, { timeoutMs: opts.timeoutMs, notes });
}

async function readFile(sandbox, args, settings) {
  const filePath = textArg(args, 'path');
  const info = await sandbox.files.stat(filePath);
  if (info.type === 'dir') return `${filePath} is a directory, not a file: list it with list_directory.`;
  // One byte past the cap tells whether there is more; a symlink's own size says nothing
  // about its target's.
  const head = await readHead(sandbox, filePath, settings.maxReadBytes + 1);
  return presentFile(filePath, head, info.type === 'file' ? info.size : null, settings);
}

async function writeFile(sandbox, args) {
  const filePath = textArg(args, 'path');
  const content = args.content;
  if (typeof content !== 'string') throw new ArgumentError("argument 'content' must be a string");
  await sandbox.files.write(filePath, content);
  return `wrote ${Buffer.byteLength(content, 'utf8')} bytes to ${filePath}`;
}

async function listDirectory(sandbox, args, settings) {
  const dir = textArg(args, 'path', false) || '.';
  return presentListing(dir, await sandbox.files.list(dir), settings);
}

const OPERATIONS = {
  run_shell: shell,
  run_python: python,
  read_file: readFile,
  write_file: writeFile,
  list_directory: listDirectory,
};

/** Runs the tool `name` with the model's arguments in `sandbox`; resolves with the text the
 * model reads, whatever happened. Rejects only with the reason of an aborted `signal`. */
async function runTool(name, sandbox, args, settings = DEFAULT_SETTINGS, signal = undefined) {
  const op = OPERATIONS[name];
  if (!op) throw new TypeError(`no tool named ${name}`);
  signal?.throwIfAborted();
  try {
    if (args === null || typeof args !== 'object' || Array.isArray(args)) {
      throw new ArgumentError('the arguments must be an object');
    }
    return await op(sandbox, args, settings, signal);
  } catch (e) {
    if (signal?.aborted && e === signal.reason) throw e;
    return describeError(e);
  }
}

/** The first `limit` bytes of a file at most, read in the transport's chunks: a large file
 * is never read whole to show the model its start. */
async function readHead(sandbox, filePath, limit) {
  const parts = [];
  let held = 0;
  for await (const chunk of await sandbox.files.read(filePath, { format: 'stream' })) {
    parts.push(chunk);
    held += chunk.length;
    if (held >= limit) break;
  }
  return Buffer.concat(parts).subarray(0, limit);
}

// ---- what the model reads ------------------------------------------------------------------

/** `text` within `limit` UTF-16 units, its start and end kept; and how many were cut. A cut
 * never falls between the two halves of a surrogate pair. */
function clip(text, limit) {
  if (text.length <= limit) return [text, 0];
  let head = Math.floor((limit * 3) / 5);
  let tailStart = text.length - (limit - head);
  if (isLowSurrogate(text.charCodeAt(head))) head -= 1;
  if (isLowSurrogate(text.charCodeAt(tailStart))) tailStart += 1;
  const cut = tailStart - head;
  return [`${text.slice(0, head)}\n[... ${cut} characters left out ...]\n${text.slice(tailStart)}`, cut];
}

function isLowSurrogate(code) {
  return code >= 0xdc00 && code <= 0xdfff;
}

function cutNote(stream, r, cut) {
  const spilled = r.spilled?.[stream];
  if (spilled) {
    return (
      `${stream} was longer than the sandbox keeps; all of it is in ${spilled}: search or page that file ` +
      '(grep, head, tail, sed -n) rather than printing it whole.'
    );
  }
  if (r.truncated?.[stream]) {
    return (
      `${stream} was cut at the sandbox's output limit: send it to a file (command > /tmp/out.txt) and read ` +
      'the parts you need with grep, head or tail.'
    );
  }
  if (cut) {
    return (
      `${cut} characters in the middle of ${stream} are not shown: send it to a file (command > /tmp/out.txt) ` +
      'and read the parts you need with grep, head or tail.'
    );
  }
  return null;
}

// What a limit named in `usage.limitsHit` means, and what to do about it. Output limits are
// left to the truncation notes, the time limit to the TIMEOUT note.
const LIMITS = {
  memoryBytes:
    "a program ran out of memory (the sandbox caps each program's memory): work on smaller pieces of the data",
  fsBytes: "the sandbox's disk space is full: delete files you no longer need",
  fileCount: 'the sandbox holds as many files as it may: delete files you no longer need',
  commandBytes: 'the command line is too long: write the script to a file and run the file',
  shell:
    "the shell's own bounds (nesting depth, a value's size, a glob's matches): split the work into smaller steps",
  toolCalls: 'the host tool calls of one run are used up: make fewer calls per run',
  netRequests: 'the network requests of one run are used up: make fewer requests per run',
  netBytes: 'the network bytes of one run are used up: fetch less per run',
};

/** Short, actionable sentences on the limits a run ran into (empty when none). */
function limitNotes(r, timeoutMs) {
  const notes = [];
  if (r.errorClass === 'TIMEOUT') {
    const within = timeoutMs ? ` of ${seconds(timeoutMs)} s` : '';
    notes.push(
      `the command was stopped at its time limit${within} (exit code ${r.exitCode}): make it do less per call ` +
        '(less data, fewer iterations), or run it again with a longer timeout.',
    );
  } else if (r.errorClass === 'CANCELLED') {
    notes.push('the command was cancelled before it ended.');
  } else if (r.errorClass === 'CAPABILITY_DENIED') {
    notes.push(
      'the command asked for something this sandbox does not provide (it has no host processes, devices or ' +
        'network unless given one): do it another way inside the sandbox.',
    );
  }
  const hit = (r.usage?.limitsHit ?? []).filter((n) => Object.hasOwn(LIMITS, n)).map((n) => LIMITS[n]);
  if (hit.length) notes.push(`a sandbox limit was hit: ${hit.join('; ')}.`);
  else if (r.errorClass === 'LIMIT_EXCEEDED') {
    notes.push('the command hit a sandbox limit and was stopped: split the work into smaller steps.');
  }
  return notes;
}

/** Every note on a run: streams cut (by the sandbox, or by `cuts`: characters a reply left
 * out of each stream), then the limits it ran into. */
function runNotes(r, timeoutMs, cuts = {}) {
  const notes = ['stdout', 'stderr'].map((s) => cutNote(s, r, cuts[s] ?? 0)).filter(Boolean);
  return [...notes, ...limitNotes(r, timeoutMs)];
}

/** A command's result as the model reads it: exit code, stdout, stderr, then notes. */
function presentRun(r, settings = DEFAULT_SETTINGS, { timeoutMs, notes = [] } = {}) {
  const parts = [`exit code ${r.exitCode}`];
  const cuts = {};
  for (const [name, text] of [
    ['stdout', r.stdout],
    ['stderr', r.stderr],
  ]) {
    const [shown, cut] = clip(text, settings.maxOutputChars);
    cuts[name] = cut;
    if (text) parts.push(`--- ${name} ---\n${shown.replace(/\n+$/, '')}`);
  }
  if (!r.stdout && !r.stderr) parts.push('(no output)');
  for (const n of [...notes, ...runNotes(r, timeoutMs, cuts)]) parts.push(`note: ${n}`);
  return parts.join('\n');
}

/** `bytes` as UTF-8, or null when it is not text. A cut file may end inside a character:
 * those last bytes are held back (the decoder's streaming mode) rather than calling the file
 * binary. */
function decodeHead(bytes, complete) {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes, { stream: !complete });
  } catch {
    return null;
  }
}

/** The start of a file (`head`: at most one byte more than `maxReadBytes`) as the model
 * reads it, with a note when it is cut, empty or binary; `size` is the file's size when known. */
function presentFile(filePath, head, size, settings = DEFAULT_SETTINGS) {
  const shown = head.subarray(0, settings.maxReadBytes);
  const complete = head.length <= settings.maxReadBytes;
  const ofSize = size === null || size === undefined ? 'size unknown' : `${size} bytes`;
  if (head.length === 0) return `${filePath} is empty (0 bytes).`;
  const text = shown.subarray(0, 8192).includes(0) ? null : decodeHead(shown, complete);
  if (text === null) {
    return (
      `${filePath} is a binary file (${ofSize}), not shown as text. Look into it with a command instead, e.g. ` +
      `\`head -c 256 ${filePath} | od -c\`, or with a Python program.`
    );
  }
  if (complete) return text;
  // The bytes the text holds, not those read: a character cut at the end was left out, so the
  // rest starts there.
  const through = Buffer.byteLength(text, 'utf8');
  const ofTotal = size === null || size === undefined ? '' : ` of ${size}`;
  return (
    `${text}\n[showing the first ${through}${ofTotal} bytes of ${filePath}; read further with a command, e.g. ` +
    `\`tail -c +${through + 1} ${filePath} | head -c ${settings.maxReadBytes}\`, or search it with grep]`
  );
}

/** A directory's entries, one a line: `name/` for a directory, `name -> (symlink)` for a
 * symlink, `name  N bytes` for a file. */
function presentListing(dir, entries, settings = DEFAULT_SETTINGS) {
  if (!entries.length) return `${dir} is empty.`;
  const lines = entries.slice(0, settings.maxListEntries).map((e) => {
    if (e.type === 'dir') return `${e.name}/`;
    if (e.type === 'symlink') return `${e.name} -> (symlink)`;
    return `${e.name}  ${e.size} bytes`;
  });
  const rest = entries.length - settings.maxListEntries;
  if (rest > 0) {
    lines.push(`[${rest} more entries not shown: narrow it down with a command, e.g. \`ls ${dir} | grep PATTERN\`]`);
  }
  return lines.join('\n');
}

// A filesystem error by its errno name: `{path}` is ": PATH" when the error names a path.
const FS_MESSAGES = {
  ENOENT: 'No such file or directory{path}. Check the path; list_directory shows what exists.',
  EISDIR: 'It is a directory{path}. Use list_directory for a directory.',
  ENOTDIR: 'Not a directory{path}. A part of the path is a file.',
  EEXIST: 'Already exists{path}. Choose another path or remove it first.',
  EROFS: 'Read-only{path}. Only /home/user and /tmp are writable in this sandbox; write there instead.',
  EACCES: 'Read-only{path}. Only /home/user and /tmp are writable in this sandbox; write there instead.',
  EPERM: 'Read-only{path}. Only /home/user and /tmp are writable in this sandbox; write there instead.',
};

// The SDK's other errors, most specific first.
const MESSAGES = [
  [SandboxDestroyedError, () => 'The sandbox has been shut down; nothing more can run in it. Finish with what you have.'],
  [NotSupportedError, (e) => `This sandbox cannot do that: ${e.message}. Do it another way.`],
  [LimitExceededError, (e) => `A sandbox limit was reached: ${e.message}. Wait for or end running work, then retry.`],
  [InvalidParamsError, (e) => `The sandbox refused the arguments: ${e.message}. Correct them and retry.`],
  [ArgumentError, (e) => `Invalid arguments: ${e.message}. Correct them and retry.`],
];

/** What a failed call means for the model: what happened, and what it can do next. */
function describeError(e) {
  if (e instanceof FileSystemError) {
    if (e.errno === 'ENOSPC') {
      return "The sandbox's disk is full (its size or file-count limit): delete files you no longer need, then retry.";
    }
    const template = FS_MESSAGES[e.errno];
    const where = e.path ? `: ${e.path}` : '';
    if (template) return template.replace('{path}', where);
    return `The sandbox refused it (${e.message}).`;
  }
  for (const [cls, message] of MESSAGES) if (e instanceof cls) return message(e);
  if (e instanceof SandboxError) return `The sandbox refused the request${e.kind ? ` (${e.kind})` : ''}: ${e.message}.`;
  const name = e && typeof e === 'object' && e.constructor ? e.constructor.name : typeof e;
  return `The tool failed: ${name}: ${e instanceof Error ? e.message : String(e)}.`;
}

module.exports = {
  DEFAULT_SETTINGS,
  TOOL_SPECS,
  ArgumentError,
  settingsOf,
  runTool,
  presentRun,
  presentFile,
  presentListing,
  runNotes,
  limitNotes,
  describeError,
};
