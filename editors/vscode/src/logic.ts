// The extension's own logic, free of the `vscode` module so node's test runner checks it:
// the run spec a command sends, the artifacts tree's items, the status bar's text and the
// output channel's lines.

/** `tldw.sandbox.run`'s argument: the service's run fields plus `files`. */
export interface RunSpec {
  command?: string[];
  cwd?: string;
  env?: Record<string, string>;
  runtime?: string;
  base_image?: string;
  startup_timeout_sec?: number;
  timeout_sec?: number;
  capture_patterns?: string[];
  files?: string[];
}

/** The server's `tldw/sandbox/runFinished` notification. */
export interface RunFinished {
  run_id: string;
  phase: string;
  exit_code: number | null;
  message?: string | null;
  summary: string;
  diagnostics: { uri: string; line: number; message: string; mapped: boolean }[];
  artifacts_url: string;
  web_url: string;
}

/** One entry of `tldw.sandbox.openArtifacts`' answer. */
export interface Artifact {
  path: string;
  size?: number;
  url?: string;
}

/** A node of the artifacts tree: a directory (with children) or a file (with its URL). */
export interface ArtifactNode {
  label: string;
  path: string;
  url?: string;
  size?: number;
  children: ArtifactNode[];
}

const INTERPRETERS: Record<string, { argv: string[]; image?: string }> = {
  python: { argv: ['python3'] },
  shellscript: { argv: ['bash'] },
  javascript: { argv: ['node'], image: 'node' },
  go: { argv: ['go', 'run'], image: 'golang' },
  java: { argv: ['java'], image: 'openjdk:17' },
};

/**
 * The run of the active file (the palette's "Run in Sandbox"): its language's interpreter on
 * its workspace-relative path, with the image that has that language when the workspace has
 * not chosen one. `undefined` for a file that is outside the workspace or has no runner.
 */
export function specForFile(
  relPath: string | undefined,
  languageId: string,
  workspaceHasImage: boolean,
): RunSpec | undefined {
  if (relPath === undefined || relPath.startsWith('..') || relPath.startsWith('/')) {
    return undefined;
  }
  const r = INTERPRETERS[languageId];
  if (!r) {
    return undefined;
  }
  const rel = relPath.split('\\').join('/');
  // Go runs the file's package, so a main split over several files still builds.
  const dir = rel.includes('/') ? `./${rel.slice(0, rel.lastIndexOf('/'))}` : '.';
  const spec: RunSpec = { command: [...r.argv, languageId === 'go' ? dir : rel] };
  if (r.image && !workspaceHasImage) {
    spec.base_image = r.image;
  }
  return spec;
}

/**
 * A command line typed by the user as argv: words split on blanks, single and double quotes
 * group, a backslash escapes the next character outside single quotes.
 */
export function parseCommandLine(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let has = false;
  let quote: '"' | "'" | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = null;
      else cur += c;
    } else if (c === '\\' && i + 1 < line.length) {
      cur += line[++i];
      has = true;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else cur += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      has = true;
    } else if (c === ' ' || c === '\t') {
      if (has || cur) out.push(cur);
      cur = '';
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (quote) {
    throw new Error(`unclosed ${quote} quote`);
  }
  if (has || cur) out.push(cur);
  return out;
}

/** The artifacts as a tree of their path segments, directories first, then by name. */
export function artifactTree(items: Artifact[]): ArtifactNode[] {
  const root: ArtifactNode = { label: '', path: '', children: [] };
  for (const it of items) {
    const parts = it.path.split('/').filter((p) => p.length > 0);
    let node = root;
    parts.forEach((part, i) => {
      const path = parts.slice(0, i + 1).join('/');
      let child = node.children.find((c) => c.label === part);
      if (!child) {
        child = { label: part, path, children: [] };
        node.children.push(child);
      }
      if (i === parts.length - 1) {
        child.url = it.url;
        child.size = it.size;
      }
      node = child;
    });
  }
  const sort = (n: ArtifactNode) => {
    n.children.sort((a, b) => {
      const da = a.children.length > 0 ? 0 : 1;
      const db = b.children.length > 0 ? 0 : 1;
      return da - db || a.label.localeCompare(b.label);
    });
    n.children.forEach(sort);
  };
  sort(root);
  return root.children;
}

/** A size for people: `512 B`, `1.5 KB`, `3.0 MB`. */
export function humanSize(bytes: number | undefined): string {
  if (bytes === undefined) return '';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** The status bar's text and whether it shows a failure. */
export function statusOf(phase: string | undefined, exitCode?: number | null): { text: string; failed: boolean } {
  if (phase === undefined) {
    return { text: '$(beaker) Sandbox', failed: false };
  }
  const running = phase === 'starting' || phase === 'queued' || phase === 'running';
  if (running) {
    return { text: `$(sync~spin) Sandbox: ${phase}`, failed: false };
  }
  const ok = phase === 'completed' && exitCode === 0;
  const exit = exitCode === null || exitCode === undefined ? '' : ` (exit ${exitCode})`;
  return { text: `${ok ? '$(pass)' : '$(error)'} Sandbox: ${phase}${exit}`, failed: !ok };
}

/** The output channel's line when a run ends. */
export function finishedLine(f: RunFinished): string {
  const where = f.diagnostics
    .map((d) => `${d.mapped ? '' : '(outside the workspace) '}${d.uri.replace(/^file:\/\//, '')}:${d.line + 1}`)
    .join(', ');
  return `[${f.run_id}] ${f.summary}${f.message ? `: ${f.message}` : ''}${where ? ` at ${where}` : ''}; full log: ${f.web_url}`;
}
