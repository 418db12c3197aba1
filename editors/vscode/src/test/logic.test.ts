import { test } from 'node:test';
import assert from 'node:assert/strict';
import { artifactTree, finishedLine, humanSize, parseCommandLine, specForFile, statusOf } from '../logic';

test('the active file becomes its language runner on the relative path', () => {
  assert.deepEqual(specForFile('app/main.py', 'python', false), { command: ['python3', 'app/main.py'] });
  assert.deepEqual(specForFile('app.js', 'javascript', false), { command: ['node', 'app.js'], base_image: 'node' });
  assert.deepEqual(specForFile('app.js', 'javascript', true), { command: ['node', 'app.js'] });
  assert.deepEqual(specForFile('cmd\\main.go', 'go', false), { command: ['go', 'run', './cmd'], base_image: 'golang' });
  assert.deepEqual(specForFile('main.go', 'go', true), { command: ['go', 'run', '.'] });
  assert.equal(specForFile('../outside.py', 'python', false), undefined);
  assert.equal(specForFile(undefined, 'python', false), undefined);
  assert.equal(specForFile('notes.md', 'markdown', false), undefined);
});

test('a typed command line splits like a shell would', () => {
  assert.deepEqual(parseCommandLine(`python3 -c 'print("a b")'`), ['python3', '-c', 'print("a b")']);
  assert.deepEqual(parseCommandLine('echo "x y" z\\ w ""'), ['echo', 'x y', 'z w', '']);
  assert.deepEqual(parseCommandLine('  ls   -l  '), ['ls', '-l']);
  assert.throws(() => parseCommandLine("echo 'open"), /unclosed ' quote/);
});

test('artifacts become a tree, directories first', () => {
  const tree = artifactTree([
    { path: 'out/b.txt', size: 3, url: 'u/b' },
    { path: 'report.txt', size: 2048, url: 'u/r' },
    { path: 'out/a/deep.bin', size: 1, url: 'u/d' },
  ]);
  assert.deepEqual(tree.map((n) => n.label), ['out', 'report.txt']);
  assert.deepEqual(tree[0].children.map((n) => n.label), ['a', 'b.txt']);
  assert.equal(tree[0].children[0].children[0].url, 'u/d');
  assert.equal(tree[1].size, 2048);
  assert.deepEqual(artifactTree([]), []);
  assert.equal(humanSize(2048), '2.0 KB');
  assert.equal(humanSize(10), '10 B');
});

test('the status bar shows the phase and the exit code', () => {
  assert.deepEqual(statusOf('running'), { text: '$(sync~spin) Sandbox: running', failed: false });
  assert.deepEqual(statusOf('completed', 0), { text: '$(pass) Sandbox: completed (exit 0)', failed: false });
  assert.deepEqual(statusOf('completed', 1), { text: '$(error) Sandbox: completed (exit 1)', failed: true });
  assert.deepEqual(statusOf('timed_out', null), { text: '$(error) Sandbox: timed_out', failed: true });
});

test('a finished run is one line with where it failed and the full log', () => {
  const line = finishedLine({
    run_id: 'r1', phase: 'completed', exit_code: 1, summary: 'exited with code 1', message: null,
    diagnostics: [{ uri: 'file:///w/app/lib.py', line: 2, message: 'ValueError', mapped: true }],
    artifacts_url: 'http://x/a', web_url: 'http://x/webui/sandbox/runs/r1',
  });
  assert.equal(line, '[r1] exited with code 1 at /w/app/lib.py:3; full log: http://x/webui/sandbox/runs/r1');
});
