'use strict';
// The cross-binding conformance suite (tests/conformance, README.md there) on the npm package:
// every case of tests/conformance/cases on every transport helpers.js offers. The Rust
// (tests/e2e/conformance.rs) and Python (tests/python/test_conformance.py) runners read the same
// files, so a behaviour that changes for one binding fails all three suites.
//
// This file is the Node adapter: it maps each step of a case onto the SDK's calls and the SDK's
// results back onto the cases' binding-neutral field names, then checks them by the rules the
// README states (which the other two runners implement the same way).
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const { Sandbox, SandboxError, FileSystemError, MergeConflictError } = require('..');
const { TRANSPORTS, serveForThisFile, skipFor, optionsFor } = require('./helpers');

const CASES_DIR = path.resolve(__dirname, '../../../tests/conformance/cases');

// Every feature a case may name; a name outside it fails the case (a typo must not turn into a
// silent skip). LACKS: what each transport lacks, and why a case needing it is skipped there.
const FEATURES = new Set([
  'run_env_cwd',
  'run_scope_subshell',
  'custom_limits',
  'output_caps',
  'truncation_mode',
  'atomic',
  'portable_state',
  'files_follow_shell_cwd',
]);
const LACKS = {
  inprocess: {},
  rpc: {},
  service: {
    run_scope_subshell: 'a run with envs/cwd is not a subshell on the service: what it sets persists',
    custom_limits: "the service's own limits apply; limits raises NotSupportedError",
    output_caps: "the service caps a run's log as a whole (SANDBOX_MAX_LOG_BYTES), not each stream at its stdoutBytes/stderrBytes",
    truncation_mode: 'truncation raises NotSupportedError on the service',
    atomic: 'atomic raises NotSupportedError on the service',
    portable_state: 'exportState/importState raise NotSupportedError on the service',
    files_follow_shell_cwd: "relative files.* paths are relative to the workspace, not the shell's cwd, on the service",
  },
};

/** Every case of every file, in file order; throws (failing this file) when the directory is
 * missing or holds no case, a file is not a cases file, or two cases share a name. */
function loadCases(dir) {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
    throw new Error(`the conformance cases directory ${dir} is missing`);
  }
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  const cases = [];
  for (const f of files) {
    const doc = JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
    if (!doc || typeof doc !== 'object' || !Array.isArray(doc.cases)) {
      throw new Error(`${f}: not a cases file (an object with a list \`cases\`)`);
    }
    for (const c of doc.cases) cases.push({ file: f, case: c });
  }
  if (cases.length === 0) throw new Error(`no conformance case in ${dir} (files: ${JSON.stringify(files)})`);
  const seen = new Map();
  for (const { file, case: c } of cases) {
    if (seen.has(c.name)) throw new Error(`the case name ${c.name} is used twice (${seen.get(c.name)} and ${file})`);
    seen.set(c.name, file);
  }
  return cases;
}

const CASES = loadCases(CASES_DIR);

// ---- the adapter ----

function checkKeys(obj, allowed, where) {
  const unknown = Object.keys(obj).filter((k) => !allowed.includes(k));
  assert.deepEqual(unknown, [], `${where}: unknown field(s) ${JSON.stringify(unknown)}; allowed: ${JSON.stringify(allowed)}`);
}

/** A file's bytes from `text`, `base64` or `repeat` (exactly one is given). */
function content(spec) {
  const given = ['text', 'base64', 'repeat'].filter((k) => k in spec);
  assert.equal(given.length, 1, `exactly one of text, base64, repeat: ${JSON.stringify(spec)}`);
  if ('text' in spec) return Buffer.from(String(spec.text), 'utf8');
  if ('base64' in spec) return Buffer.from(spec.base64, 'base64');
  checkKeys(spec.repeat, ['text', 'count'], 'repeat');
  return Buffer.from(String(spec.repeat.text).repeat(spec.repeat.count), 'utf8');
}

function quote(s) {
  return `'${s.replaceAll("'", "'\\''")}'`;
}

/** The limits' snake_case names (the cases') in the SDK's spelling (the wire's camelCase). */
function camel(name) {
  return name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
}

/** A failure in the cases' terms: a filesystem error by its errno name, anything else by the
 * SDK's `kind`. Anything that is not the SDK's error is rethrown: it is a bug, not a result. */
