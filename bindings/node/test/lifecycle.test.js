'use strict';
// How a sandbox lives with Node's event loop: an awaited command keeps the program alive, an
// idle sandbox does not, and the typed declarations agree with the code.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { TRANSPORTS, serveForThisFile, skipFor, optionsFor } = require('./helpers');

serveForThisFile();
const wasmsand = require('..');

const pkg = path.join(__dirname, '..');

function runNode(source) {
  return spawnSync(process.execPath, ['-e', source], { cwd: pkg, encoding: 'utf8', timeout: 60_000 });
}

for (const transport of TRANSPORTS) {
  test(`${transport}: a program awaiting a command lives until it ends, then exits on its own`, { skip: skipFor(transport) }, () => {
    // Nothing but the awaited run holds the loop: without the client's hold, Node would exit
    // before the answer came and print nothing. The sandbox is never killed: an idle one must
    // not keep the program running either (the spawnSync timeout would end it).
    const opts = JSON.stringify(optionsFor(transport));
    const r = runNode(
      `const { Sandbox } = require('.');
       (async () => {
         const sb = await Sandbox.create(${opts});
         const r = await sb.commands.run('sleep 0.3; echo done');
         console.log(r.stdout.trim());
       })();`,
    );
    assert.equal(r.error, undefined, `node did not exit: ${r.error}`);
    assert.equal(r.stderr, '');
    assert.equal(r.status, 0);
    assert.equal(r.stdout, 'done\n');
  });
}

test('the limit names are the engine registry', () => {
  assert.deepEqual(
    [...wasmsand.LIMIT_NAMES].sort(),
    wasmsand.limitSpecs().map((l) => l.wire).sort(),
  );
});

test('the error classes form one hierarchy with Node-style codes', () => {
  const e = new wasmsand.FileSystemError('x', 1, { kind: 'filesystem', errno: 'ENOENT', path: '/a' });
  assert.ok(e instanceof wasmsand.SandboxError && e instanceof Error);
  assert.deepEqual([e.name, e.code, e.kind, e.path, e.rpcCode], ['FileSystemError', 'ENOENT', 'filesystem', '/a', 1]);
});

test('rpc: a sandboxd child that dies rejects the calls waiting on it and every later one', { skip: skipFor('rpc') }, async () => {
  const sb = await wasmsand.Sandbox.create(optionsFor('rpc'));
  const running = sb.commands.run('sleep 30');
  // The child is the transport's own; ending it from outside is what a crash looks like.
  sb.h.t.client.wire.child.kill('SIGKILL');
  await assert.rejects(running, (e) => e instanceof wasmsand.SandboxError && e.kind === 'transport_closed');
  await assert.rejects(sb.commands.run('true'), (e) => e instanceof wasmsand.SandboxError && e.kind === 'transport_closed');
  await sb.kill();
});

for (const sig of ['SIGTERM', 'SIGINT']) {
  test(`the carried sandboxd serve shuts down cleanly on ${sig}`, async () => {
    // It once spun for ever instead (Node's signal handler and the server's chained into a
    // loop), so a supervisor's stop never ended it.
    const fs = require('node:fs');
    const os = require('node:os');
    const { spawn } = require('node:child_process');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmsand-serve-'));
    const proc = spawn(
      process.execPath,
      [path.join(pkg, 'bin', 'sandboxd.js'), 'serve', '--listen', '127.0.0.1:0', '--store', 'memory', '--data-dir', dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      let out = '';
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serve did not start: ${out}`)), 120_000);
        proc.stdout.on('data', (d) => {
          out += d;
          if (out.includes('listening on http://')) {
            clearTimeout(timer);
            resolve();
          }
        });
        proc.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${out}`)));
      });
      const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
      proc.kill(sig);
      const ended = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 30_000))]);
      assert.deepEqual(ended, { code: 0, signal: null }, 'serve did not exit on its own after the signal');
    } finally {
      proc.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}
