// Types of the `wasmsand` package (docs/node.md). Checked by `tsc --strict` on
// examples/sample.ts (the node stage of scripts/test.sh).

/** How a sandbox is reached. */
export type Transport = 'inprocess' | 'rpc' | 'service';

/** Resource limits; a field left out keeps its default (docs/runs.md). Wire names. */
export interface Limits {
  stdoutBytes?: number;
  stderrBytes?: number;
  commandBytes?: number;
  fileCount?: number;
  memoryBytes?: number;
  toolCalls?: number;
  rpcBytes?: number;
  fsBytes?: number;
  timeoutMs?: number;
  spillBytes?: number;
  backgroundProcesses?: number;
  openFiles?: number;
  sessionOpenFiles?: number;
  pids?: number;
}

/** The names of `Limits`, in the order the engine declares them. */
export const LIMIT_NAMES: readonly (keyof Limits)[];

/** One entry of the engine's limits registry. */
export interface LimitSpec {
  name: string;
  wire: string;
  default: number;
  unit: string;
  doc: string;
}

/** The limits registry of the native part (loads the addon). */
export function limitSpecs(): LimitSpec[];

/** Deterministic mode: fixed clock, seeded randomness (docs/runs.md). */
export interface Deterministic {
  seed?: number;
  startTimeMs?: number;
  stepUs?: number;
}

/** The egress allowlist `curl` and `wget` in the sandbox reach the network through. */
export interface Network {
  hosts?: string[];
  cidrs?: string[];
  ips?: string[];
  resolve?: Record<string, string[]>;
  caPem?: string[];
}

/** A host folder mounted into the sandbox (read lazily, never written). */
export interface Mount {
  host: string;
  path: string;
  readOnly?: boolean;
  gitignore?: boolean;
  exclude?: string[];
  allowSecrets?: string[];
  maxHostBytes?: number;
}

/** A host tool: called with the guest's arguments; its (awaited) value goes back. */
export type ToolFn = (args: any) => unknown;

export interface SandboxOptions {
  /** Default: `url` given → 'service', else `$WASMSAND_TRANSPORT`, else 'inprocess'. */
  transport?: Transport;
  /** rpc: the server to start (a path, or a command and its arguments); default
   * `$WASMSAND_SANDBOXD`, else the server this package carries. */
  sandboxd?: string | string[];
  /** service: the API's base URL (`http://HOST:PORT/api/v1/sandbox`); default `$WASMSAND_URL`. */
  url?: string;
  /** service: the bearer credential; default `$WASMSAND_API_KEY`. */
  apiKey?: string;
  /** service: the runtime (`wasm`, `docker`), base image, lifetime and variables of the session. */
  runtime?: string;
  image?: string;
  ttlSec?: number;
  env?: Record<string, string>;
  /** Each run's timeout when the run names none (30 000). */
  timeoutMs?: number;
  fsLimitBytes?: number;
  limits?: Limits;
  tools?: Record<string, ToolFn>;
  deterministic?: boolean | Deterministic;
  network?: Network;
  mounts?: (Mount | string)[];
}

/** The resource receipt of one run. */
export interface Usage {
  wallMs: number;
  cpuUs: number;
  peakMemoryBytes: number;
  processes: number;
  toolCalls: number;
  bytesWritten: number;
  filesCreated: number;
  filesDeleted: number;
  fsBytes: number;
  fsFiles: number;
  netRequests: number;
  netBytes: number;
  limitsHit: string[];
}

export type ErrorClass = 'TIMEOUT' | 'CANCELLED' | 'CAPABILITY_DENIED' | 'LIMIT_EXCEEDED' | (string & {});

export interface FileChange {
  path: string;
  status: 'added' | 'modified' | 'deleted' | (string & {});
  kind: 'file' | 'symlink' | 'dir' | 'device' | (string & {});
  oldMode: number | null;
  newMode: number | null;
  binary: boolean;
}

export interface Changes {
  root: string;
  files: FileChange[];
  patch: string;
}

export interface Preview {
  sandboxId: string;
  changes: Changes;
}

/** What one command line produced. A non-zero exit is a result, not an error. */
export interface CommandResult {
  stdout: string;
  stderr: string;
  exitCode: number;
  executionTimeMs: number;
  truncated: { stdout: boolean; stderr: boolean } | null;
  errorClass: ErrorClass | null;
  usage: Usage;
  rolledBack: boolean;
  spilled: { stdout?: string; stderr?: string } | null;
  preview: Preview | null;
}

export interface ProcessInfo {
  pid: number;
  command: string;
  running: boolean;
  exitCode: number | null;
  startedAtMs: number;
}

export interface FileInfo {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'device' | (string & {});
  size: number;
}

export interface MergeResult {
  /** Each path set to the fork's state, and what that did here. */
  applied: Record<string, 'added' | 'changed' | 'deleted' | (string & {})>;
  env: string[];
  cwd: string | null;
}

export interface MergeConflict {
  path: string;
  ours: string;
  theirs: string;
}

export interface MountInfo {
  path: string;
  host: string;
  readOnly: boolean;
  hostBytesRead: number;
  maxHostBytes: number | null;
  dirsListed: number;
  filesRead: number;
}

export interface ExportReport {
  written: string[];
  removed: string[];
  dirs: string[];
}

export type OutputCallback = (chunk: string) => void;

export interface RunOptions {
  /** Variables for this run only. */
  envs?: Record<string, string>;
  /** Working directory for this run only. */
  cwd?: string;
  /** What the command reads as its standard input (default: end of file). */
  stdin?: string | Uint8Array;
  timeoutMs?: number;
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  /** Aborting it ends the command and rejects with the signal's reason. */
  signal?: AbortSignal;
  /** A non-zero exit rejects with `CommandExitError`. */
  check?: boolean;
  background?: boolean;
}

