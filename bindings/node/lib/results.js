'use strict';
// Results as the wire gives them (camelCase already), with every field present.

function usageFromWire(w) {
  const u = w && typeof w === 'object' ? w : {};
  const n = (k, alt) => Number(u[k] ?? (alt ? u[alt] : 0) ?? 0);
  return {
    wallMs: n('wallMs'),
    cpuUs: n('cpuUs'),
    peakMemoryBytes: n('peakMemoryBytes'),
    processes: n('processes'),
    toolCalls: n('toolCalls', 'hostCalls'),
    bytesWritten: n('bytesWritten'),
    filesCreated: n('filesCreated'),
    filesDeleted: n('filesDeleted'),
    fsBytes: n('fsBytes'),
    fsFiles: n('fsFiles'),
    netRequests: n('netRequests'),
    netBytes: n('netBytes'),
    limitsHit: Array.isArray(u.limitsHit) ? u.limitsHit.map(String) : [],
  };
}

function previewFromWire(p) {
  return { sandboxId: String(p.sandboxId), changes: changesFromWire(p.changes || { root: '' }) };
}

function resultFromWire(r) {
  return {
    stdout: String(r.stdout ?? ''),
    stderr: String(r.stderr ?? ''),
    exitCode: Number(r.exitCode),
    executionTimeMs: Number(r.executionTimeMs ?? 0),
    truncated: r.truncated ?? null,
    errorClass: r.errorClass ?? null,
    usage: usageFromWire(r.usage),
    rolledBack: Boolean(r.rolledBack),
    spilled: r.spilled ?? null,
    preview: r.preview ? previewFromWire(r.preview) : null,
  };
}

function fileInfoFromWire(e) {
  return { name: String(e.name), type: String(e.type), size: Number(e.size ?? 0) };
}

function processInfoFromWire(w) {
  return {
    pid: Number(w.pid),
    command: String(w.command ?? ''),
    running: Boolean(w.running),
    exitCode: w.exitCode === null || w.exitCode === undefined ? null : Number(w.exitCode),
    startedAtMs: Number(w.startedAtMs ?? 0),
  };
}

function mergeResultFromWire(w) {
  const applied = {};
  for (const a of w.applied || []) applied[String(a.path)] = String(a.change);
  return { applied, env: (w.env || []).map(String), cwd: w.cwd === null || w.cwd === undefined ? null : String(w.cwd) };
}

function changesFromWire(w) {
  const mode = (v) => (v === null || v === undefined ? null : parseInt(String(v), 8));
  return {
    root: String(w.root ?? ''),
    files: (w.files || []).map((f) => ({
      path: String(f.path),
      status: String(f.status),
      kind: String(f.kind),
      oldMode: mode(f.oldMode),
      newMode: mode(f.newMode),
      binary: Boolean(f.binary),
    })),
    patch: String(w.patch ?? ''),
  };
}

function mountInfoFromWire(w) {
  return {
    path: String(w.path),
    host: String(w.host),
    readOnly: Boolean(w.readOnly),
    hostBytesRead: Number(w.hostBytesRead ?? 0),
    maxHostBytes: w.maxHostBytes === null || w.maxHostBytes === undefined ? null : Number(w.maxHostBytes),
    dirsListed: Number(w.dirsListed ?? 0),
    filesRead: Number(w.filesRead ?? 0),
  };
}

module.exports = {
  usageFromWire,
  resultFromWire,
  fileInfoFromWire,
  processInfoFromWire,
  mergeResultFromWire,
  changesFromWire,
  mountInfoFromWire,
};
