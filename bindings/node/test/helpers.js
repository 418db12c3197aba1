'use strict';
// What the tests share: the transports they run on. In-process and rpc always; rpc's child is
// `$WASMSAND_SANDBOXD_BIN` (scripts/test.sh exports target/debug/e2e-sandboxd) or, without
// it, the server this package carries (`node bin/sandboxd.js`). The service transport runs
// against `$WASMSAND_SANDBOXD_BIN serve` on loopback, started once per test file; without the
// variable its tests are skipped, except under CI=true, where they fail (a CI that skipped
// them would pass without having tested the transport). `$WASMSAND_NODE_TRANSPORTS` narrows
// the list.
const test = require('node:test');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { Sandbox } = require('..');

const BIN = process.env.WASMSAND_SANDBOXD_BIN || undefined;

const TRANSPORTS = (process.env.WASMSAND_NODE_TRANSPORTS || 'inprocess,rpc,service').split(',').filter(Boolean);

let service = null;

/** Starts `sandboxd serve` on a free loopback port (memory store, authentication off) before
 * this file's tests, and stops it after them. */
function serveForThisFile() {
  if (!TRANSPORTS.includes('service')) return;
  test.before(async () => {
    if (!BIN) {
      if (process.env.CI === 'true') throw new Error('WASMSAND_SANDBOXD_BIN is not set (CI=true: the service tests fail, not skip)');
      return;
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmsand-node-serve-'));
    const log = fs.openSync(path.join(dir, 'serve.log'), 'w');
    const proc = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--store', 'memory', '--data-dir', dir], {
      stdio: ['ignore', 'pipe', log],
      env: { ...process.env, SANDBOX_LOG_FORMAT: 'text' },
    });
    const lines = readline.createInterface({ input: proc.stdout });
    const url = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('sandboxd serve did not start in 120 s')), 120_000);
      lines.once('line', (line) => {
        clearTimeout(timer);
        const m = /^wasmsand service listening on (http:\/\/\S+) \(store: /.exec(line);
        if (m) resolve(m[1]);
        else reject(new Error(`sandboxd serve did not start: ${line}; log in ${dir}`));
      });
      proc.once('exit', (code) => reject(new Error(`sandboxd serve exited (${code}); log in ${dir}`)));
    });
    lines.on('line', () => {}); // drained, so a full pipe never blocks the server
    service = { url, proc, dir };
  });
  test.after(async () => {
    if (!service) return;
    const { proc, dir } = service;
    service = null;
    // SIGTERM: the clean shutdown, as a deployment stops it.
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
    fs.rmSync(dir, { recursive: true, force: true });
  });
}

/** Why a test on `transport` cannot run here (a string for node:test's `skip`), or false. */
function skipFor(transport) {
  if (transport === 'service' && !BIN && process.env.CI !== 'true') return 'WASMSAND_SANDBOXD_BIN is not set: no server for the service transport';
  return false;
}

/** Options that make a sandbox on `transport`, merged with `extra`. */
function optionsFor(transport, extra = {}) {
  const opts = { transport, ...extra };
  if (transport === 'rpc' && BIN) opts.sandboxd = BIN;
  if (transport === 'service') {
    if (!service) throw new Error('no service running for this test file');
    opts.url = service.url;
  }
  return opts;
}

async function create(transport, extra = {}) {
  return Sandbox.create(optionsFor(transport, extra));
}

/** Runs `fn(sb)` with a fresh sandbox on `transport` and kills it afterwards. */
async function withSandbox(transport, extra, fn) {
  if (typeof extra === 'function') {
    fn = extra;
    extra = {};
  }
  const sb = await create(transport, extra);
  try {
    return await fn(sb);
  } finally {
    await sb.kill();
  }
}

module.exports = { TRANSPORTS, serveForThisFile, skipFor, optionsFor, create, withSandbox, serviceUrl: () => service?.url };
