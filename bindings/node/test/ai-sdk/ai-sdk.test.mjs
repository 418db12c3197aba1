// wasmsand/ai driven by the Vercel AI SDK's own tool loop: `generateText` with the SDK's
// `MockLanguageModelV4` scripting the tool calls a model would make (no network, no key), on
// in-process sandboxes. What is asserted is what the model reads back: the tool results in
// the prompt of the model's next call.
//
// Run by `npm test` here after `npm ci` (scripts/test.sh, node stage): the SDK is installed in
// this directory only, and `wasmsand` is linked into it (package.json's postinstall), so Node
// must keep the link's path (--preserve-symlinks) for lib/ai.mjs to find `ai` here. Without
// either, this file fails: a missing framework is a failure, never a skip.
import test from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(new URL('.', import.meta.url));

async function load() {
  try {
    return {
      ai: await import('ai'),
      aiTest: await import('ai/test'),
      wasmsand: (await import('wasmsand')).default,
      provider: await import('wasmsand/ai'),
    };
  } catch (e) {
    throw new Error(
      `the AI SDK test needs its own install: cd ${HERE} && npm ci && npm test (node --preserve-symlinks); ${e.message}`,
    );
  }
}
const { ai, aiTest, wasmsand, provider } = await load();
const { generateText, isStepCount, jsonSchema, tool } = ai;
const { MockLanguageModelV4 } = aiTest;
const { Sandbox } = wasmsand;
const { WasmsandSandboxSession, createWasmsandTools, TOOL_SPECS } = provider;

const USAGE = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** A model answer: tool calls `[id, toolName, input]` (an input that is a string is sent as
 * is, not JSON-encoded), or the final text. */
function answer(calls) {
  if (typeof calls === 'string') {
    const content = [{ type: 'text', text: calls }];
    return { content, finishReason: { unified: 'stop', raw: undefined }, usage: USAGE, warnings: [] };
  }
  return {
    content: calls.map(([toolCallId, toolName, input]) => ({
      type: 'tool-call',
      toolCallId,
      toolName,
      input: typeof input === 'string' ? input : JSON.stringify(input),
    })),
    finishReason: { unified: 'tool-calls', raw: undefined },
    usage: USAGE,
    warnings: [],
  };
}

/** What the model read back from each tool call so far: `{id: {type, value}}`. */
function replies(prompt) {
  const seen = {};
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const p of m.content) if (p.type === 'tool-result') seen[p.toolCallId] = p.output;
  }
  return seen;
}

/** Runs `generateText` with a model that makes the calls of `turns` in order (a turn may be a
 * function of the prompt so far, as a model's next call depends on what it read), then says
 * "done". Resolves with the result and the tool replies of the whole run. */
async function agent({ tools, turns, ...options }) {
  let i = 0;
  const model = new MockLanguageModelV4({
    doGenerate: async ({ prompt }) => {
      const turn = turns[i++];
      return answer(turn === undefined ? 'done' : typeof turn === 'function' ? turn(replies(prompt)) : turn);
    },
  });
  const result = await generateText({
    model,
    tools,
    prompt: 'Do the task with the sandbox.',
    stopWhen: isStepCount(turns.length + 1),
    ...options,
  });
  assert.equal(result.text, 'done', 'the loop ran to the model\'s last answer');
  assert.equal(model.doGenerateCalls.length, turns.length + 1);
  return { result, model, seen: replies(model.doGenerateCalls.at(-1).prompt) };
}

/** The text the model read from call `id`; fails when that call's reply was not text. */
function text(seen, id) {
  const out = seen[id];
  assert.ok(out, `no reply to ${id}`);
  assert.equal(out.type, 'text', `reply to ${id}: ${JSON.stringify(out)}`);
  return out.value;
}

async function withSandbox(options, fn) {
  const sb = await Sandbox.create({ transport: 'inprocess', ...options });
  try {
    return await fn(sb);
  } finally {
    await sb.kill();
  }
}

