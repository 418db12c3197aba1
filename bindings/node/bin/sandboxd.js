#!/usr/bin/env node
'use strict';
// The `sandboxd` server this package carries (the addon links it): the RPC transport's child
// when no binary is given. It owns this process's stdin and stdout until it ends.
const { loadNative } = require('../lib/native');

// Node's own SIGINT/SIGTERM handler restores the terminal and raises the signal again,
// counting on its one-shot registration to make the second one fatal. The server's signal
// handler (tokio's) chains to the handler it found, so the raise came back to it for ever and
// `serve` spun instead of shutting down. A JavaScript listener puts libuv's handler in Node's
// place, which only records the signal; the server then shuts down cleanly and returns.
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => {});

const code = loadNative().sandboxdMain(['sandboxd', ...process.argv.slice(2)]);
// The signal that ended the server is still queued for the listeners above: exit now.
process.exit(code);
