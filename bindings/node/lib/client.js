'use strict';
// One JSON-RPC client over a "wire": the in-process server of the addon, or a `sandboxd`
// child's stdio. Both carry the same messages (sandboxd's framing aside), so everything
// above this file is written once.
const { errorFromWire, destroyedError, SandboxError } = require('./errors');

class RpcClient {
  /**
   * @param wire `{ send(obj), close(): Promise<void>, onMessage, onClose }`: the client sets
   *   `onMessage(obj)` and `onClose(reason)` and the wire calls them.
   */
  constructor(wire) {
    this.wire = wire;
    this.nextId = 1;
    this.pending = new Map();
    // (sandboxId ?? '') + '\0' + pid -> Set of listeners(method, params)
    this.subs = new Map();
    this.requestHandler = null;
    this.closed = false;
    this.dead = null;
    this.keepalive = null;
    wire.onMessage = (msg) => this.receive(msg);
    wire.onClose = (reason) => this.fail(reason);
  }

  /**
   * Sends a request; resolves with its result, rejects with the mapped error. A `run` given a
   * `signal` is cancelled by the server (`run.cancel`) when the signal aborts: the run still
   * answers (`CANCELLED`), so the caller decides what the abort means.
   */
  request(method, params = {}, { onNotify = null, signal = null } = {}) {
    if (this.closed) return Promise.reject(destroyedError('sandbox has been killed'));
    if (this.dead) return Promise.reject(new SandboxError(this.dead, null, { kind: 'transport_closed' }));
    const id = this.nextId++;
    let onAbort = null;
    if (signal && method === 'run') {
      onAbort = () => {
        // An answer already on its way makes this a no-op (`cancelled: false`).
        this.request('run.cancel', { requestId: id }).catch(() => {});
      };
      signal.addEventListener('abort', onAbort, { once: true });
    }
    const settled = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onNotify });
      this.hold();
      try {
        this.wire.send({ jsonrpc: '2.0', id, method, params });
      } catch (e) {
        this.pending.delete(id);
        this.release();
        reject(e);
      }
    });
    if (!onAbort) return settled;
    const off = () => signal.removeEventListener('abort', onAbort);
    return settled.then(
      (v) => {
        off();
        return v;
      },
      (e) => {
        off();
        throw e;
      },
    );
  }

  // A timer holds Node's event loop open while an answer is awaited: the addon's callback
  // into JavaScript (and the child's pipes) are unreferenced, so that an idle sandbox never
  // keeps a program from exiting, yet an awaited command is never abandoned.
  hold() {
    if (this.keepalive === null) this.keepalive = setInterval(() => {}, 1 << 30);
  }

  release() {
    if (this.pending.size === 0 && this.keepalive !== null) {
      clearInterval(this.keepalive);
      this.keepalive = null;
    }
  }

  receive(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (typeof msg.method === 'string') {
      if (msg.id === undefined || msg.id === null) this.notification(msg.method, msg.params || {});
      else this.answerServer(msg);
      return;
    }
    const slot = this.pending.get(msg.id);
    if (!slot) return;
    this.pending.delete(msg.id);
    this.release();
    if (msg.error) slot.reject(errorFromWire(msg.error));
    else slot.resolve(msg.result);
  }

  notification(method, params) {
    if (method === 'output') {
      const slot = this.pending.get(params.requestId);
      if (slot && slot.onNotify) {
        try {
          slot.onNotify(params);
        } catch (e) {
          // A failing callback must not lose the answer; it surfaces as Node reports errors.
          queueMicrotask(() => {
            throw e;
          });
        }
      }
      return;
    }
    if (method.startsWith('process.') && typeof params.pid === 'number') {
      const key = subKey(typeof params.sandboxId === 'string' ? params.sandboxId : null, params.pid);
      for (const fn of [...(this.subs.get(key) || [])]) fn(method, params);
    }
  }

  /** Calls `fn(method, params)` for each notification of that process; returns the unsubscriber. */
  subscribe(sandboxId, pid, fn) {
    const key = subKey(sandboxId, pid);
    if (!this.subs.has(key)) this.subs.set(key, new Set());
    this.subs.get(key).add(fn);
    return () => {
      const set = this.subs.get(key);
      if (set) {
        set.delete(fn);
        if (set.size === 0) this.subs.delete(key);
      }
    };
  }

  // A request from the server (`tool.call`): answered asynchronously, so the server's other
  // answers keep arriving meanwhile.
  async answerServer(msg) {
    let reply;
    try {
      if (!this.requestHandler) throw new Error(`no handler for ${msg.method}`);
      const result = await this.requestHandler(msg.method, msg.params || {});
      reply = { jsonrpc: '2.0', id: msg.id, result: result === undefined ? null : result };
    } catch (e) {
      reply = { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: String(e && e.message ? e.message : e) } };
    }
    if (this.closed || this.dead) return;
    try {
      this.wire.send(reply);
    } catch {
      // the server is gone; nobody waits for this answer any more
    }
  }

  fail(reason) {
    if (this.dead) return;
    this.dead = reason || 'the server exited';
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.release();
    for (const slot of pending) {
      slot.reject(this.closed ? destroyedError('sandbox has been killed') : new SandboxError(this.dead, null, { kind: 'transport_closed' }));
    }
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.wire.close();
    } finally {
      this.fail('closed');
    }
  }
}

function subKey(sandboxId, pid) {
  return `${sandboxId ?? ''}\0${pid}`;
}

module.exports = { RpcClient };