test('the model is offered the five tools with their JSON schemas', async () => {
  await withSandbox({}, async (sandbox) => {
    const { model } = await agent({ tools: createWasmsandTools({ sandbox }), turns: [] });
    const offered = Object.fromEntries(model.doGenerateCalls[0].tools.map((t) => [t.name, t]));
    assert.deepEqual(Object.keys(offered).sort(), ['list_directory', 'read_file', 'run_python', 'run_shell', 'write_file']);
    for (const [name, spec] of Object.entries(TOOL_SPECS)) {
      assert.equal(offered[name].description, spec.description);
      assert.deepEqual(offered[name].inputSchema, spec.inputSchema);
    }
    assert.deepEqual(offered.run_shell.inputSchema.required, ['command']);
  });
});

test('a multi-step run: files, the shell state between calls, python, exit codes', async () => {
  await withSandbox({}, async (sandbox) => {
    const { seen, result } = await agent({
      tools: createWasmsandTools({ sandbox }),
      turns: [
        [['w', 'write_file', { path: 'data.csv', content: 'a,b\n1,2\n3,4\n' }]],
        [['count', 'run_shell', { command: 'wc -l < data.csv; cd /tmp; export X=42' }]],
        [['state', 'run_shell', { command: 'pwd; echo $X; echo oops >&2; exit 3' }]],
        // Three calls in one step, as a model may make them.
        [
          [
            'py',
            'run_python',
            { code: "import csv\nrows = list(csv.DictReader(open('/home/user/data.csv')))\nprint(sum(int(r['b']) for r in rows))" },
          ],
          ['ls', 'list_directory', { path: '/home/user' }],
          ['cat', 'read_file', { path: '/home/user/data.csv' }],
        ],
        [['quiet', 'run_shell', { command: 'true', cwd: '/home/user' }]],
      ],
    });
    assert.equal(text(seen, 'w'), 'wrote 12 bytes to data.csv');
    assert.equal(text(seen, 'count'), 'exit code 0\n--- stdout ---\n3');
    assert.equal(text(seen, 'state'), 'exit code 3\n--- stdout ---\n/tmp\n42\n--- stderr ---\noops');
    assert.equal(text(seen, 'py'), 'exit code 0\n--- stdout ---\n6');
    assert.equal(text(seen, 'ls'), 'data.csv  12 bytes');
    assert.equal(text(seen, 'cat'), 'a,b\n1,2\n3,4\n');
    assert.equal(text(seen, 'quiet'), 'exit code 0\n(no output)');
    assert.equal(result.steps.length, 6);
    assert.equal(await sandbox.files.read('/home/user/data.csv', { format: 'text' }), 'a,b\n1,2\n3,4\n');
  });
});

test('output cut by the sandbox names the spilled file, and the model can read it', async () => {
  await withSandbox({ limits: { stdoutBytes: 4096 } }, async (sandbox) => {
    let spilled = null;
    const { seen } = await agent({
      tools: createWasmsandTools({ sandbox }),
      turns: [
        [['big', 'run_shell', { command: 'seq 1 100000' }]],
        // The next call follows the note, as a model would.
        (so) => {
          spilled = /all of it is in (\S+): search or page that file/.exec(so.big.value)?.[1];
          return [['tail', 'run_shell', { command: `tail -n 1 ${spilled}` }]];
        },
      ],
    });
    const big = text(seen, 'big');
    assert.match(big, /^exit code 0\n--- stdout ---\n1\n2\n3\n/);
    assert.match(
      big,
      new RegExp(
        '\n100000\nnote: stdout was longer than the sandbox keeps; all of it is in /tmp/\\S+: search or page that ' +
          'file \\(grep, head, tail, sed -n\\) rather than printing it whole\\.$',
      ),
    );
    assert.ok(spilled);
    assert.equal(text(seen, 'tail'), 'exit code 0\n--- stdout ---\n100000');
  });
});

