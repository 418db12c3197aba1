'use strict';
// Which transport `Sandbox.create` opens: `transport` ('inprocess', 'rpc', 'service'), else
// `url` (the service), else `$WASMSAND_TRANSPORT`, else in-process.
const { RpcClient } = require('./client');
const { InProcessWire, ChildWire } = require('./wires');
const { invalidParams } = require('./errors');

/** The JSON-RPC transports: the same client over the addon's server or a sandboxd child. */
class RpcTransport {
  constructor(name, wire) {
    this.name = name;
    this.client = new RpcClient(wire);
  }

  call(method, params, { onNotify, signal } = {}) {
    return this.client.request(method, params, { onNotify, signal });
  }

  subscribe(sandboxId, pid, fn) {
    return this.client.subscribe(sandboxId, pid, fn);
  }

  setRequestHandler(fn) {
    this.client.requestHandler = fn;
  }

  close() {
    return this.client.close();
  }
}

const SERVICE_ONLY = ['url', 'apiKey', 'runtime', 'image', 'ttlSec', 'env'];

function openTransport(opts) {
  let transport = opts.transport;
  if (transport === undefined || transport === null) {
    transport = opts.url !== undefined ? 'service' : process.env.WASMSAND_TRANSPORT || 'inprocess';
  }
  if (transport === 'service') {
    if (opts.sandboxd !== undefined) throw invalidParams("sandboxd is only used with transport: 'rpc'");
    const url = opts.url ?? process.env.WASMSAND_URL;
    if (!url) throw invalidParams("transport: 'service' needs url (or $WASMSAND_URL): the URL sandboxd serve prints");
    const { ServiceTransport } = require('./service');
    return new ServiceTransport(url, opts.apiKey ?? process.env.WASMSAND_API_KEY ?? null);
  }
  const given = SERVICE_ONLY.filter((k) => opts[k] !== undefined);
  if (given.length) throw invalidParams(`${given.join(', ')}: only used with the service transport (url)`);
  if (transport === 'inprocess') {
    if (opts.sandboxd !== undefined) throw invalidParams("sandboxd is only used with transport: 'rpc'");
    return new RpcTransport('inprocess', new InProcessWire());
  }
  if (transport === 'rpc') return new RpcTransport('rpc', new ChildWire(opts.sandboxd));
  throw invalidParams(`transport must be 'inprocess', 'rpc' or 'service', not ${String(transport)}`);
}

module.exports = { openTransport, RpcTransport };