export interface ForegroundRunOptions extends RunOptions {
  background?: false;
  /** A run that fails leaves the sandbox as it was (`rolledBack`). */
  atomic?: boolean;
  truncation?: 'headTail' | 'plain';
  /** Run in a fork and leave this sandbox as it is (`result.preview`). */
  preview?: boolean;
}

export interface BackgroundRunOptions extends RunOptions {
  background: true;
}

export interface OutputChunk {
  stdout: string;
  stderr: string;
}

/** A background process. Iterating it yields its output until it has ended. */
export class CommandHandle implements AsyncIterable<OutputChunk> {
  private constructor();
  readonly pid: number;
  /** Bytes the rings dropped before this handle read them. */
  readonly droppedStdout: number;
  readonly droppedStderr: number;
  /** Settles once `onStdout`/`onStderr` have seen all the output. */
  readonly drained: Promise<void>;
  poll(): Promise<OutputChunk & { running: boolean }>;
  wait(options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<CommandResult>;
  kill(): Promise<boolean>;
  sendStdin(data: string | Uint8Array): Promise<number>;
  closeStdin(): Promise<void>;
  [Symbol.asyncIterator](): AsyncIterator<OutputChunk>;
}

export interface Commands {
  run(cmd: string, options: BackgroundRunOptions): Promise<CommandHandle>;
  run(cmd: string, options?: ForegroundRunOptions): Promise<CommandResult>;
  connect(pid: number, options?: { onStdout?: OutputCallback; onStderr?: OutputCallback }): Promise<CommandHandle>;
  list(): Promise<ProcessInfo[]>;
  kill(pid: number): Promise<boolean>;
}

export type WriteData = string | Uint8Array | ArrayBuffer | Iterable<string | Uint8Array> | AsyncIterable<string | Uint8Array>;

export interface Files {
  read(path: string, options?: { format?: 'bytes' }): Promise<Uint8Array>;
  read(path: string, options: { format: 'text' }): Promise<string>;
  read(path: string, options: { format: 'stream' }): Promise<AsyncIterable<Uint8Array>>;
  write(path: string, data: WriteData): Promise<void>;
  writeFiles(entries: Iterable<{ path: string; data: WriteData } | [string, WriteData]>): Promise<void>;
  exists(path: string): Promise<boolean>;
  list(path: string): Promise<FileInfo[]>;
  makeDir(path: string): Promise<boolean>;
  mkdir(path: string): Promise<void>;
  remove(path: string): Promise<void>;
  rm(path: string, options?: { recursive?: boolean }): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  stat(path: string): Promise<FileInfo>;
}

export interface Tools {
  register(name: string, fn: ToolFn, options?: { description?: string; inputSchema?: object }): Promise<void>;
  unregister(name: string): Promise<boolean>;
  list(): Promise<string[]>;
}

export interface ChangesOptions {
  since?: 'mount' | 'parent' | 'snapshot';
  snapshotId?: string;
  path?: string;
}

export type Attempt = string | { command: string; env?: Record<string, string> };

export class Sandbox {
  private constructor();
  static create(options?: SandboxOptions): Promise<Sandbox>;
  static importState(
    blob: Uint8Array,
    options?: { key?: Uint8Array | string; transport?: 'inprocess' | 'rpc'; sandboxd?: string | string[] },
  ): Promise<Sandbox>;
  readonly commands: Commands;
  readonly files: Files;
  readonly tools: Tools;
  readonly transport: Transport;
  /** The fork's id; `null` for a root sandbox. */
  readonly sandboxId: string | null;
  snapshot(): Promise<string>;
  restore(snapshotId: string): Promise<void>;
  exportState(options?: { key?: Uint8Array | string }): Promise<Uint8Array>;
  fork(): Promise<Sandbox>;
  merge(fork: Sandbox, options?: { env?: boolean; cwd?: boolean }): Promise<MergeResult>;
  mount(host: string, path: string, options?: Omit<Mount, 'host' | 'path'>): Promise<MountInfo>;
  mounts(): Promise<MountInfo[]>;
  changes(options?: ChangesOptions): Promise<Changes>;
  exportChanges(dir: string, options?: ChangesOptions): Promise<ExportReport>;
  commit(preview: Preview | CommandResult, options?: { env?: boolean; cwd?: boolean }): Promise<MergeResult>;
  discard(preview: Preview | CommandResult): Promise<void>;
  bestOf(attempts: Attempt[], options?: { concurrency?: number; timeoutMs?: number }): Promise<CommandResult[]>;
  destroy(): Promise<void>;
  kill(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A request the sandbox refused. `kind` is the wire's `error.data.kind`; `code` is the
 * errno name of a filesystem error, else the kind (Node's convention). */
export class SandboxError extends Error {
  readonly rpcCode: number | null;
  readonly data: unknown;
  readonly kind: string | null;
  readonly code: string | undefined;
}
export class ProcessNotFoundError extends SandboxError {}
export class WaitTimeoutError extends SandboxError {}
export class LimitExceededError extends SandboxError {}
export class SandboxDestroyedError extends SandboxError {}
export class InvalidParamsError extends SandboxError {}
export class NotSupportedError extends SandboxError {}
export class MergeConflictError extends SandboxError {
  readonly conflicts: MergeConflict[];
}
export class FileSystemError extends SandboxError {
  readonly errno: string | undefined;
  readonly path: string | undefined;
}
export class CommandExitError extends SandboxError {
  readonly result: CommandResult;
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}
