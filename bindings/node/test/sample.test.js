'use strict';
// examples/sample.ts, the program `tsc --strict` checks against index.d.ts, runs as written
// (its types stripped by TypeScript's own transpiler) on each transport, so the declarations
// describe code that works.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const { TRANSPORTS, serveForThisFile, skipFor, optionsFor } = require('./helpers');

serveForThisFile();

function loadSample() {
  const ts = require('typescript');
  const file = path.join(__dirname, '..', 'examples', 'sample.ts');
  const js = ts.transpileModule(fs.readFileSync(file, 'utf8'), {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  m._compile(js, file);
  return m.exports;
}

for (const transport of TRANSPORTS) {
  test(`examples/sample.ts runs on ${transport}`, { skip: skipFor(transport) }, async () => {
    // The sample names only the transport; the server comes from the environment, as for
    // any program (`$WASMSAND_SANDBOXD`, `$WASMSAND_URL`).
    const opts = optionsFor(transport);
    const saved = { sandboxd: process.env.WASMSAND_SANDBOXD, url: process.env.WASMSAND_URL };
    if (opts.sandboxd) process.env.WASMSAND_SANDBOXD = opts.sandboxd;
    if (opts.url) process.env.WASMSAND_URL = opts.url;
    try {
      const log = await loadSample().main(transport);
      assert.deepEqual(log, [
        'chunk HELLO',
        'exit 0 HELLO receipt=number',
        'bytes 3 text 3',
        'stream 3',
        'aborted AbortError',
        'background true got it',
        'check 3',
        'fs ENOENT',
        'merged /tmp/g',
        ...(transport === 'service' ? [] : ['imported from-fork']),
      ]);
    } finally {
      for (const [k, v] of [
        ['WASMSAND_SANDBOXD', saved.sandboxd],
        ['WASMSAND_URL', saved.url],
      ]) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
}
