'use strict';
// Loads the napi-rs addon: `$WASMSAND_NODE_ADDON`, else the one `npm install` built next to
// package.json for this platform (scripts/build.js).
const path = require('node:path');

let cached = null;

let abi = null;

function addonPath() {
  if (process.env.WASMSAND_NODE_ADDON) return process.env.WASMSAND_NODE_ADDON;
  if (abi === null) {
    // glibc or musl, as napi-rs names its Linux builds (a report is costly: asked once).
    abi = process.platform === 'linux' ? (process.report?.getReport?.().header?.glibcVersionRuntime ? '-gnu' : '-musl') : '';
  }
  return path.join(__dirname, '..', `wasmsand.${process.platform}-${process.arch}${abi}.node`);
}

function loadNative() {
  if (cached) return cached;
  const file = addonPath();
  try {
    cached = require(file);
  } catch (e) {
    const err = new Error(
      `wasmsand: cannot load the native addon ${file} (${e.message}); build it with ` +
        '`npm install` in the package directory (it runs cargo), or use the rpc or service transport',
    );
    err.cause = e;
    throw err;
  }
  return cached;
}

module.exports = { loadNative, addonPath };
