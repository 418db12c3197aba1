// Types of `wasmsand/ai`, the Vercel AI SDK provider (docs/integrations.md). They use the
// SDK's own types, so they need `ai` (7.x) installed, as the module itself does. Checked by
// `tsc --strict` on examples/ai-sdk.mjs and test/ai-sdk (the node stage of scripts/test.sh).
import type { Experimental_SandboxSession, Tool } from 'ai';
import type { Sandbox, SandboxOptions } from './index.js';

/** How much of a result the model is shown, and how long a command may run. */
export interface ToolSettings {
  /** Each of stdout and stderr in a reply, its start and end kept (12 000). */
  maxOutputChars?: number;
  /** The start of a file `read_file` shows (65 536). */
  maxReadBytes?: number;
  /** The entries `list_directory` shows (500). */
  maxListEntries?: number;
  /** The longest time the model may ask for; a longer one is lowered, and the reply says so
   * (300 000). */
  maxTimeoutMs?: number;
  /** A command's time when the model names none (default: the sandbox's own). */
  timeoutMs?: number;
}

export const DEFAULT_SETTINGS: Readonly<Required<Omit<ToolSettings, 'timeoutMs'>> & { timeoutMs: undefined }>;

/** Each tool's description and JSON schema, the same as the Python providers'. */
export const TOOL_SPECS: Readonly<Record<keyof WasmsandTools, { description: string; inputSchema: object }>>;

/** The five tools; each resolves with the text the model reads. `timeout` is in seconds. (A
 * type, not an interface: the SDK's `ToolSet` wants an index signature, which only a type
 * alias gets implicitly.) */
export type WasmsandTools = {
  run_shell: Tool<{ command: string; cwd?: string; timeout?: number }, string>;
  run_python: Tool<{ code: string; timeout?: number }, string>;
  read_file: Tool<{ path: string }, string>;
  write_file: Tool<{ path: string; content: string }, string>;
  list_directory: Tool<{ path?: string }, string>;
};

export interface CreateWasmsandToolsOptions {
  /** Where the tools run when the step's `experimental_sandbox` is not a
   * `WasmsandSandboxSession`. */
  sandbox?: Sandbox | WasmsandSandboxSession;
  settings?: ToolSettings;
}

/** The tools `run_shell`, `run_python`, `read_file`, `write_file` and `list_directory`. */
export function createWasmsandTools(options?: CreateWasmsandToolsOptions): WasmsandTools;

export interface WasmsandSandboxSessionOptions {
  /** The directory commands start in and relative paths resolve against (`/home/user`). */
  workingDirectory?: string;
  /** Each command's time (default: the sandbox's own). */
  timeoutMs?: number;
}

/** The AI SDK's `Experimental_SandboxSession` over a wasmsand sandbox: pass it to
 * `generateText` / `streamText` / an agent as `experimental_sandbox`. */
export class WasmsandSandboxSession implements Experimental_SandboxSession {
  /** Over the caller's sandbox, which `close()` leaves running. */
  constructor(sandbox: Sandbox, options?: WasmsandSandboxSessionOptions);
  /** Over a sandbox of its own (`Sandbox.create(options)`), which `close()` ends. */
  static create(options?: SandboxOptions & { workingDirectory?: string }): Promise<WasmsandSandboxSession>;
  readonly sandbox: Sandbox;
  readonly workingDirectory: string;
  readonly description: string;
  readonly run: Experimental_SandboxSession['run'];
  readonly spawn: Experimental_SandboxSession['spawn'];
  readonly readFile: Experimental_SandboxSession['readFile'];
  readonly readBinaryFile: Experimental_SandboxSession['readBinaryFile'];
  readonly readTextFile: Experimental_SandboxSession['readTextFile'];
  readonly writeFile: Experimental_SandboxSession['writeFile'];
  readonly writeBinaryFile: Experimental_SandboxSession['writeBinaryFile'];
  readonly writeTextFile: Experimental_SandboxSession['writeTextFile'];
  readonly stat: Experimental_SandboxSession['stat'];
  readonly listDirectory: Experimental_SandboxSession['listDirectory'];
  readonly deleteFile: Experimental_SandboxSession['deleteFile'];
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}
