'use strict';
// The SDK on each JSON-RPC transport (in-process and a sandboxd child): the event loop stays
// free while a command runs, streaming, AbortSignal, background handles, files, typed errors,
// forks and state, limits and receipts, host tools.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  CommandExitError,
  FileSystemError,
  InvalidParamsError,
  MergeConflictError,
  ProcessNotFoundError,
  SandboxDestroyedError,
  SandboxError,
  NotSupportedError,
  Sandbox,
  WaitTimeoutError,
} = require('..');
const { TRANSPORTS, serveForThisFile, skipFor, optionsFor, withSandbox, create } = require('./helpers');

serveForThisFile();

for (const transport of TRANSPORTS) {
  // What only the JSON-RPC transports have (the service refuses it with NotSupportedError,
  // tested below).
  const rpcOnly = transport === 'service' && 'not on the service transport';
  test.describe(transport, { skip: skipFor(transport) }, () => {
    test('the event loop keeps running while a command runs', async () => {
      await withSandbox(transport, async (sb) => {
        await sb.commands.run('true'); // the first run pays for start-up, outside the count
        let ticks = 0;
        const timer = setInterval(() => ticks++, 10);
        const started = Date.now();
        try {
          const r = await sb.commands.run('sleep 0.5; echo slept');
          assert.equal(r.stdout, 'slept\n');
        } finally {
          clearInterval(timer);
        }
        const elapsed = Date.now() - started;
        assert.ok(elapsed >= 450, `the run took ${elapsed} ms`);
        // A blocked loop would have ticked at most once, after the run.
        assert.ok(ticks >= 10, `only ${ticks} ticks of 10 ms during a ${elapsed} ms run`);
      });
    });

    test('output arrives through the callbacks while the command runs', async () => {
      await withSandbox(transport, async (sb) => {
        const chunks = [];
        let firstAt = null;
        const r = await sb.commands.run('echo one; echo err >&2; sleep 0.5; echo two', {
          onStdout: (c) => {
            if (firstAt === null) firstAt = Date.now();
            chunks.push(c);
          },
          onStderr: (c) => chunks.push(`E:${c}`),
        });
        const endedAt = Date.now();
        assert.equal(r.stdout, 'one\ntwo\n');
        assert.equal(chunks.filter((c) => !c.startsWith('E:')).join(''), 'one\ntwo\n');
        assert.ok(chunks.includes('E:err\n'));
        assert.ok(firstAt !== null && endedAt - firstAt >= 200, 'the first chunk came only at the end');
      });
    });

    test('an AbortSignal ends a running command and rejects with its reason', async () => {
      await withSandbox(transport, async (sb) => {
        const controller = new AbortController();
        const started = Date.now();
        setTimeout(() => controller.abort(), 200);
        await assert.rejects(sb.commands.run('echo started > /tmp/s; sleep 20', { signal: controller.signal }), (e) => {
          assert.equal(e.name, 'AbortError');
          return true;
        });
        assert.ok(Date.now() - started < 10_000, 'the command was not ended');
        // It did start, and the sandbox is usable afterwards.
        assert.equal(await sb.files.read('/tmp/s', { format: 'text' }), 'started\n');
        assert.equal((await sb.commands.run('echo after')).stdout, 'after\n');
        // Nothing of it is left running.
        for (const p of await sb.commands.list()) assert.equal(p.running, false);

        const reason = new Error('stop');
        await assert.rejects(sb.commands.run('touch /tmp/never', { signal: AbortSignal.abort(reason) }), (e) => e === reason);
        assert.equal(await sb.files.exists('/tmp/never'), false);

        // An aborted run is an ordinary run up to the abort: what it changed in the session
        // stays, and an atomic one is rolled back.
        const ac = new AbortController();
        const changing = sb.commands.run('cd /tmp; export K=kept; echo x > /tmp/f; echo go; sleep 20', {
          signal: ac.signal,
          onStdout: () => ac.abort(),
        });
        await assert.rejects(changing, (e) => e.name === 'AbortError');
        assert.equal((await sb.commands.run('pwd; echo $K')).stdout, '/tmp\nkept\n');
        if (transport !== 'service') {
          // (The service has no atomic runs.)
          const ac2 = new AbortController();
          const atomic = sb.commands.run('echo y > /tmp/g; echo go; sleep 20', {
            signal: ac2.signal,
            atomic: true,
            onStdout: () => ac2.abort(),
          });
          await assert.rejects(atomic, (e) => e.name === 'AbortError');
          assert.equal(await sb.files.exists('/tmp/g'), false);
          assert.equal(await sb.files.exists('/tmp/f'), true);
        }

        // A signal that never fires changes nothing: output and result as usual.
        const seen = [];
        const r = await sb.commands.run('echo a; exit 4', { signal: new AbortController().signal, onStdout: (c) => seen.push(c) });
        assert.deepEqual([r.exitCode, r.stdout, seen.join('')], [4, 'a\n', 'a\n']);
      });
    });

    test('background processes: handles, stdin, streamed output, wait, kill', async () => {
      await withSandbox(transport, async (sb) => {
        const out = [];
        const h = await sb.commands.run('read name; echo hello $name; echo bye >&2', {
          background: true,
          onStdout: (c) => out.push(c),
        });
        assert.equal(typeof h.pid, 'number');
        assert.equal(await h.sendStdin('world\n'), 6);
        await h.closeStdin();
        const r = await h.wait({ timeoutMs: 10_000 });
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout, 'hello world\n');
        assert.equal(r.stderr, 'bye\n');
        assert.equal(out.join(''), 'hello world\n');

        const chunks = [];
        const counter = await sb.commands.run('for i in 1 2 3; do echo $i; done', { background: true });
        for await (const c of counter) chunks.push(c.stdout);
        assert.equal(chunks.join(''), '1\n2\n3\n');

        const long = await sb.commands.run('sleep 60', { background: true, timeoutMs: 120_000 });
        await assert.rejects(long.wait({ timeoutMs: 50 }), WaitTimeoutError);
        const listed = await sb.commands.list();
        assert.ok(listed.some((p) => p.pid === long.pid && p.running));
        assert.equal(await long.kill(), true);
        const killed = await long.wait();
        assert.deepEqual([killed.exitCode, killed.errorClass], [137, 'CANCELLED']);
        assert.equal(await long.kill(), false);

        const again = await sb.commands.connect(h.pid);
        assert.equal((await again.wait()).stdout, 'hello world\n');
        await assert.rejects(sb.commands.connect(999), ProcessNotFoundError);

        const ac = new AbortController();
        const waiting = sb.commands.run('sleep 60', { background: true }).then((p) => p.wait({ signal: ac.signal }));
        setTimeout(() => ac.abort(), 100);
        await assert.rejects(waiting, { name: 'AbortError' });
      });
    });

    test('files: bytes by default, text one option away, large files in chunks', async () => {
      await withSandbox(transport, async (sb) => {
        await sb.files.write('/tmp/a/b.txt', 'héllo\n');
        const bytes = await sb.files.read('/tmp/a/b.txt');
        assert.ok(bytes instanceof Uint8Array);
        assert.deepEqual(Buffer.from(bytes), Buffer.from('héllo\n'));
        assert.equal(await sb.files.read('/tmp/a/b.txt', { format: 'text' }), 'héllo\n');

        const big = Buffer.alloc(2_500_000);
        for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251;
        await sb.files.write('/tmp/big.bin', big);
        assert.equal((await sb.commands.run('wc -c < /tmp/big.bin')).stdout.trim(), String(big.length));
        assert.ok(Buffer.from(await sb.files.read('/tmp/big.bin')).equals(big));
        let streamed = 0;
        for await (const chunk of await sb.files.read('/tmp/big.bin', { format: 'stream' })) streamed += chunk.length;
        assert.equal(streamed, big.length);
        // No upload leftovers next to it.
        assert.deepEqual((await sb.files.list('/tmp')).map((e) => e.name).sort(), ['a', 'big.bin']);

        async function* pieces() {
          yield 'ab';
          yield new Uint8Array([99]);
        }
        await sb.files.write('/tmp/it', pieces());
        assert.equal(await sb.files.read('/tmp/it', { format: 'text' }), 'abc');

        assert.deepEqual(await sb.files.stat('/tmp/a/b.txt'), { name: 'b.txt', type: 'file', size: 7 });
        assert.equal(await sb.files.exists('/tmp/a/b.txt'), true);
        assert.equal(await sb.files.exists('/tmp/nope'), false);
        assert.equal(await sb.files.makeDir('/tmp/d/e'), true);
        assert.equal(await sb.files.makeDir('/tmp/d/e'), false);
        await sb.files.rename('/tmp/a/b.txt', '/tmp/d/b.txt');
        await assert.rejects(sb.files.rm('/tmp/d'), (e) => e instanceof FileSystemError && e.code === 'ENOTEMPTY');
        await sb.files.remove('/tmp/d');
        await assert.rejects(sb.files.read('/tmp/d/b.txt'), (e) => {
          assert.ok(e instanceof FileSystemError);
          assert.equal(e.code, 'ENOENT');
          assert.equal(e.kind, 'filesystem');
          return true;
        });
        await assert.rejects(sb.files.read('/tmp/it', { format: 'hex' }), InvalidParamsError);
      });
    });

    test('commands: envs, cwd, stdin, check, timeouts and receipts', async () => {
      await withSandbox(transport, { timeoutMs: 5000 }, async (sb) => {
        const r = await sb.commands.run('pwd; echo $A; cat', { cwd: '/tmp', envs: { A: "it's" }, stdin: 'in\n' });
        assert.equal(r.stdout, "/tmp\nit's\nin\n");
        assert.equal((await sb.commands.run('cat | wc -c', { stdin: new Uint8Array([0, 1, 2]) })).stdout.trim(), '3');
        const receipt = await sb.commands.run('echo x | tr x y > /tmp/y');
        assert.ok(receipt.usage.wallMs >= 0 && receipt.executionTimeMs >= 0);
        assert.deepEqual(receipt.usage.limitsHit, []);

        await assert.rejects(sb.commands.run('echo oops >&2; exit 3', { check: true }), (e) => {
          assert.ok(e instanceof CommandExitError);
          assert.equal(e.exitCode, 3);
          assert.equal(e.result.stderr, 'oops\n');
          return true;
        });
        const slow = await sb.commands.run('while :; do :; done', { timeoutMs: 1000 });
        assert.deepEqual([slow.exitCode, slow.errorClass], [124, 'TIMEOUT']);
        assert.ok(slow.usage.limitsHit.includes('timeoutMs'));
        await assert.rejects(sb.commands.run('true', { envs: { '1A': 'x' } }), InvalidParamsError);
      });
    });

    test('limits, receipts and atomic runs', { skip: rpcOnly }, async () => {
      await withSandbox(transport, { limits: { stdoutBytes: 1000 } }, async (sb) => {
        const receipt = await sb.commands.run('echo x | tr x y > /tmp/y');
        assert.equal(receipt.usage.processes, 2);
        assert.equal(receipt.usage.filesCreated, 1);
        const loud = await sb.commands.run('seq 1 10000', { truncation: 'plain' });
        assert.deepEqual(loud.truncated, { stdout: true, stderr: false });
        assert.ok(loud.usage.limitsHit.includes('stdoutBytes'));
        const atomic = await sb.commands.run('echo x > /tmp/new; false', { atomic: true });
        assert.equal(atomic.rolledBack, true);
        assert.equal(await sb.files.exists('/tmp/new'), false);
      });
      await assert.rejects(create(transport, { limits: { noSuchLimit: 1 } }), InvalidParamsError);
    });

    test('snapshots, forks, merge and portable state', async () => {
      await withSandbox(transport, async (sb) => {
        await sb.commands.run('echo base > /tmp/f; cd /tmp');
        const snap = await sb.snapshot();
        await sb.commands.run('echo changed > /tmp/f; cd /');
        await sb.restore(snap);
        assert.equal((await sb.commands.run('pwd; cat f')).stdout, '/tmp\nbase\n');
        await assert.rejects(sb.restore('999'), InvalidParamsError);

        const fork = await sb.fork();
        assert.equal(typeof fork.sandboxId, 'string');
        assert.equal(sb.sandboxId, null);
        await fork.commands.run('echo fork > /tmp/f; echo new > /tmp/g');
        assert.equal(await sb.files.read('/tmp/f', { format: 'text' }), 'base\n');
        const merged = await sb.merge(fork);
        assert.deepEqual(merged.applied, { '/tmp/f': 'changed', '/tmp/g': 'added' });
        assert.equal(await sb.files.read('/tmp/g', { format: 'text' }), 'new\n');

        await fork.commands.run('echo theirs > /tmp/f');
        await sb.commands.run('echo ours > /tmp/f');
        await assert.rejects(sb.merge(fork), (e) => {
          assert.ok(e instanceof MergeConflictError);
          assert.deepEqual(e.conflicts, [{ path: '/tmp/f', ours: 'changed', theirs: 'changed' }]);
          return true;
        });
        await fork.destroy();
        await assert.rejects(fork.commands.run('true'), SandboxDestroyedError);
        await assert.rejects(sb.destroy(), SandboxError);
      });
    });

    test('portable state: exportState and importState', { skip: rpcOnly }, async () => {
      await withSandbox(transport, async (sb) => {
        await sb.commands.run('echo ours > /tmp/f; cd /tmp');
        const key = new TextEncoder().encode('secret');
        const blob = await sb.exportState({ key });
        assert.ok(blob instanceof Uint8Array && blob.length > 0);
        const copy = await Sandbox.importState(blob, { key, transport, sandboxd: optionsFor(transport).sandboxd });
        try {
          assert.equal((await copy.commands.run('pwd; cat /tmp/f')).stdout, '/tmp\nours\n');
        } finally {
          await copy.kill();
        }
        await assert.rejects(
          Sandbox.importState(blob, { key: 'wrong', transport, sandboxd: optionsFor(transport).sandboxd }),
          InvalidParamsError,
        );
      });
    });

    test('previews and best-of-N', async () => {
      await withSandbox(transport, async (sb) => {
        const r = await sb.commands.run('echo p > /home/user/p.txt', { preview: true });
        assert.ok(r.preview);
        assert.equal(typeof r.preview.sandboxId, 'string');
        assert.ok(
          r.preview.changes.files.some((f) => f.path === 'p.txt' && f.status === 'added'),
          JSON.stringify(r.preview.changes),
        );
        assert.equal(await sb.files.exists('/home/user/p.txt'), false);
        await sb.commit(r);
        assert.equal(await sb.files.read('/home/user/p.txt', { format: 'text' }), 'p\n');
        const results = await sb.bestOf(['echo 1 > /tmp/q', { command: 'echo $V > /tmp/q', env: { V: '2' } }]);
        assert.equal(results.length, 2);
        await sb.commit(results[1]);
        await sb.discard(results[0]);
        assert.equal(await sb.files.read('/tmp/q', { format: 'text' }), '2\n');
      });
    });

    test('host folders in, changes out', { skip: rpcOnly }, async () => {
      const host = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmsand-node-mount-'));
      const out = fs.mkdtempSync(path.join(os.tmpdir(), 'wasmsand-node-out-'));
      try {
        fs.writeFileSync(path.join(host, 'a.txt'), 'host\n');
        await withSandbox(transport, { mounts: [`${host}:proj`] }, async (sb) => {
          const [m] = await sb.mounts();
          assert.equal(m.path, '/home/user/proj');
          assert.equal(await sb.files.read('/home/user/proj/a.txt', { format: 'text' }), 'host\n');
          await sb.commands.run('cd proj && echo sandbox > a.txt && echo new > b.txt');
          const changes = await sb.changes();
          assert.deepEqual(changes.files.map((f) => [f.path, f.status]).sort(), [
            ['a.txt', 'modified'],
            ['b.txt', 'added'],
          ]);
          assert.match(changes.patch, /^\+sandbox$/m);
          // The host folder is never written; the changes go where they are asked to.
          assert.equal(fs.readFileSync(path.join(host, 'a.txt'), 'utf8'), 'host\n');
          const report = await sb.exportChanges(out);
          assert.deepEqual(report.written.sort(), ['a.txt', 'b.txt']);
          assert.equal(fs.readFileSync(path.join(out, 'b.txt'), 'utf8'), 'new\n');
        });
      } finally {
        fs.rmSync(host, { recursive: true, force: true });
        fs.rmSync(out, { recursive: true, force: true });
      }
    });

    test('a killed sandbox refuses every call', async () => {
      const sb = await create(transport);
      await sb.kill();
      await sb.kill(); // twice is fine
      await assert.rejects(sb.commands.run('true'), SandboxDestroyedError);
      await assert.rejects(sb.files.read('/tmp'), SandboxDestroyedError);
    });

    test('host tools: guest Python calls an async JavaScript function', { skip: rpcOnly }, async () => {
      const calls = [];
      await withSandbox(
        transport,
        {
          tools: {
            add: async ({ a, b }) => {
              calls.push([a, b]);
              await new Promise((r) => setTimeout(r, 10));
              return a + b;
            },
          },
        },
        async (sb) => {
          await sb.tools.register('fail', () => {
            throw new Error('no luck');
          });
          assert.deepEqual(await sb.tools.list(), ['add', 'fail']);
          const r = await sb.commands.run(
            'python3 -c "from host import tools\nprint(tools.add(a=2, b=3))\ntry:\n    tools.fail()\nexcept Exception as e:\n    print(type(e).__name__, e)"',
            { timeoutMs: 120_000 },
          );
          assert.equal(r.stderr, '');
          assert.equal(r.stdout, '5\nToolError no luck\n');
          assert.deepEqual(calls, [[2, 3]]);
          assert.equal(await sb.tools.unregister('fail'), true);
        },
      );
    });

    test('what the service cannot do rejects with NotSupportedError, and nothing is left behind', {
      skip: transport !== 'service' && 'the service transport only',
    }, async () => {
      await assert.rejects(create(transport, { tools: { f: () => 1 } }), NotSupportedError);
      await assert.rejects(create(transport, { limits: { stdoutBytes: 10 } }), NotSupportedError);
      await withSandbox(transport, async (sb) => {
        await assert.rejects(sb.exportState(), NotSupportedError);
        await assert.rejects(sb.tools.register('f', () => 1), NotSupportedError);
        await assert.rejects(sb.commands.run('true', { atomic: true }), NotSupportedError);
        assert.equal((await sb.commands.run('echo still')).stdout, 'still\n');
      });
    });
  });
}
