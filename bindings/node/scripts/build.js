#!/usr/bin/env node
'use strict';
// Builds the addon from source with cargo (`npm install` in this directory runs it) and puts
// it next to package.json as `wasmsand.<platform>-<arch>-<abi>.node`, where lib/native.js
// loads it. The crate is a member of the repository's Cargo workspace, so the build shares
// the workspace's target directory and profile (dev, or `$WASMSAND_NODE_PROFILE`).
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { addonPath } = require('../lib/native');

const here = path.join(__dirname, '..');
const workspace = path.join(here, '..', '..');
const dest = addonPath();

if (process.env.WASMSAND_NODE_SKIP_BUILD) {
  if (!fs.existsSync(dest)) {
    console.error(`wasmsand: WASMSAND_NODE_SKIP_BUILD is set but ${dest} is missing`);
    process.exit(1);
  }
  process.exit(0);
}
if (!fs.existsSync(path.join(workspace, 'Cargo.toml'))) {
  // An installed copy without the workspace: it must carry its prebuilt addon.
  if (fs.existsSync(dest)) process.exit(0);
  console.error(`wasmsand: no prebuilt addon (${path.basename(dest)}) for this platform and no Rust workspace to build it in`);
  process.exit(1);
}

const profile = process.env.WASMSAND_NODE_PROFILE || 'dev';
const meta = JSON.parse(
  execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: workspace, maxBuffer: 64 << 20 }).toString(),
);
execFileSync('cargo', ['build', '-p', 'wasmsand-node', '--profile', profile], { cwd: workspace, stdio: 'inherit' });
const outDir = path.join(meta.target_directory, profile === 'dev' ? 'debug' : profile);
const ext = process.platform === 'darwin' ? 'dylib' : process.platform === 'win32' ? 'dll' : 'so';
const built = path.join(outDir, `${process.platform === 'win32' ? '' : 'lib'}wasmsand_node.${ext}`);
// Copied to a temporary name and renamed, so a running process never sees half a file.
const tmp = `${dest}.tmp-${process.pid}`;
fs.copyFileSync(built, tmp);
// The workspace's crates keep line tables for readable backtraces, which more than doubles
// the addon (232 MB to 108 MB); what ships next to package.json leaves them out. Without
// binutils' strip the addon works the same, only larger.
try {
  execFileSync('strip', ['--strip-unneeded', tmp], { stdio: 'ignore' });
} catch (e) {
  if (e.code !== 'ENOENT') throw e;
  console.error('wasmsand: strip not found; the addon keeps its debug sections');
}
fs.renameSync(tmp, dest);
console.log(`wasmsand: built ${path.relative(here, dest)}`);
