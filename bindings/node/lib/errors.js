'use strict';
// Errors of the SDK, chosen by the wire's `error.data.kind` (and `data.errno` for filesystem
// errors), never by the message, whose wording may change (docs/protocol.md, "errors").

/** A request the sandbox refused. */
class SandboxError extends Error {
  constructor(message, rpcCode = null, data = null) {
    super(message);
    this.name = this.constructor.name;
    this.rpcCode = rpcCode;
    this.data = data;
    const kind = data && typeof data === 'object' && typeof data.kind === 'string' ? data.kind : null;
    this.kind = kind;
    // Node's own errors carry a string `code` callers branch on: the errno name for a
    // filesystem error, else the wire's kind.
    this.code = data && typeof data.errno === 'string' ? data.errno : kind ?? undefined;
  }
}

class ProcessNotFoundError extends SandboxError {}
class WaitTimeoutError extends SandboxError {}
class LimitExceededError extends SandboxError {}
class SandboxDestroyedError extends SandboxError {}
class InvalidParamsError extends SandboxError {}
class NotSupportedError extends SandboxError {}

class MergeConflictError extends SandboxError {
  constructor(message, rpcCode = null, data = null) {
    super(message, rpcCode, data);
    const raw = data && Array.isArray(data.conflicts) ? data.conflicts : [];
    this.conflicts = raw
      .filter((c) => c && typeof c === 'object')
      .map((c) => ({ path: String(c.path), ours: String(c.ours), theirs: String(c.theirs) }));
  }
}

/** A filesystem error in the sandbox: `code`/`errno` is its name (`ENOENT`, ...). */
class FileSystemError extends SandboxError {
  constructor(message, rpcCode = null, data = null) {
    super(message, rpcCode, data);
    this.errno = data && typeof data.errno === 'string' ? data.errno : undefined;
    this.path = data && typeof data.path === 'string' ? data.path : undefined;
  }
}

/** A command run with `check: true` exited non-zero; `result` is its whole result. */
class CommandExitError extends SandboxError {
  constructor(result) {
    const lines = result.stderr.trim().split('\n');
    const detail = lines[lines.length - 1] || '';
    super(`command exited with code ${result.exitCode}${detail ? `: ${detail}` : ''}`, null, {
      kind: 'command_exit',
    });
    this.result = result;
    this.exitCode = result.exitCode;
    this.stdout = result.stdout;
    this.stderr = result.stderr;
  }
}

const KINDS = {
  no_such_process: ProcessNotFoundError,
  wait_timeout: WaitTimeoutError,
  limit_exceeded: LimitExceededError,
  sandbox_destroyed: SandboxDestroyedError,
  unknown_sandbox: SandboxDestroyedError,
  invalid_params: InvalidParamsError,
  unknown_snapshot: InvalidParamsError,
  merge_conflict: MergeConflictError,
  not_supported: NotSupportedError,
  filesystem: FileSystemError,
};

/** The error matching a JSON-RPC `error` object. */
function errorFromWire(error) {
  const e = error && typeof error === 'object' ? error : {};
  const rpcCode = typeof e.code === 'number' ? e.code : null;
  let message = String(e.message ?? 'sandbox error');
  const data = e.data && typeof e.data === 'object' ? e.data : null;
  const kind = data && typeof data.kind === 'string' ? data.kind : null;
  if (data && typeof data.errno === 'string') return new FileSystemError(message, rpcCode, data);
  if (kind && Object.hasOwn(KINDS, kind)) {
    if (kind === 'unknown_sandbox') message = `sandbox has been destroyed (${message})`;
    return new KINDS[kind](message, rpcCode, data);
  }
  // -32602 without a kind: the dispatcher's older messages (a bad env name) say it in words.
  if (rpcCode === -32602) return new InvalidParamsError(message, rpcCode, data ?? { kind: 'invalid_params' });
  return new SandboxError(message, rpcCode, data);
}

function destroyedError(what = 'sandbox has been destroyed') {
  return new SandboxDestroyedError(what, null, { kind: 'sandbox_destroyed' });
}

function invalidParams(message) {
  return new InvalidParamsError(message, -32602, { kind: 'invalid_params' });
}

function notSupported(what, transport = 'service') {
  return new NotSupportedError(`${what} is not supported by the ${transport} transport`, null, {
    kind: 'not_supported',
  });
}

module.exports = {
  SandboxError,
  ProcessNotFoundError,
  WaitTimeoutError,
  LimitExceededError,
  SandboxDestroyedError,
  InvalidParamsError,
  NotSupportedError,
  MergeConflictError,
  FileSystemError,
  CommandExitError,
  errorFromWire,
  destroyedError,
  invalidParams,
  notSupported,
};
