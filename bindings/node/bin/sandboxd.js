#!/usr/bin/env node
'use strict';
// The `sandboxd` server this package carries (the addon links it): the RPC transport's child
// when no binary is given. It owns this process's stdin and stdout until it ends.
const { loadNative } = require('../lib/native');

process.exitCode = loadNative().sandboxdMain(['sandboxd', ...process.argv.slice(2)]);