test('output longer than a reply keeps its start and end and says how much is left out', async () => {
  await withSandbox({}, async (sandbox) => {
    const { seen } = await agent({
      tools: createWasmsandTools({ sandbox, settings: { maxOutputChars: 200 } }),
      turns: [[['long', 'run_shell', { command: 'seq 1 500' }]]],
    });
    const all = Array.from({ length: 500 }, (_, i) => `${i + 1}\n`).join('');
    const cut = all.length - 200;
    const reply = text(seen, 'long');
    // 3/5 of the cap from the start, the rest from the end.
    assert.equal(
      reply,
      `exit code 0\n--- stdout ---\n${all.slice(0, 120)}\n[... ${cut} characters left out ...]\n` +
        `${all.slice(-80).replace(/\n$/, '')}\nnote: ${cut} characters in the middle of stdout are not shown: send ` +
        'it to a file (command > /tmp/out.txt) and read the parts you need with grep, head or tail.',
    );
  });
});

test('time limits: a stopped command, a timeout lowered to the maximum, a bad timeout', async () => {
  await withSandbox({}, async (sandbox) => {
    const started = Date.now();
    const { seen } = await agent({
      tools: createWasmsandTools({ sandbox, settings: { maxTimeoutMs: 2000 } }),
      turns: [
        [['slow', 'run_shell', { command: 'echo start; sleep 10; echo never', timeout: 0.5 }]],
        [['long', 'run_shell', { command: 'echo ok', timeout: 600 }]],
        [['bad', 'run_shell', { command: 'true', timeout: -1 }]],
      ],
    });
    assert.ok(Date.now() - started < 8000, 'the sleep was stopped at its time limit');
    assert.equal(
      text(seen, 'slow'),
      'exit code 124\n--- stdout ---\nstart\n--- stderr ---\ncommand timed out\n' +
        'note: the command was stopped at its time limit of 0.5 s (exit code 124): make it do less per call ' +
        '(less data, fewer iterations), or run it again with a longer timeout.',
    );
    assert.equal(
      text(seen, 'long'),
      'exit code 0\n--- stdout ---\nok\nnote: the timeout asked for (600 s) was lowered to the maximum, 2 s.',
    );
    assert.equal(
      text(seen, 'bad'),
      'Invalid arguments: timeout must be a positive number of seconds, not -1. Correct them and retry.',
    );
  });
});