function errorOf(e) {
  if (e instanceof FileSystemError) return { errno: e.errno };
  if (e instanceof SandboxError) {
    const out = { kind: e.kind };
    if (e instanceof MergeConflictError) out.conflict_paths = e.conflicts.map((c) => c.path);
    return out;
  }
  throw e;
}

class Runner {
  constructor(c, transport) {
    this.case = c;
    this.transport = transport;
    this.sandboxes = new Map();
    this.roots = [];
    this.snapshots = new Map();
    this.blobs = new Map();
  }

  async close() {
    for (const sb of this.roots) await sb.kill();
  }

  sandbox(step) {
    const name = step.in ?? 'root';
    assert.ok(this.sandboxes.has(name), `no sandbox named ${name} (made so far: ${[...this.sandboxes.keys()].sort()})`);
    return this.sandboxes.get(name);
  }

  async start() {
    const spec = this.case.sandbox ?? {};
    checkKeys(spec, ['timeout_ms', 'limits'], 'sandbox');
    const extra = {};
    if ('timeout_ms' in spec) extra.timeoutMs = spec.timeout_ms;
    if ('limits' in spec) extra.limits = Object.fromEntries(Object.entries(spec.limits).map(([k, v]) => [camel(k), v]));
    const root = await Sandbox.create(optionsFor(this.transport, extra));
    this.roots.push(root);
    this.sandboxes.set('root', root);
    const setup = this.case.setup ?? {};
    checkKeys(setup, ['files', 'env', 'cwd'], 'setup');
    for (const f of setup.files ?? []) {
      checkKeys(f, ['path', 'text', 'base64', 'repeat'], 'setup.files[]');
      await root.files.write(f.path, content(f));
    }
    // Variables and cwd are set by a run of the shell, the same line on every binding.
    const line = Object.entries(setup.env ?? {}).map(([k, v]) => `export ${k}=${quote(v)}`);
    if ('cwd' in setup) line.push(`cd -- ${quote(setup.cwd)}`);
    if (line.length) {
      const r = await root.commands.run(line.join('; '));
      assert.equal(r.exitCode, 0, `setup failed: ${JSON.stringify(r)}`);
    }
  }

  async step(i, step) {
    const where = `step ${i} (${step.op})`;
    assert.ok(Object.hasOwn(OPS, step.op), `${where}: unknown op`);
    const expect = step.expect ?? {};
    checkKeys(expect, EXPECT_KEYS[step.op], `${where}: expect`);
    let actual;
    try {
      actual = await OPS[step.op].call(this, step, where);
    } catch (e) {
      const got = errorOf(e);
      assert.ok('error' in expect, `${where}: failed unexpectedly: ${JSON.stringify(got)} (${e.message})`);
      compareError(expect.error, got, where);
      return;
    }
    assert.ok(!('error' in expect), `${where}: expected the error ${JSON.stringify(expect.error)}, but it succeeded with ${JSON.stringify(actual)}`);
    CHECKS[step.op](expect, actual, where);
  }
}

