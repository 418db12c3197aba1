'use strict';
// The two wires the JSON-RPC client runs over: the addon's server in this process, and a
// `sandboxd` child on its stdin/stdout (one JSON value per line, docs/protocol.md).
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const { loadNative, addonPath } = require('./native');

class InProcessWire {
  constructor() {
    const { NativeServer } = loadNative();
    this.onMessage = null;
    this.onClose = null;
    let live = this;
    // The addon calls this on the JavaScript thread, once per message, in the server's order.
    this.native = new NativeServer((text) => {
      if (live && live.onMessage) live.onMessage(JSON.parse(text));
    });
    // Dropped on close, so that the addon's hold on this callback keeps nothing else alive.
    this.detach = () => {
      live = null;
    };
  }

  send(obj) {
    this.native.submit(JSON.stringify(obj));
  }

  async close() {
    this.detach();
    this.native = null;
  }
}

/** The command that starts a server: `explicit`, else `$WASMSAND_SANDBOXD`, else the server
 * this package carries (`node bin/sandboxd.js`, over the addon), else `sandboxd` on PATH. */
function findSandboxd(explicit) {
  if (explicit !== undefined && explicit !== null) {
    return Array.isArray(explicit) ? explicit.map(String) : [String(explicit)];
  }
  if (process.env.WASMSAND_SANDBOXD) return [process.env.WASMSAND_SANDBOXD];
  if (fs.existsSync(addonPath())) {
    return [process.execPath, path.join(__dirname, '..', 'bin', 'sandboxd.js')];
  }
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const candidate = path.join(dir || '.', 'sandboxd');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return [candidate];
    } catch {
      // not here
    }
  }
  throw new Error('no sandboxd: pass sandboxd: PATH, set $WASMSAND_SANDBOXD, or build the addon');
}

class ChildWire {
  constructor(sandboxd) {
    const [cmd, ...args] = findSandboxd(sandboxd);
    this.onMessage = null;
    this.onClose = null;
    this.child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => resolve({ code, signal }));
      this.child.once('error', (e) => resolve({ code: null, signal: null, error: e }));
    });
    this.exited.then(({ code, signal, error }) => {
      const why = error ? `sandboxd could not start: ${error.message}` : `sandboxd exited (${signal || `status ${code}`})`;
      if (this.onClose) this.onClose(why);
    });
    // Unreferenced: the client holds the event loop open while it awaits an answer, and an
    // idle child must not keep the program running.
    this.child.unref();
    this.child.stdout.unref?.();
    this.child.stdin.unref?.();
    this.child.stdin.on('error', () => {}); // a dead child shows as its exit
    const lines = readline.createInterface({ input: this.child.stdout, crlfDelay: Infinity });
    lines.on('line', (line) => {
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        return;
      }
      if (this.onMessage) this.onMessage(msg);
    });
  }

  send(obj) {
    this.child.stdin.write(`${JSON.stringify(obj)}\n`);
  }

  async close() {
    // End of input ends sandboxd once the requests in flight are answered.
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    try {
      await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

module.exports = { InProcessWire, ChildWire, findSandboxd };