test('limits and denials come back as what happened and what to do', async () => {
  await withSandbox({ limits: { memoryBytes: 64 << 20, fsBytes: 1 << 20 } }, async (sandbox) => {
    const { seen } = await agent({
      tools: createWasmsandTools({ sandbox }),
      turns: [
        [['ro', 'write_file', { path: '/usr/bin/tool', content: 'x' }]],
        [['full', 'write_file', { path: '/tmp/big', content: 'x'.repeat(2 << 20) }]],
        [['disk', 'run_shell', { command: 'head -c 2000000 /dev/zero > /tmp/zeros' }]],
        [['mem', 'run_python', { code: 'x = bytearray(512 << 20)' }]],
        [['missing', 'read_file', { path: '/home/user/missing.txt' }]],
        [['notdir', 'list_directory', { path: '/home/user/nothing/here' }]],
        [['args', 'run_shell', { command: 5 }]],
        [['json', 'run_shell', '{"command": "echo unterminated']],
      ],
    });
    assert.equal(
      text(seen, 'ro'),
      'Read-only: /usr/bin/tool. Only /home/user and /tmp are writable in this sandbox; write there instead.',
    );
    assert.equal(
      text(seen, 'full'),
      "The sandbox's disk is full (its size or file-count limit): delete files you no longer need, then retry.",
    );
    assert.match(
      text(seen, 'disk'),
      /\nnote: a sandbox limit was hit: the sandbox's disk space is full: delete files you no longer need\.$/,
    );
    const mem = text(seen, 'mem');
    assert.match(mem, /^exit code 1\n--- stderr ---\nTraceback[^]*MemoryError/);
    assert.match(
      mem,
      /\nnote: a sandbox limit was hit: a program ran out of memory \(the sandbox caps each program's memory\): work on smaller pieces of the data\.$/,
    );
    assert.equal(
      text(seen, 'missing'),
      'No such file or directory: /home/user/missing.txt. Check the path; list_directory shows what exists.',
    );
    assert.match(text(seen, 'notdir'), /^No such file or directory: \/home\/user\/nothing(\/here)?\. Check the path/);
    assert.equal(
      text(seen, 'args'),
      "Invalid arguments: argument 'command' must be a non-empty string. Correct them and retry.",
    );
    // Input that is not JSON never reaches the tool: the SDK itself answers the model.
    assert.equal(seen.json.type, 'error-text');
    assert.match(seen.json.value, /Invalid input for tool run_shell/);
  });
});

test('files as the model reads them: binary, cut, empty, a directory, a listing', async () => {
  await withSandbox({}, async (sandbox) => {
    const blob = new Uint8Array(300).map((_, i) => i % 256);
    await sandbox.files.write('/home/user/img.bin', blob);
    // One ASCII byte, then two-byte characters: byte 100 falls inside one.
    await sandbox.files.write('/home/user/long.txt', `a${'é'.repeat(200)}`);
    await sandbox.files.write('/home/user/empty.txt', '');
    await sandbox.files.write('/home/user/d/f.txt', 'abc');
    await sandbox.commands.run('ln -s d/f.txt /home/user/d/link && mkdir /home/user/d/sub');
    const { seen } = await agent({
      tools: createWasmsandTools({ sandbox, settings: { maxReadBytes: 100, maxListEntries: 2 } }),
      turns: [
        [
          ['bin', 'read_file', { path: '/home/user/img.bin' }],
          ['long', 'read_file', { path: '/home/user/long.txt' }],
          ['empty', 'read_file', { path: '/home/user/empty.txt' }],
          ['dir', 'read_file', { path: '/home/user/d' }],
          ['ls', 'list_directory', { path: '/home/user/d' }],
        ],
      ],
    });
    assert.equal(
      text(seen, 'bin'),
      '/home/user/img.bin is a binary file (300 bytes), not shown as text. Look into it with a command instead, ' +
        'e.g. `head -c 256 /home/user/img.bin | od -c`, or with a Python program.',
    );
    assert.equal(
      text(seen, 'long'),
      `a${'é'.repeat(49)}\n[showing the first 99 of 401 bytes of /home/user/long.txt; read further with a command, ` +
        'e.g. `tail -c +100 /home/user/long.txt | head -c 100`, or search it with grep]',
    );
    assert.equal(text(seen, 'empty'), '/home/user/empty.txt is empty (0 bytes).');
    assert.equal(text(seen, 'dir'), '/home/user/d is a directory, not a file: list it with list_directory.');
    assert.equal(
      text(seen, 'ls'),
      'f.txt  3 bytes\nlink -> (symlink)\n' +
        '[1 more entries not shown: narrow it down with a command, e.g. `ls /home/user/d | grep PATTERN`]',
    );
  });
});

test('a sandbox shut down, and tools given no sandbox', async () => {
  const sandbox = await Sandbox.create({ transport: 'inprocess' });
  await sandbox.kill();
  const { seen } = await agent({
    tools: createWasmsandTools({ sandbox }),
    turns: [[['gone', 'run_shell', { command: 'echo hi' }]]],
  });
  assert.equal(
    text(seen, 'gone'),
    'The sandbox has been shut down; nothing more can run in it. Finish with what you have.',
  );

  // A program error: the SDK reports the throw as the step's tool error.
  const lost = await agent({ tools: createWasmsandTools(), turns: [[['none', 'run_shell', { command: 'echo hi' }]]] });
  assert.equal(lost.seen.none.type, 'error-text');
  assert.match(
    lost.seen.none.value,
    /^Error: no sandbox for the wasmsand tools: pass a WasmsandSandboxSession as experimental_sandbox/,
  );
});

test('experimental_sandbox: the tools and a tool of the SDK docs run in a WasmsandSandboxSession', async () => {
  const session = await WasmsandSandboxSession.create({ transport: 'inprocess', timeoutMs: 2000 });
  try {
    assert.match(session.description, /Commands start in \/home\/user/);
    // The tool of the SDK's documentation: whatever `run` resolves with goes to the model.
    const shell = tool({
      description: 'Run a shell command.',
      inputSchema: jsonSchema({ type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }),
      execute: async ({ command }, { experimental_sandbox }) => experimental_sandbox.run({ command }),
    });
    const { seen } = await agent({
      tools: { ...createWasmsandTools(), shell },
      experimental_sandbox: session,
      turns: [
        [['w', 'write_file', { path: '/home/user/notes.txt', content: 'one\ntwo\nthree\n' }]],
        [['count', 'shell', { command: 'wc -l < notes.txt; cd /tmp' }]],
        [['where', 'shell', { command: 'pwd' }]],
        [['slow', 'shell', { command: 'echo start; sleep 10' }]],
        [['py', 'run_python', { code: 'print(open("/home/user/notes.txt").read().split()[1])' }]],
      ],
    });
    assert.equal(text(seen, 'w'), 'wrote 14 bytes to /home/user/notes.txt');
    assert.deepEqual(seen.count, { type: 'json', value: { exitCode: 0, stdout: '3\n', stderr: '' } });
    // The session's directory does not move with a `cd`: the SDK's contract.
    assert.deepEqual(seen.where, { type: 'json', value: { exitCode: 0, stdout: '/home/user\n', stderr: '' } });
    assert.equal(seen.slow.type, 'json');
    assert.equal(seen.slow.value.exitCode, 124);
    assert.equal(seen.slow.value.stdout, 'start\n');
    assert.match(
      seen.slow.value.stderr,
      /^command timed out\nnote: the command was stopped at its time limit of 2 s \(exit code 124\)/,
    );
    assert.equal(text(seen, 'py'), 'exit code 0\n--- stdout ---\ntwo');
  } finally {
    await session.close();
  }
  // The session made the sandbox, so closing it ended it.
  await assert.rejects(session.sandbox.commands.run('true'), wasmsand.SandboxDestroyedError);
});

test('the session keeps the SDK contract of Experimental_SandboxSession', async () => {
  await withSandbox({}, async (sb) => {
    const s = new WasmsandSandboxSession(sb, { workingDirectory: '/home/user/work' });
    await s.writeTextFile({ path: 'a/lines.txt', content: 'l1\r\nl2\r\nl3\r\n' });
    assert.equal(await s.readTextFile({ path: '/home/user/work/a/lines.txt', startLine: 2, endLine: 3 }), 'l2\r\nl3');
    assert.equal(await s.readTextFile({ path: 'a/lines.txt', startLine: 3, endLine: 99 }), 'l3\r\n');
    await s.writeBinaryFile({ path: 'b.bin', content: new Uint8Array([0, 1, 2]) });
    assert.deepEqual([...(await s.readBinaryFile({ path: 'b.bin' }))], [0, 1, 2]);
    await s.writeFile({ path: 'c.txt', content: new Blob(['from ', 'a stream']).stream() });
    const chunks = [];
    for await (const c of await s.readFile({ path: 'c.txt' })) chunks.push(...c);
    assert.equal(Buffer.from(chunks).toString(), 'from a stream');
    assert.equal(await s.readFile({ path: 'nope' }), null);
    assert.equal(await s.readBinaryFile({ path: 'nope' }), null);
    assert.equal(await s.readTextFile({ path: 'nope' }), null);

    await s.run({ command: 'ln -s c.txt link; ln -s a dirlink; ln -s nowhere dangling' });
    assert.deepEqual(await s.stat({ path: 'c.txt' }), { type: 'file', size: 13 });
    assert.deepEqual(await s.stat({ path: 'link' }), { type: 'file', size: 13 });
    assert.equal((await s.stat({ path: 'dirlink' })).type, 'directory');
    assert.equal(await s.stat({ path: 'dangling' }), null);
    assert.equal(await s.stat({ path: 'nope' }), null);
    const entries = await s.listDirectory({ path: '.' });
    assert.deepEqual(
      entries.sort((x, y) => x.name.localeCompare(y.name)),
      [
        { name: 'a', type: 'directory' },
        { name: 'b.bin', type: 'file' },
        { name: 'c.txt', type: 'file' },
        { name: 'dangling', type: 'symlink' },
        { name: 'dirlink', type: 'symlink' },
        { name: 'link', type: 'symlink' },
      ],
    );
    assert.equal(await s.listDirectory({ path: 'nope' }), null);
    await assert.rejects(s.listDirectory({ path: 'c.txt' }), (e) => e.code === 'ENOTDIR');
    assert.equal(await s.deleteFile({ path: 'link' }), true);
    assert.deepEqual(await s.stat({ path: 'c.txt' }), { type: 'file', size: 13 }, 'the link went, not its target');
    assert.equal(await s.deleteFile({ path: 'link' }), false);
    await assert.rejects(s.deleteFile({ path: 'a' }), (e) => e.code === 'EISDIR');

    // run: env for this command only, workingDirectory relative to the session's, refusals.
    assert.deepEqual(await s.run({ command: 'echo "$GREETING"; pwd', env: { GREETING: 'hi' }, workingDirectory: 'a' }), {
      exitCode: 0,
      stdout: 'hi\n/home/user/work/a\n',
      stderr: '',
    });
    assert.deepEqual(await s.run({ command: 'true', env: { '1BAD': 'x' } }), {
      exitCode: 126,
      stdout: '',
      stderr:
        'The sandbox refused the arguments: Invalid param: env: "1BAD" is not a variable name. Correct them and ' +
        'retry.\n',
    });

    // spawn: streamed output, stdin when asked for, closed otherwise.
    const cat = await s.spawn({ command: 'cat; echo end >&2', stdin: true });
    const writer = cat.stdin.getWriter();
    await writer.write(new TextEncoder().encode('piped\n'));
    await writer.close();
    const [out, err] = await Promise.all([new Response(cat.stdout).text(), new Response(cat.stderr).text()]);
    assert.deepEqual(await cat.wait(), { exitCode: 0 });
    assert.equal(out, 'piped\n');
    assert.equal(err, 'end\n');
    const noInput = await s.spawn({ command: 'cat; echo eof' });
    assert.equal(noInput.stdin, undefined);
    assert.deepEqual(await noInput.wait(), { exitCode: 0 });
    assert.equal(await new Response(noInput.stdout).text(), 'eof\n');

    // An abort kills the process, and wait() rejects with the reason.
    const controller = new AbortController();
    const sleeper = await s.spawn({ command: 'sleep 30', abortSignal: controller.signal });
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('stop')), 100);
    await assert.rejects(sleeper.wait(), /stop/);
    assert.ok(Date.now() - started < 10_000);
    await sleeper.kill(); // already ended: still fine
  });
});

test('examples/ai-sdk.mjs runs offline with its scripted model', () => {
  const env = { ...process.env };
  delete env.OPENAI_API_KEY;
  // Through the link, as a user's project would have the package.
  const r = spawnSync(
    process.execPath,
    ['--preserve-symlinks', '--preserve-symlinks-main', 'node_modules/wasmsand/examples/ai-sdk.mjs'],
    { cwd: HERE, env, encoding: 'utf8', timeout: 120_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^\[run_shell\] exit code 0\n--- stdout ---\ncity,temp\nParis,12\nTokyo,18\n4 data\.csv\n/);
  assert.match(r.stdout, /\[run_python\] exit code 0\n--- stdout ---\n11\.0\n/);
  assert.match(r.stdout, /The mean temperature in data\.csv is 11\.0\.\n$/);
});