// Each op returns what the step produced, in the cases' field names.
const OPS = {
  async run(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'command', 'stdin', 'stdin_base64', 'env', 'cwd', 'timeout_ms', 'atomic', 'truncation', 'expect'], where);
    const opts = {};
    if ('stdin' in s) opts.stdin = s.stdin;
    if ('stdin_base64' in s) opts.stdin = new Uint8Array(Buffer.from(s.stdin_base64, 'base64'));
    if ('env' in s) opts.envs = s.env;
    if ('cwd' in s) opts.cwd = s.cwd;
    if ('timeout_ms' in s) opts.timeoutMs = s.timeout_ms;
    if (s.atomic) opts.atomic = true;
    if ('truncation' in s) opts.truncation = s.truncation;
    const r = await this.sandbox(s).commands.run(s.command, opts);
    return {
      exit_code: r.exitCode,
      stdout: r.stdout,
      stderr: r.stderr,
      error_class: r.errorClass,
      truncated: r.truncated === null ? null : { stdout: Boolean(r.truncated.stdout), stderr: Boolean(r.truncated.stderr) },
      spilled: r.spilled,
      rolled_back: r.rolledBack,
      limits_hit: r.usage.limitsHit,
    };
  },
  async write_file(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'text', 'base64', 'repeat', 'expect'], where);
    await this.sandbox(s).files.write(s.path, content(s));
  },
  async read_file(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'expect'], where);
    const data = await this.sandbox(s).files.read(s.path);
    return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  },
  async list_dir(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'expect'], where);
    return (await this.sandbox(s).files.list(s.path)).map((e) => ({ name: e.name, type: e.type, size: e.size }));
  },
  async stat(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'expect'], where);
    const st = await this.sandbox(s).files.stat(s.path);
    return { name: st.name, type: st.type, size: st.size };
  },
  async mkdir(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'expect'], where);
    await this.sandbox(s).files.mkdir(s.path);
  },
  async remove(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'path', 'recursive', 'expect'], where);
    await this.sandbox(s).files.rm(s.path, { recursive: Boolean(s.recursive) });
  },
  async rename(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'from', 'to', 'expect'], where);
    await this.sandbox(s).files.rename(s.from, s.to);
  },
  async fork(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'as'], where);
    assert.ok(!this.sandboxes.has(s.as), `${where}: the name ${s.as} is taken`);
    this.sandboxes.set(s.as, await this.sandbox(s).fork());
  },
  async destroy(s, where) {
    checkKeys(s, ['op', 'in', 'doc'], where);
    await this.sandbox(s).destroy();
  },
  async snapshot(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'as'], where);
    this.snapshots.set(s.as, await this.sandbox(s).snapshot());
  },
  async restore(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'snapshot', 'snapshot_id', 'expect'], where);
    const id = 'snapshot' in s ? this.snapshots.get(s.snapshot) : String(s.snapshot_id);
    assert.ok(id !== undefined, `${where}: no snapshot named ${s.snapshot}`);
    await this.sandbox(s).restore(id);
  },
  async merge(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'from', 'env', 'cwd', 'expect'], where);
    assert.ok(this.sandboxes.has(s.from), `${where}: no sandbox named ${s.from}`);
    const m = await this.sandbox(s).merge(this.sandboxes.get(s.from), { env: Boolean(s.env), cwd: Boolean(s.cwd) });
    return { applied: { ...m.applied }, env: [...m.env], cwd: m.cwd };
  },
  async export_state(s, where) {
    checkKeys(s, ['op', 'in', 'doc', 'as'], where);
    this.blobs.set(s.as, await this.sandbox(s).exportState());
  },
  async import_state(s, where) {
    checkKeys(s, ['op', 'doc', 'blob', 'base64', 'as', 'expect'], where);
    const blob = 'blob' in s ? this.blobs.get(s.blob) : new Uint8Array(Buffer.from(s.base64, 'base64'));
    assert.ok(blob !== undefined, `${where}: no blob named ${s.blob}`);
    const { transport, sandboxd } = optionsFor(this.transport);
    const sb = await Sandbox.importState(blob, { transport, sandboxd });
    this.roots.push(sb);
    this.sandboxes.set(s.as, sb);
  },
};

// ---- the checks (the README's rules) ----

const EXPECT_KEYS = {
  run: [
    'exit_code',
    'stdout',
    'stdout_contains',
    'stdout_regex',
    'stderr',
    'stderr_contains',
    'stderr_regex',
    'error_class',
    'truncated',
    'spilled',
    'rolled_back',
    'limits_hit_contains',
    'error',
  ],
  write_file: ['error'],
  read_file: ['text', 'base64', 'repeat', 'size', 'sha256', 'error'],
  list_dir: ['entries', 'names_include', 'error'],
  stat: ['name', 'type', 'size', 'error'],
  mkdir: ['error'],
  remove: ['error'],
  rename: ['error'],
  fork: [],
  destroy: [],
  snapshot: [],
  restore: ['error'],
  merge: ['applied', 'env', 'cwd', 'error'],
  export_state: [],
  import_state: ['error'],
};

function compareError(want, got, where) {
  checkKeys(want, ['errno', 'kind', 'conflict_paths'], `${where}: expect.error`);
  for (const [k, v] of Object.entries(want)) {
    assert.deepEqual(got[k], v, `${where}: error ${k}: expected ${JSON.stringify(v)}, got ${JSON.stringify(got)}`);
  }
}

const asList = (v) => (typeof v === 'string' ? [v] : v);

const CHECKS = {
  run(expect, r, where) {
    for (const field of ['exit_code', 'stdout', 'stderr', 'error_class', 'truncated', 'spilled', 'rolled_back']) {
      if (field in expect) {
        assert.deepEqual(r[field], expect[field], `${where}: ${field}: expected ${JSON.stringify(expect[field])}, got ${JSON.stringify(r[field])} (result ${JSON.stringify(r)})`);
      }
    }
    for (const stream of ['stdout', 'stderr']) {
      for (const needle of asList(expect[`${stream}_contains`] ?? [])) {
        assert.ok(r[stream].includes(needle), `${where}: ${stream} does not contain ${JSON.stringify(needle)}: ${JSON.stringify(r[stream])}`);
      }
      const pattern = expect[`${stream}_regex`];
      if (pattern !== undefined) {
        // The whole stream, `.` matching newlines: the one reading Rust, Python and
        // JavaScript regexes give alike (README).
        const re = new RegExp(`^(?:${pattern})$`, 's');
        assert.ok(re.test(r[stream]), `${where}: ${stream} does not match /${pattern}/: ${JSON.stringify(r[stream])}`);
      }
    }
    for (const limit of expect.limits_hit_contains ?? []) {
      assert.ok(r.limits_hit.includes(limit), `${where}: limits_hit ${JSON.stringify(r.limits_hit)} lacks ${limit}`);
    }
  },
  read_file(expect, data, where) {
    for (const key of ['text', 'base64', 'repeat']) {
      if (key in expect) {
        const want = content({ [key]: expect[key] });
        assert.ok(
          data.equals(want),
          `${where}: content: expected ${JSON.stringify(want.subarray(0, 200).toString())} (${want.length} bytes), got ${JSON.stringify(data.subarray(0, 200).toString())} (${data.length} bytes)`,
        );
      }
    }
    if ('size' in expect) assert.equal(data.length, expect.size, `${where}: size`);
    if ('sha256' in expect) assert.equal(crypto.createHash('sha256').update(data).digest('hex'), expect.sha256, `${where}: sha256`);
  },
  list_dir(expect, entries, where) {
    if ('entries' in expect) {
      // An expected entry without `size` leaves the size unchecked.
      const got = entries.map((e, i) => (expect.entries[i] ? Object.fromEntries(Object.keys(expect.entries[i]).map((k) => [k, e[k]])) : e));
      assert.deepEqual(got, expect.entries, `${where}: entries: expected ${JSON.stringify(expect.entries)}, got ${JSON.stringify(entries)}`);
    }
    const names = entries.map((e) => e.name);
    for (const n of expect.names_include ?? []) assert.ok(names.includes(n), `${where}: ${n} not listed in ${JSON.stringify(names)}`);
  },
  stat(expect, st, where) {
    for (const k of ['name', 'type', 'size']) {
      if (k in expect) assert.equal(st[k], expect[k], `${where}: ${k}: got ${JSON.stringify(st)}`);
    }
  },
  merge(expect, m, where) {
    for (const k of ['applied', 'env', 'cwd']) {
      if (k in expect) assert.deepEqual(m[k], expect[k], `${where}: ${k}: got ${JSON.stringify(m)}`);
    }
  },
};
for (const op of Object.keys(OPS)) {
  CHECKS[op] ??= (expect, _actual, where) => assert.deepEqual(expect, {}, `${where}: nothing to expect of this op`);
}

/** Why `c` cannot run on `transport` (node:test's `skip`), or false. An unknown feature is not
 * a reason to skip: the test then runs and fails on it. */
function lacking(c, transport) {
  const missing = (c.requires ?? []).filter((f) => FEATURES.has(f) && Object.hasOwn(LACKS[transport] ?? {}, f));
  if (missing.length === 0) return false;
  return `the ${transport} transport lacks ` + missing.map((f) => `${f}: ${LACKS[transport][f]}`).join('; ');
}

serveForThisFile();

for (const transport of TRANSPORTS) {
  test.describe(transport, { skip: skipFor(transport) }, () => {
    for (const { case: c } of CASES) {
      test(c.name, { skip: lacking(c, transport) }, async () => {
        checkKeys(c, ['name', 'doc', 'requires', 'sandbox', 'setup', 'steps'], `case ${c.name}`);
        const unknown = (c.requires ?? []).filter((f) => !FEATURES.has(f));
        assert.deepEqual(unknown, [], `unknown feature(s): name them in FEATURES (and in the other runners and the schema)`);
        assert.ok(Array.isArray(c.steps) && c.steps.length > 0, 'a case needs steps');
        const runner = new Runner(c, transport);
        try {
          await runner.start();
          for (const [i, step] of c.steps.entries()) await runner.step(i, step);
        } finally {
          await runner.close();
        }
      });
    }
  });
}
