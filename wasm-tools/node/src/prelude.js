// The Node layer: evaluated once per run, handed the host's primitives, returns
// main(kind, code, filename) → exit status. Everything here runs inside the engine.
(function (host) {
  'use strict';
  const G = globalThis;

  // ---- util.inspect, after Node's rules for the common values ----
  const kArray = 1, kObject = 0;
  const identRe = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const defaults = { depth: 2, breakLength: 80, compact: 3, maxArrayLength: 100, maxStringLength: 10000, sorted: false, showHidden: false };

  function quote(s) {
    let q = "'";
    if (s.includes("'")) {
      if (!s.includes('"')) q = '"';
      else if (!s.includes('`') && !s.includes('${')) q = '`';
    }
    let out = '';
    for (const ch of s) {
      const c = ch.codePointAt(0);
      if (ch === q || ch === '\\') out += '\\' + ch;
      else if (ch === '\n') out += '\\n';
      else if (ch === '\t') out += '\\t';
      else if (ch === '\r') out += '\\r';
      else if (ch === '\b') out += '\\b';
      else if (ch === '\f') out += '\\f';
      else if (ch === '\v') out += '\\v';
      else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).toUpperCase().padStart(2, '0');
      else out += ch;
    }
    return q + out + q;
  }

  function fnName(f) {
    let src = '';
    try { src = Function.prototype.toString.call(f); } catch (_) { }
    const pd = Object.getOwnPropertyDescriptor(f, 'prototype');
    // Boa does not keep a class's source text: a class is a constructor whose prototype is
    // read-only and which is not one of the global built-ins.
    const isClass = /^class\b/.test(src) || (pd !== undefined && !pd.writable && !isBuiltin(f));
    if (isClass) {
      let s = '[class ' + (f.name || '(anonymous)');
      const sup = Object.getPrototypeOf(f);
      if (sup && sup !== Function.prototype && sup.name) s += ' extends ' + sup.name;
      return s + ']';
    }
    const tag = f[Symbol.toStringTag];
    let kind = 'Function';
    if (tag === 'AsyncFunction') kind = 'AsyncFunction';
    else if (tag === 'GeneratorFunction') kind = 'GeneratorFunction';
    else if (tag === 'AsyncGeneratorFunction') kind = 'AsyncGeneratorFunction';
    return '[' + kind + (f.name ? ': ' + f.name : ' (anonymous)') + ']';
  }

  function isBuiltin(f) {
    return G[f.name] === f || f === Object.getPrototypeOf(Int8Array);
  }

  function keyText(k) {
    if (typeof k === 'symbol') return '[' + k.toString() + ']';
    return identRe.test(k) ? k : quote(k);
  }

  function ctorName(v) {
    let p = v;
    while (p) {
      const d = Object.getOwnPropertyDescriptor(p, 'constructor');
      if (d && typeof d.value === 'function' && d.value.name) return d.value.name;
      p = Object.getPrototypeOf(p);
    }
    return null;
  }

  function formatPrimitive(v, ctx) {
    switch (typeof v) {
      case 'string': {
        let s = v, more = '';
        if (s.length > ctx.maxStringLength) {
          more = `... ${s.length - ctx.maxStringLength} more character${s.length - ctx.maxStringLength > 1 ? 's' : ''}`;
          s = s.slice(0, ctx.maxStringLength);
        }
        return quote(s) + more;
      }
      case 'number': return Object.is(v, -0) ? '-0' : String(v);
      case 'bigint': return String(v) + 'n';
      case 'symbol': return v.toString();
      case 'undefined': return 'undefined';
      default: return String(v);
    }
  }

  function errorText(e) {
    let stack = '';
    try { stack = e.stack; } catch (_) { }
    const head = (() => { try { return String(Error.prototype.toString.call(e)); } catch (_) { return 'Error'; } })();
    if (typeof stack === 'string' && stack) {
      // Boa's stack is only the frames; Node's starts with the error's own text. Frames of
      // this prelude and of native code are not the user's.
      const frames = stack.split('\n').filter((l) => /^\s+at /.test(l) && !l.includes('node:internal') && !l.includes('(native)'));
      return frames.length ? head + '\n' + frames.join('\n') : head;
    }
    return head;
  }

  function formatValue(v, depth, ctx) {
    if (v === null) return 'null';
    if (typeof v !== 'object' && typeof v !== 'function') return formatPrimitive(v, ctx);
    if (ctx.seen.includes(v)) {
      let i = ctx.circular.get(v);
      if (i === undefined) { i = ctx.circular.size + 1; ctx.circular.set(v, i); }
      return '[Circular *' + i + ']';
    }
    const r = formatRaw(v, depth, ctx);
    const ref = ctx.circular.get(v);
    return ref !== undefined ? '<ref *' + ref + '> ' + r : r;
  }

  function isBoxed(v, C) { try { C.prototype.valueOf.call(v); return true; } catch (_) { return false; } }

  function formatRaw(v, depth, ctx) {
    let keys = Object.keys(v);
    if (ctx.showHidden) keys = Object.getOwnPropertyNames(v);
    const syms = Object.getOwnPropertySymbols(v).filter((s) => ctx.showHidden || Object.getOwnPropertyDescriptor(v, s).enumerable);
    let braces, base = '', type = kObject, entries = [], noEntriesText = null;
    const name = ctorName(v);
    const tag = v[Symbol.toStringTag];
    const prefix = (fallback, size) => {
      let p = name === null ? `[${fallback}: null prototype]` : name === fallback ? fallback : `${name} [${fallback}]`;
      if (size !== undefined) p += `(${size})`;
      if (typeof tag === 'string' && tag && tag !== name && tag !== fallback) p += ` [${tag}]`;
      return p + ' ';
    };
    let formatter = null;
    if (Array.isArray(v)) {
      keys = keys.filter((k) => !(String(k >>> 0) === k && k >>> 0 !== 4294967295));
      if (ctx.showHidden) keys = keys.filter((k) => k !== 'length').concat(['length']);
      const p = name === 'Array' ? '' : prefix('Array', v.length);
      braces = [p + '[', ']'];
      type = kArray;
      if (v.length === 0 && keys.length === 0 && syms.length === 0) return braces[0] + ']';
      formatter = () => formatArray(v, depth, ctx);
      if (ctx.showHidden) keys = ['length'];
    } else if (typeof v === 'function') {
      base = fnName(v);
      keys = keys.filter((k) => !(ctx.showHidden && (k === 'length' || k === 'name' || k === 'prototype' || k === 'caller' || k === 'arguments')));
      if (keys.length === 0 && syms.length === 0) return base;
      braces = ['{', '}'];
    } else if (G.Buffer && v instanceof G.Buffer) {
      const max = 50;
      const hex = [];
      for (let i = 0; i < Math.min(v.length, max); i++) hex.push(v[i].toString(16).padStart(2, '0'));
      let s = '<Buffer' + (hex.length ? ' ' + hex.join(' ') : '');
      if (v.length > max) s += ` ... ${v.length - max} more byte${v.length - max > 1 ? 's' : ''}`;
      return s + '>';
    } else if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      const tname = v[Symbol.toStringTag];
      braces = [prefix(tname, v.length) + '[', ']'];
      type = kArray;
      keys = keys.filter((k) => !(String(k >>> 0) === k));
      if (v.length === 0 && keys.length === 0) return braces[0] + ']';
      formatter = () => {
        const out = [];
        const n = Math.min(v.length, ctx.maxArrayLength);
        for (let i = 0; i < n; i++) out.push(formatPrimitive(v[i], ctx));
        if (v.length > n) out.push(`... ${v.length - n} more item${v.length - n > 1 ? 's' : ''}`);
        return out;
      };
    } else if (v instanceof Map) {
      braces = [prefix('Map', v.size) + '{', '}'];
      if (v.size === 0 && keys.length === 0) return braces[0] + '}';
      formatter = () => {
        const out = [];
        for (const [k, val] of v) out.push(formatValue(k, depth + 1, ctx) + ' => ' + formatValue(val, depth + 1, ctx));
        return out;
      };
    } else if (v instanceof Set) {
      braces = [prefix('Set', v.size) + '{', '}'];
      if (v.size === 0 && keys.length === 0) return braces[0] + '}';
      type = kArray;
      formatter = () => Array.from(v, (x) => formatValue(x, depth + 1, ctx));
    } else if (v instanceof RegExp) {
      base = RegExp.prototype.toString.call(v);
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (v instanceof Date) {
      base = isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (v instanceof Error) {
      base = errorText(v);
      keys = keys.filter((k) => k !== 'stack' && k !== 'message');
      if (depth > 0 && !(typeof v.stack === 'string' && v.stack)) base = '[' + base + ']';
      if (depth > 0 && base.includes('\n')) base = base.split('\n').join('\n' + ' '.repeat(ctx.indent));
      if (keys.length === 0 && syms.length === 0) return base;
      braces = ['{', '}'];
    } else if (v instanceof Promise) {
      const st = host.promiseState(v);
      braces = [prefix('Promise') + '{', '}'];
      formatter = () => st[0] === 0 ? ['<pending>'] : [(st[0] === 2 ? '<rejected> ' : '') + formatValue(st[1], depth + 1, ctx)];
    } else if (v instanceof WeakMap || v instanceof WeakSet) {
      return (v instanceof WeakMap ? 'WeakMap' : 'WeakSet') + ' { <items unknown> }';
    } else if (typeof v === 'object' && (isBoxed(v, Number) || isBoxed(v, String) || isBoxed(v, Boolean))) {
      const prim = v.valueOf();
      const t = typeof prim === 'number' ? 'Number' : typeof prim === 'string' ? 'String' : 'Boolean';
      if (t === 'String') keys = keys.filter((k) => !(String(k >>> 0) === k));
      base = `[${t}: ${formatPrimitive(prim, ctx)}]`;
      if (keys.length === 0) return base;
      braces = ['{', '}'];
    } else if (v === G.Math || tag === 'Math' || tag === 'JSON') {
      braces = ['Object [' + tag + '] {', '}'];
    } else {
      if (name === 'Object') {
        if (typeof tag === 'string' && tag && tag !== 'Object') braces = [`Object [${tag}] {`, '}'];
        else braces = ['{', '}'];
      } else if (name === null) {
        braces = ['[Object: null prototype] {', '}'];
      } else {
        braces = [name + (typeof tag === 'string' && tag && tag !== name ? ` [${tag}]` : '') + ' {', '}'];
      }
      if (keys.length === 0 && syms.length === 0) {
        if (v.toString === undefined) return braces[0] + '}';
        return braces[0] + '}';
      }
    }
    if (depth > ctx.depth) {
      if (type === kArray && Array.isArray(v)) return '[Array]';
      return '[' + (name === null ? 'Object: null prototype' : (Array.isArray(v) ? 'Array' : name || 'Object')) + ']';
    }
    ctx.seen.push(v);
    ctx.currentDepth = depth;
    ctx.indent += 2;
    if (formatter) entries = formatter();
    for (const k of keys) entries.push(formatProp(v, k, depth, ctx, kObject));
    for (const s of syms) entries.push(formatProp(v, s, depth, ctx, kObject));
    ctx.indent -= 2;
    ctx.seen.pop();
    if (ctx.sorted) entries.sort();
    if (base) braces[0] = base + ' ' + braces[0];
    return reduce(ctx, entries, braces, type, depth, v);
  }

  function formatArray(v, depth, ctx) {
    const out = [];
    const n = Math.min(v.length, ctx.maxArrayLength);
    let holes = 0;
    const flush = () => { if (holes) { out.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`); holes = 0; } };
    let i = 0;
    for (; i < v.length && out.length < n; i++) {
      if (!Object.prototype.hasOwnProperty.call(v, i)) { holes++; continue; }
      flush();
      out.push(formatProp(v, String(i), depth, ctx, kArray));
    }
    flush();
    if (i < v.length) out.push(`... ${v.length - i} more item${v.length - i > 1 ? 's' : ''}`);
    return out;
  }

  function formatProp(obj, key, depth, ctx, type) {
    const d = Object.getOwnPropertyDescriptor(obj, key);
    let str;
    if (d && d.value === undefined && (d.get || d.set)) {
      str = d.get && d.set ? '[Getter/Setter]' : d.get ? '[Getter]' : '[Setter]';
    } else {
      str = formatValue(d ? d.value : obj[key], depth + 1, ctx);
    }
    if (type === kArray) return str;
    let k = keyText(key);
    if (d && !d.enumerable) k = '[' + k + ']';
    return k + ': ' + str;
  }

  function groupArray(ctx, output, value) {
    let total = 0, maxLen = 0;
    let outLen = output.length;
    if (ctx.maxArrayLength < output.length || (output.length && /^\.\.\. \d+ more item/.test(output[output.length - 1]))) outLen--;
    const sep = 2;
    const lens = [];
    for (let i = 0; i < outLen; i++) {
      const len = output[i].length;
      lens.push(len);
      total += len + sep;
      if (maxLen < len) maxLen = len;
    }
    const actualMax = maxLen + sep;
    if (actualMax * 3 + ctx.indent < ctx.breakLength && (total / actualMax > 5 || maxLen <= 6)) {
      const bias = Math.sqrt(actualMax - total / output.length);
      const biasedMax = Math.max(actualMax - 3 - bias, 1);
      const columns = Math.min(
        Math.round(Math.sqrt(2.5 * biasedMax * outLen) / biasedMax),
        Math.floor((ctx.breakLength - ctx.indent) / actualMax),
        ctx.compact * 4,
        15);
      if (columns <= 1) return output;
      const maxLine = [];
      for (let i = 0; i < columns; i++) {
        let w = 0;
        for (let j = i; j < outLen; j += columns) if (lens[j] > w) w = lens[j];
        maxLine.push(w + sep);
      }
      let padStart = true;
      if (value !== undefined) {
        for (let i = 0; i < outLen; i++) {
          if (typeof value[i] !== 'number' && typeof value[i] !== 'bigint') { padStart = false; break; }
        }
      }
      const tmp = [];
      for (let i = 0; i < outLen; i += columns) {
        const max = Math.min(i + columns, outLen);
        let line = '';
        let j = i;
        for (; j < max - 1; j++) {
          const cell = output[j] + ', ';
          line += padStart ? cell.padStart(maxLine[j - i]) : cell.padEnd(maxLine[j - i]);
        }
        line += padStart ? output[j].padStart(maxLine[j - i] - sep) : output[j];
        tmp.push(line);
      }
      if (outLen < output.length) tmp.push(output[outLen]);
      return tmp;
    }
    return output;
  }

  function reduce(ctx, output, braces, type, depth, value) {
    const entries = output.length;
    if (type === kArray && entries > 6) output = groupArray(ctx, output, Array.isArray(value) ? value : undefined);
    if (ctx.currentDepth - depth < ctx.compact && entries === output.length) {
      const start = output.length + ctx.indent + braces[0].length + 10;
      let total = output.length + start;
      let fits = total + output.length <= ctx.breakLength;
      if (fits) {
        for (const o of output) { total += o.length; if (total > ctx.breakLength) { fits = false; break; } }
      }
      if (fits) {
        const joined = output.join(', ');
        if (!joined.includes('\n')) return braces[0] + ' ' + joined + ' ' + braces[1];
      }
    }
    const ind = '\n' + ' '.repeat(ctx.indent);
    return braces[0] + ind + '  ' + output.join(',' + ind + '  ') + ind + braces[1];
  }

  function inspect(v, opts) {
    const ctx = Object.assign({}, defaults, opts && typeof opts === 'object' ? opts : {});
    if (ctx.depth === null) ctx.depth = Infinity;
    ctx.seen = []; ctx.circular = new Map(); ctx.indent = 0; ctx.currentDepth = 0;
    return formatValue(v, 0, ctx);
  }
  inspect.custom = Symbol.for('nodejs.util.inspect.custom');
  inspect.defaultOptions = defaults;

  function format(...args) {
    let out = '';
    let i = 0;
    if (typeof args[0] === 'string') {
      const f = args[0];
      i = 1;
      let last = 0;
      for (let p = 0; p < f.length - 1; p++) {
        if (f[p] !== '%') continue;
        const c = f[p + 1];
        let rep;
        if (c === '%') { out += f.slice(last, p) + '%'; last = p + 2; p++; continue; }
        if (i >= args.length || !'sdifjoOc'.includes(c)) continue;
        const a = args[i];
        switch (c) {
          case 's': rep = typeof a === 'string' ? a : typeof a === 'bigint' ? a + 'n' : (typeof a === 'object' && a !== null) ? inspect(a, { depth: 0 }) : formatPrimitive(a, defaults).replace(/^'(.*)'$/s, '$1'); break;
          case 'd': rep = typeof a === 'bigint' ? a + 'n' : typeof a === 'object' && a !== null ? 'NaN' : formatPrimitive(Number(a), defaults); break;
          case 'i': rep = typeof a === 'bigint' ? a + 'n' : String(parseInt(a)); break;
          case 'f': rep = String(parseFloat(a)); break;
          case 'j': try { rep = JSON.stringify(a); } catch (_) { rep = '[Circular]'; } break;
          case 'o': rep = inspect(a, { showHidden: true, depth: 4 }); break;
          case 'O': rep = inspect(a); break;
          case 'c': rep = ''; break;
        }
        i++;
        out += f.slice(last, p) + rep;
        last = p + 2;
        p++;
      }
      out += f.slice(last);
    }
    for (; i < args.length; i++) {
      const a = args[i];
      if (out !== '' || i > 0) out += ' ';
      out += typeof a === 'string' ? a : inspect(a);
    }
    return out;
  }

  // ---- console ----
  let groupIndent = '';
  const counts = new Map(), timers = new Map();
  const emit = (fd, text) => {
    if (groupIndent) text = text.split('\n').map((l) => groupIndent + l).join('\n');
    host.write(fd, text + '\n');
  };
  const console = {
    log: (...a) => emit(1, format(...a)),
    info: (...a) => emit(1, format(...a)),
    debug: (...a) => emit(1, format(...a)),
    error: (...a) => emit(2, format(...a)),
    warn: (...a) => emit(2, format(...a)),
    trace: (...a) => emit(2, 'Trace' + (a.length ? ': ' + format(...a) : '')),
    dir: (v, o) => emit(1, inspect(v, o)),
    assert: (cond, ...a) => { if (!cond) emit(2, 'Assertion failed' + (a.length ? ': ' + format(...a) : '')); },
    count: (l = 'default') => { const n = (counts.get(l) || 0) + 1; counts.set(l, n); emit(1, `${l}: ${n}`); },
    countReset: (l = 'default') => counts.delete(l),
    group: (...a) => { if (a.length) emit(1, format(...a)); groupIndent += '  '; },
    groupEnd: () => { groupIndent = groupIndent.slice(2); },
    time: (l = 'default') => timers.set(l, host.hrtime()),
    timeEnd: (l = 'default') => { const t = timers.get(l); if (t !== undefined) { emit(1, `${l}: ${(host.hrtime() - t).toFixed(3)}ms`); timers.delete(l); } },
    timeLog: (l = 'default', ...a) => { const t = timers.get(l); if (t !== undefined) emit(1, `${l}: ${(host.hrtime() - t).toFixed(3)}ms` + (a.length ? ' ' + format(...a) : '')); },
    table: (data) => emit(1, table(data)),
  };
  console.groupCollapsed = console.group;

  function table(data) {
    if (data === null || typeof data !== 'object') return format(data);
    const rows = Object.keys(data);
    const cols = [];
    let hasValues = false;
    for (const r of rows) {
      const v = data[r];
      if (v !== null && typeof v === 'object') { for (const c of Object.keys(v)) if (!cols.includes(c)) cols.push(c); } else hasValues = true;
    }
    const head = ['(index)', ...cols, ...(hasValues ? ['Values'] : [])];
    const body = rows.map((r) => {
      const v = data[r];
      const cells = [Array.isArray(data) ? r : r];
      for (const c of cols) cells.push(v !== null && typeof v === 'object' && c in v ? inspect(v[c], { depth: 1 }) : '');
      if (hasValues) cells.push(v !== null && typeof v === 'object' ? '' : inspect(v));
      return cells;
    });
    const w = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)) + 2);
    const center = (s, n) => { const l = Math.floor((n - s.length) / 2); return ' '.repeat(l) + s + ' '.repeat(n - s.length - l); };
    const line = (l, m, r) => l + w.map((n) => '─'.repeat(n)).join(m) + r;
    const out = [line('┌', '┬', '┐'), '│' + head.map((h, i) => center(h, w[i])).join('│') + '│', line('├', '┼', '┤')];
    for (const b of body) out.push('│' + b.map((c, i) => center(c, w[i])).join('│') + '│');
    out.push(line('└', '┴', '┘'));
    return out.join('\n');
  }

  // ---- events ----
  class EventEmitter {
    constructor() { this._events = {}; }
    on(n, f) { (this._events[n] = this._events[n] || []).push(f); return this; }
    addListener(n, f) { return this.on(n, f); }
    prependListener(n, f) { (this._events[n] = this._events[n] || []).unshift(f); return this; }
    once(n, f) { const w = (...a) => { this.off(n, w); f.apply(this, a); }; w.listener = f; return this.on(n, w); }
    off(n, f) { const l = this._events[n]; if (l) { const i = l.findIndex((x) => x === f || x.listener === f); if (i >= 0) l.splice(i, 1); } return this; }
    removeListener(n, f) { return this.off(n, f); }
    removeAllListeners(n) { if (n === undefined) this._events = {}; else delete this._events[n]; return this; }
    emit(n, ...a) {
      const l = this._events[n];
      if (!l || l.length === 0) { if (n === 'error') throw a[0] instanceof Error ? a[0] : new Error('Unhandled error. (' + inspect(a[0]) + ')'); return false; }
      for (const f of l.slice()) f.apply(this, a);
      return true;
    }
    listeners(n) { return (this._events[n] || []).map((f) => f.listener || f); }
    listenerCount(n) { return (this._events[n] || []).length; }
    eventNames() { return Object.keys(this._events); }
    setMaxListeners() { return this; }
  }
  EventEmitter.EventEmitter = EventEmitter;
  EventEmitter.once = (em, n) => new Promise((res) => em.once(n, (...a) => res(a)));

  // ---- Buffer ----
  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function b64encode(bytes, url) {
    let s = '';
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      s += B64[(n >> 18) & 63] + B64[(n >> 12) & 63] + (i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=') + (i + 2 < bytes.length ? B64[n & 63] : '=');
    }
    return url ? s.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '') : s;
  }
  function b64decode(s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/').replace(/[^A-Za-z0-9+/]/g, '');
    const out = [];
    let buf = 0, bits = 0;
    for (const ch of s) {
      buf = (buf << 6) | B64.indexOf(ch); bits += 6;
      if (bits >= 8) { bits -= 8; out.push((buf >> bits) & 255); }
    }
    return out;
  }
  class Buffer extends Uint8Array {
    static from(v, enc) {
      if (typeof v === 'string') return Buffer._fromString(v, enc);
      if (v instanceof ArrayBuffer) return new Buffer(v, enc, arguments[2]);
      const b = new Buffer(v.length);
      for (let i = 0; i < v.length; i++) b[i] = v[i];
      return b;
    }
    static _fromString(s, enc = 'utf8') {
      enc = String(enc).toLowerCase();
      let bytes;
      if (enc === 'hex') { bytes = []; for (let i = 0; i + 1 < s.length; i += 2) { const n = parseInt(s.substr(i, 2), 16); if (isNaN(n)) break; bytes.push(n); } }
      else if (enc === 'base64' || enc === 'base64url') bytes = b64decode(s);
      else if (enc === 'latin1' || enc === 'binary' || enc === 'ascii') bytes = Array.from(s, (c) => c.charCodeAt(0) & 255);
      else bytes = host.utf8Encode(s);
      return Buffer.from(bytes);
    }
    static alloc(n, fill) { const b = new Buffer(n); if (fill !== undefined) b.fill(typeof fill === 'string' ? fill.charCodeAt(0) : fill); return b; }
    static allocUnsafe(n) { return new Buffer(n); }
    static isBuffer(b) { return b instanceof Buffer; }
    static byteLength(s, enc) { return typeof s === 'string' ? Buffer._fromString(s, enc).length : s.byteLength; }
    static concat(list, total) {
      if (total === undefined) total = list.reduce((n, b) => n + b.length, 0);
      const out = Buffer.alloc(total);
      let o = 0;
      for (const b of list) { for (let i = 0; i < b.length && o < total; i++) out[o++] = b[i]; }
      return out;
    }
    static isEncoding(e) { return ['utf8', 'utf-8', 'hex', 'base64', 'base64url', 'latin1', 'binary', 'ascii'].includes(String(e).toLowerCase()); }
    toString(enc = 'utf8', start = 0, end = this.length) {
      const b = start === 0 && end === this.length ? this : this.subarray(start, end);
      enc = String(enc).toLowerCase();
      if (enc === 'hex') return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
      if (enc === 'base64') return b64encode(b, false);
      if (enc === 'base64url') return b64encode(b, true);
      if (enc === 'latin1' || enc === 'binary') return Array.from(b, (x) => String.fromCharCode(x)).join('');
      if (enc === 'ascii') return Array.from(b, (x) => String.fromCharCode(x & 127)).join('');
      return host.utf8Decode(b);
    }
    toJSON() { return { type: 'Buffer', data: Array.from(this) }; }
    equals(o) { if (o.length !== this.length) return false; for (let i = 0; i < o.length; i++) if (o[i] !== this[i]) return false; return true; }
    write(s, off = 0) { const b = Buffer.from(s); this.set(b.subarray(0, this.length - off), off); return Math.min(b.length, this.length - off); }
    slice(s, e) { return this.subarray(s, e); }
    subarray(s, e) { const u = Uint8Array.prototype.subarray.call(this, s, e); return new Buffer(u.buffer, u.byteOffset, u.length); }
    readUInt8(o = 0) { return this[o]; }
    copy(t, ts = 0, ss = 0, se = this.length) { let n = 0; for (let i = ss; i < se && ts + n < t.length; i++, n++) t[ts + n] = this[i]; return n; }
  }

  // ---- path (POSIX) ----
  function normalizeArr(parts, abs) {
    const out = [];
    for (const p of parts) {
      if (!p || p === '.') continue;
      if (p === '..') { if (out.length && out[out.length - 1] !== '..') out.pop(); else if (!abs) out.push('..'); } else out.push(p);
    }
    return out;
  }
  const path = {
    sep: '/', delimiter: ':',
    normalize(p) {
      if (p === '') return '.';
      const abs = p.startsWith('/');
      const trail = p.endsWith('/');
      let s = normalizeArr(p.split('/'), abs).join('/');
      if (!s && !abs) s = '.';
      if (s && trail) s += '/';
      return (abs ? '/' : '') + s;
    },
    join(...a) { const j = a.filter((x) => x !== '').join('/'); return j ? path.normalize(j) : '.'; },
    resolve(...a) {
      let r = '';
      for (let i = a.length - 1; i >= 0 && !r.startsWith('/'); i--) if (a[i]) r = a[i] + (r ? '/' + r : '');
      if (!r.startsWith('/')) r = host.cwd() + (r ? '/' + r : '');
      return '/' + normalizeArr(r.split('/'), true).join('/');
    },
    isAbsolute: (p) => p.startsWith('/'),
    dirname(p) {
      if (!p) return '.';
      const s = p.replace(/\/+$/, '');
      if (!s) return '/';
      const i = s.lastIndexOf('/');
      if (i < 0) return '.';
      return s.slice(0, i).replace(/\/+$/, '') || '/';
    },
    basename(p, ext) {
      let b = p.replace(/\/+$/, '');
      b = b.slice(b.lastIndexOf('/') + 1);
      if (ext && b.endsWith(ext) && b !== ext) b = b.slice(0, -ext.length);
      return b;
    },
    extname(p) {
      const b = path.basename(p);
      const i = b.lastIndexOf('.');
      return i <= 0 ? '' : b.slice(i);
    },
    relative(from, to) {
      const f = path.resolve(from).split('/').filter(Boolean), t = path.resolve(to).split('/').filter(Boolean);
      let i = 0;
      while (i < f.length && i < t.length && f[i] === t[i]) i++;
      return [...Array(f.length - i).fill('..'), ...t.slice(i)].join('/');
    },
    parse(p) {
      const root = p.startsWith('/') ? '/' : '';
      const base = path.basename(p), ext = path.extname(p);
      let dir = path.dirname(p);
      if (dir === '.' && !p.includes('/')) dir = '';
      return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
    },
    format(o) { const dir = o.dir || o.root || ''; const base = o.base || (o.name || '') + (o.ext || ''); return dir ? (dir.endsWith('/') ? dir + base : dir + '/' + base) : base; },
    toNamespacedPath: (p) => p,
  };
  path.posix = path;

  // ---- fs (synchronous, over the sandbox's files) ----
  const errnos = { ENOENT: -2, EEXIST: -17, EACCES: -13, EISDIR: -21, ENOTDIR: -20, ENOTEMPTY: -39, EINVAL: -22, ENOSPC: -28, EFBIG: -27, EROFS: -30, EIO: -5 };
  function fsCall(f) {
    try { return f(); } catch (e) {
      if (e instanceof Error && typeof e.message === 'string') {
        const m = /^([A-Z_]+): .*?, (\w+) '([^']*)'(?: -> '([^']*)')?/.exec(e.message) || /^([A-Z_]+):/.exec(e.message);
        if (m) {
          const err = new Error(e.message);
          err.errno = errnos[m[1]];
          err.code = m[1];
          if (m[2]) { err.syscall = m[2]; err.path = m[3]; if (m[4]) err.dest = m[4]; }
          throw err;
        }
      }
      throw e;
    }
  }
  const encOf = (o) => (typeof o === 'string' ? o : o && o.encoding) || null;
  const pathOf = (p) => (p instanceof URL_ ? p.pathname : Buffer.isBuffer(p) ? p.toString() : String(p));
  class Stats {
    constructor(s) { Object.assign(this, { dev: 0, mode: s.mode, nlink: 1, uid: 0, gid: 0, rdev: 0, blksize: 4096, ino: 0, size: s.size, blocks: Math.ceil(s.size / 512), atimeMs: s.atimeMs, mtimeMs: s.mtimeMs, ctimeMs: s.mtimeMs, birthtimeMs: s.birthtimeMs, atime: new Date(s.atimeMs), mtime: new Date(s.mtimeMs), ctime: new Date(s.mtimeMs), birthtime: new Date(s.birthtimeMs) }); Object.defineProperty(this, '_k', { value: s }); }
    isFile() { return this._k.isFile; }
    isDirectory() { return this._k.isDir; }
    isSymbolicLink() { return this._k.isSymlink; }
    isFIFO() { return false; } isSocket() { return false; } isBlockDevice() { return false; } isCharacterDevice() { return false; }
  }
  class Dirent {
    constructor(name, k, dir) { this.name = name; this.parentPath = dir; this.path = dir; Object.defineProperty(this, '_k', { value: k }); }
    isFile() { return this._k === 1; } isDirectory() { return this._k === 2; } isSymbolicLink() { return this._k === 3; }
    isFIFO() { return false; } isSocket() { return false; } isBlockDevice() { return false; } isCharacterDevice() { return false; }
  }
  const fs = {
    readFileSync(p, o) {
      const enc = encOf(o);
      const target = p === 0 || p === '/dev/stdin' ? 0 : pathOf(p);
      if (enc) return fsCall(() => host.readFile(target, false));
      const u = fsCall(() => host.readFile(target, true));
      return new Buffer(u.buffer, u.byteOffset, u.length);
    },
    writeFileSync(p, data, o) {
      if (p === 1 || p === 2 || p === '/dev/stdout' || p === '/dev/stderr') { host.write(p === 2 || p === '/dev/stderr' ? 2 : 1, typeof data === 'string' ? data : data); return; }
      const flag = (o && o.flag) || 'w';
      fsCall(() => host.writeFile(pathOf(p), ArrayBuffer.isView(data) ? data : String(data), flag.startsWith('a'), flag.includes('x')));
    },
    appendFileSync(p, data) { fsCall(() => host.writeFile(pathOf(p), ArrayBuffer.isView(data) ? data : String(data), true, false)); },
    existsSync(p) { try { return host.exists(pathOf(p)); } catch (_) { return false; } },
    statSync(p, o) { try { return new Stats(fsCall(() => host.stat(pathOf(p), true))); } catch (e) { if (o && o.throwIfNoEntry === false && e.code === 'ENOENT') return undefined; throw e; } },
    lstatSync(p, o) { try { return new Stats(fsCall(() => host.stat(pathOf(p), false))); } catch (e) { if (o && o.throwIfNoEntry === false && e.code === 'ENOENT') return undefined; throw e; } },
    readdirSync(p, o) {
      const dir = pathOf(p);
      const list = fsCall(() => host.readdir(dir));
      if (o && o.recursive) {
        const out = [];
        const walk = (rel, entries) => {
          for (const [n, k] of entries) {
            const r = rel ? rel + '/' + n : n;
            out.push(o.withFileTypes ? new Dirent(n, k, rel ? dir + '/' + rel : dir) : r);
            if (k === 2) walk(r, fsCall(() => host.readdir(dir + '/' + r)));
          }
        };
        walk('', list);
        return out;
      }
      if (o && o.withFileTypes) return list.map(([n, k]) => new Dirent(n, k, dir));
      return list.map(([n]) => n);
    },
    mkdirSync(p, o) { const r = fsCall(() => host.mkdir(pathOf(p), !!(o && (o === true || o.recursive)))); return r === null ? undefined : r; },
    rmSync(p, o) { try { fsCall(() => host.rm(pathOf(p), 2, !!(o && o.recursive))); } catch (e) { if (!(o && o.force && e.code === 'ENOENT')) throw e; } },
    rmdirSync(p, o) { fsCall(() => host.rm(pathOf(p), 1, !!(o && o.recursive))); },
    unlinkSync(p) { fsCall(() => host.rm(pathOf(p), 0, false)); },
    renameSync(a, b) { fsCall(() => host.rename(pathOf(a), pathOf(b))); },
    copyFileSync(a, b) { fsCall(() => host.copyFile(pathOf(a), pathOf(b))); },
    cpSync(a, b, o) {
      const s = fs.statSync(a);
      if (s.isDirectory()) {
        if (!(o && o.recursive)) { const e = new Error(`Recursive option is required to copy a directory: ${a}`); e.code = 'ERR_FS_EISDIR'; throw e; }
        fs.mkdirSync(b, { recursive: true });
        for (const n of fs.readdirSync(a)) fs.cpSync(a + '/' + n, b + '/' + n, o);
      } else fs.copyFileSync(a, b);
    },
    realpathSync(p) { return fsCall(() => host.realpath(pathOf(p))); },
    readlinkSync(p) { return fsCall(() => host.readlink(pathOf(p))); },
    accessSync(p) { fsCall(() => host.stat(pathOf(p), true)); },
    chmodSync() { },
    mkdtempSync(prefix) { const p = prefix + Math.random().toString(36).slice(2, 8); fs.mkdirSync(p); return p; },
    constants: { F_OK: 0, R_OK: 4, W_OK: 2, X_OK: 1 },
  };
  fs.realpathSync.native = fs.realpathSync;
  // Callback and promise forms run the synchronous call at once and report on a later tick.
  const promises = {};
  for (const name of Object.keys(fs)) {
    if (!name.endsWith('Sync')) continue;
    const base = name.slice(0, -4);
    const sync = fs[name];
    if (base === 'exists') { fs.exists = (p, cb) => { const r = sync(p); queueMicrotask(() => cb(r)); }; continue; }
    fs[base] = (...a) => {
      const cb = typeof a[a.length - 1] === 'function' ? a.pop() : null;
      let err = null, res;
      try { res = sync(...a); } catch (e) { err = e; }
      if (cb) setImmediate_(() => (err ? cb(err) : cb(null, res)));
    };
    promises[base] = (...a) => new Promise((res, rej) => { try { res(sync(...a)); } catch (e) { rej(e); } });
  }
  fs.promises = promises;

  // ---- timers: one macrotask queue ordered by due time ----
  let timerSeq = 1;
  const timerQ = [];
  class Timeout {
    constructor(id) { this._id = id; }
    ref() { return this; } unref() { return this; } hasRef() { return true; } refresh() { return this; }
    [Symbol.toPrimitive]() { return this._id; }
  }
  function addTimer(fn, ms, args, repeat) {
    if (typeof fn !== 'function') { const e = new TypeError('The "callback" argument must be of type function. Received ' + inspect(fn)); e.code = 'ERR_INVALID_ARG_TYPE'; throw e; }
    ms = Math.max(1, Number(ms) || 0);
    const t = { id: timerSeq++, fn, args, due: host.hrtime() + ms, repeat: repeat ? ms : 0 };
    timerQ.push(t);
    return new Timeout(t.id);
  }
  function clearTimer(h) {
    const id = h && typeof h === 'object' ? h._id : h;
    const i = timerQ.findIndex((t) => t.id === id);
    if (i >= 0) timerQ.splice(i, 1);
  }
  const immediates = [];
  function setImmediate_(fn, ...args) { const t = { id: timerSeq++, fn, args }; immediates.push(t); return new Timeout(t.id); }

  // ---- process ----
  const proc = new EventEmitter();
  let exiting = false;
  const env = host.env;
  Object.assign(proc, {
    argv: host.argv, argv0: 'node', execArgv: [], execPath: '/usr/bin/node', env,
    exitCode: undefined, pid: 42, ppid: 1, platform: 'linux', arch: 'wasm32', title: 'node',
    version: host.version, versions: { node: host.version.slice(1), boa: '0.22.0' },
    release: { name: 'node' },
    cwd: () => host.cwd(),
    chdir: (d) => fsCall(() => host.chdir(String(d))),
    exit(code) {
      if (code !== undefined) proc.exitCode = code;
      if (!exiting) { exiting = true; try { proc.emit('exit', exitCodeNow()); } catch (e) { reportError(e); host.exit(7); } }
      host.exit(exitCodeNow());
    },
    abort() { host.exit(134); },
    nextTick: (fn, ...a) => { ticks.push(() => fn(...a)); },
    hrtime: Object.assign((prev) => {
      const t = host.hrtime(); const s = Math.floor(t / 1000), ns = Math.floor((t % 1000) * 1e6);
      if (prev) { let ds = s - prev[0], dn = ns - prev[1]; if (dn < 0) { ds--; dn += 1e9; } return [ds, dn]; }
      return [s, ns];
    }, { bigint: () => BigInt(Math.floor(host.hrtime() * 1e6)) }),
    uptime: () => host.hrtime() / 1000,
    memoryUsage: Object.assign(() => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }), { rss: () => 0 }),
    cpuUsage: () => ({ user: Math.floor(host.hrtime() * 1000), system: 0 }),
    umask: () => 0o22,
    getuid: () => 0, getgid: () => 0, geteuid: () => 0, getegid: () => 0,
    emitWarning: (w) => host.write(2, `(node) Warning: ${w instanceof Error ? w.message : w}\n`),
    kill() { const e = new Error('kill ENOSYS'); e.code = 'ENOSYS'; throw e; },
  });
  function exitCodeNow() { const c = Number(proc.exitCode); return Number.isInteger(c) ? c : 0; }
  const stream = (fd) => {
    const s = new EventEmitter();
    Object.assign(s, {
      fd, isTTY: false, writable: true, columns: 80,
      write(chunk, enc, cb) { host.write(fd, typeof chunk === 'string' ? chunk : chunk); if (typeof enc === 'function') cb = enc; if (cb) queueMicrotask(cb); return true; },
      end(chunk) { if (chunk !== undefined) s.write(chunk); },
    });
    return s;
  };
  proc.stdout = stream(1);
  proc.stderr = stream(2);
  proc.stdin = new EventEmitter();
  Object.assign(proc.stdin, {
    fd: 0, isTTY: false,
    setEncoding() { return this; }, resume() { return this; }, pause() { return this; },
    // Reading from stdin happens all at once: 'data' then 'end' on the next turns.
    on(n, f) {
      EventEmitter.prototype.on.call(this, n, f);
      if ((n === 'data' || n === 'readable' || n === 'end') && !this._started) {
        this._started = true;
        setImmediate_(() => {
          const text = host.readFile(0, false);
          this._buffer = text;
          if (text.length) this.emit('data', text);
          if (this.listenerCount('readable')) this.emit('readable');
          this.emit('end');
        });
      }
      return this;
    },
    read() { const b = this._buffer; this._buffer = null; return b || null; },
    [Symbol.asyncIterator]() { let done = false; return { next: () => { if (done) return Promise.resolve({ done: true }); done = true; const t = host.readFile(0, false); return Promise.resolve(t.length ? { value: t, done: false } : { done: true }); } }; },
  });

  // ---- small modules ----
  const util = {
    inspect, format,
    formatWithOptions: (o, ...a) => format(...a),
    isDeepStrictEqual: (a, b) => deepEqual(a, b, true),
    promisify: (f) => (...a) => new Promise((res, rej) => f(...a, (e, v) => (e ? rej(e) : res(v)))),
    inherits(c, s) { Object.setPrototypeOf(c.prototype, s.prototype); Object.setPrototypeOf(c, s); },
    deprecate: (f) => f,
    types: { isPromise: (v) => v instanceof Promise, isDate: (v) => v instanceof Date, isRegExp: (v) => v instanceof RegExp, isMap: (v) => v instanceof Map, isSet: (v) => v instanceof Set },
    isArray: Array.isArray,
    TextEncoder: null, TextDecoder: null,
  };
  const os = {
    EOL: '\n', platform: () => 'linux', type: () => 'Linux', arch: () => 'wasm32', release: () => '0',
    hostname: () => env.HOSTNAME || 'sandbox', homedir: () => env.HOME || '/', tmpdir: () => env.TMPDIR || '/tmp',
    cpus: () => [{ model: 'wasm', speed: 0, times: {} }], totalmem: () => 0, freemem: () => 0,
    userInfo: () => ({ username: env.USER || 'user', uid: 0, gid: 0, shell: '/bin/sh', homedir: env.HOME || '/' }),
    uptime: () => 0, loadavg: () => [0, 0, 0], endianness: () => 'LE', networkInterfaces: () => ({}),
  };

  function deepEqual(a, b, strict) {
    if (strict ? Object.is(a, b) : (a == b || (a !== a && b !== b))) return true;
    if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
    if (strict && Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
    if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
    if (a instanceof Map && b instanceof Map) { if (a.size !== b.size) return false; for (const [k, v] of a) if (!b.has(k) || !deepEqual(v, b.get(k), strict)) return false; return true; }
    if (a instanceof Set && b instanceof Set) { if (a.size !== b.size) return false; for (const v of a) if (!b.has(v)) return false; return true; }
    const ka = Object.keys(a), kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    for (const k of ka) if (!Object.prototype.hasOwnProperty.call(b, k) || !deepEqual(a[k], b[k], strict)) return false;
    return true;
  }
  class AssertionError extends Error {
    constructor(o) { super(o.message); this.name = 'AssertionError'; this.code = 'ERR_ASSERTION'; this.actual = o.actual; this.expected = o.expected; this.operator = o.operator; this.generatedMessage = !o.userMessage; }
  }
  const fail = (actual, expected, message, operator, def) => {
    if (message instanceof Error) throw message;
    throw new AssertionError({ message: message || def, actual, expected, operator, userMessage: !!message });
  };
  function assert(v, m) { if (!v) fail(v, true, m, '==', 'The expression evaluated to a falsy value:\n\n  assert(' + inspect(v) + ')\n'); }
  Object.assign(assert, {
    ok: assert, AssertionError,
    equal: (a, b, m) => { if (!(a == b)) fail(a, b, m, '==', `${inspect(a)} == ${inspect(b)}`); },
    notEqual: (a, b, m) => { if (a == b) fail(a, b, m, '!=', `${inspect(a)} != ${inspect(b)}`); },
    strictEqual: (a, b, m) => { if (!Object.is(a, b)) fail(a, b, m, 'strictEqual', `Expected values to be strictly equal:\n\n${inspect(a)} !== ${inspect(b)}\n`); },
    notStrictEqual: (a, b, m) => { if (Object.is(a, b)) fail(a, b, m, 'notStrictEqual', `Expected "actual" to be strictly unequal to: ${inspect(b)}`); },
    deepEqual: (a, b, m) => { if (!deepEqual(a, b, false)) fail(a, b, m, 'deepEqual', `Expected values to be loosely deep-equal:\n\n${inspect(a)}\n\nshould loosely deep-equal\n\n${inspect(b)}`); },
    deepStrictEqual: (a, b, m) => { if (!deepEqual(a, b, true)) fail(a, b, m, 'deepStrictEqual', `Expected values to be strictly deep-equal:\n${inspect(a)}\n\nshould equal\n\n${inspect(b)}`); },
    notDeepStrictEqual: (a, b, m) => { if (deepEqual(a, b, true)) fail(a, b, m, 'notDeepStrictEqual', 'Expected "actual" not to be strictly deep-equal to: ' + inspect(b)); },
    throws: (f, e, m) => { try { f(); } catch (err) { if (typeof e === 'function' && e.prototype !== undefined && !(err instanceof e)) throw err; if (e instanceof RegExp && !e.test(String(err && err.message !== undefined ? err : err))) fail(err, e, m, 'throws', `The input did not match the regular expression ${e}.`); return; } fail(undefined, e, typeof e === 'string' ? e : m, 'throws', 'Missing expected exception.'); },
    doesNotThrow: (f) => { f(); },
    rejects: async (p, e, m) => { try { await (typeof p === 'function' ? p() : p); } catch (_) { return; } fail(undefined, e, m, 'rejects', 'Missing expected rejection.'); },
    fail: (m) => fail(undefined, undefined, m, 'fail', 'Failed'),
    match: (s, re, m) => { if (!re.test(s)) fail(s, re, m, 'match', `The input did not match the regular expression ${re}. Input:\n\n${inspect(s)}\n`); },
  });
  assert.strict = assert;

  // ---- text and misc globals ----
  class TextEncoder { get encoding() { return 'utf-8'; } encode(s = '') { return host.utf8Encode(String(s)); } }
  class TextDecoder { constructor(enc = 'utf-8') { this.encoding = String(enc).toLowerCase(); } decode(b) { return b === undefined ? '' : host.utf8Decode(ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b)); } }
  util.TextEncoder = TextEncoder; util.TextDecoder = TextDecoder;
  class URL_ {
    constructor(u, base) {
      const m = /^([a-zA-Z][a-zA-Z0-9+.-]*:)(?:\/\/([^/?#]*))?([^?#]*)(\?[^#]*)?(#.*)?$/.exec(String(u));
      if (!m) {
        if (base !== undefined) { const b = new URL_(base); return new URL_(b.origin + (String(u).startsWith('/') ? u : b.pathname.replace(/[^/]*$/, '') + u)); }
        const e = new TypeError('Invalid URL'); e.code = 'ERR_INVALID_URL'; e.input = String(u); throw e;
      }
      this.protocol = m[1].toLowerCase();
      const auth = m[2] || '';
      const at = auth.lastIndexOf('@');
      const hp = at >= 0 ? auth.slice(at + 1) : auth;
      const cred = at >= 0 ? auth.slice(0, at).split(':') : ['', ''];
      this.username = cred[0] || ''; this.password = cred[1] || '';
      const hm = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(hp);
      this.hostname = (hm ? hm[1] : hp).toLowerCase(); this.port = hm && hm[2] || '';
      this.pathname = m[3] || (m[2] !== undefined ? '/' : '');
      this.search = m[4] && m[4].length > 1 ? m[4] : ''; this.hash = m[5] && m[5].length > 1 ? m[5] : '';
      this.searchParams = new URLSearchParams_(this.search);
    }
    get host() { return this.hostname + (this.port ? ':' + this.port : ''); }
    get origin() { return this.protocol + '//' + this.host; }
    get href() { const a = this.username ? this.username + (this.password ? ':' + this.password : '') + '@' : ''; const q = this.searchParams.toString(); return this.protocol + (this.hostname || this.protocol === 'file:' ? '//' : '') + a + this.host + this.pathname + (q ? '?' + q : '') + this.hash; }
    toString() { return this.href; }
    toJSON() { return this.href; }
  }
  class URLSearchParams_ {
    constructor(init = '') {
      this._l = [];
      if (typeof init === 'string') {
        for (const part of init.replace(/^\?/, '').split('&')) if (part) { const i = part.indexOf('='); const d = (s) => decodeURIComponent(s.replace(/\+/g, ' ')); this._l.push(i < 0 ? [d(part), ''] : [d(part.slice(0, i)), d(part.slice(i + 1))]); }
      } else if (init && typeof init === 'object') for (const [k, v] of (Symbol.iterator in init ? init : Object.entries(init))) this._l.push([String(k), String(v)]);
    }
    get(k) { const e = this._l.find((x) => x[0] === k); return e ? e[1] : null; }
    getAll(k) { return this._l.filter((x) => x[0] === k).map((x) => x[1]); }
    has(k) { return this._l.some((x) => x[0] === k); }
    set(k, v) { const i = this._l.findIndex((x) => x[0] === k); this._l = this._l.filter((x, j) => x[0] !== k || j === i); if (i >= 0) this._l[this._l.findIndex((x) => x[0] === k)][1] = String(v); else this._l.push([k, String(v)]); }
    append(k, v) { this._l.push([k, String(v)]); }
    delete(k) { this._l = this._l.filter((x) => x[0] !== k); }
    entries() { return this._l[Symbol.iterator](); }
    keys() { return this._l.map((x) => x[0])[Symbol.iterator](); }
    values() { return this._l.map((x) => x[1])[Symbol.iterator](); }
    forEach(f) { this._l.forEach(([k, v]) => f(v, k, this)); }
    [Symbol.iterator]() { return this.entries(); }
    toString() { const e = (s) => encodeURIComponent(s).replace(/%20/g, '+'); return this._l.map(([k, v]) => e(k) + '=' + e(v)).join('&'); }
  }

  function noNetwork(name) {
    const thrower = () => { const e = new Error(`${name}: this sandbox has no network`); e.code = 'ENETUNREACH'; throw e; };
    return new Proxy({}, { get: (_, k) => (k === 'then' ? undefined : thrower) });
  }
  function noProcesses() {
    const thrower = () => { const e = new Error('child_process: this sandbox cannot start processes from JavaScript (run commands from the shell instead)'); e.code = 'ENOSYS'; throw e; };
    return { exec: thrower, execSync: thrower, spawn: thrower, spawnSync: thrower, execFile: thrower, execFileSync: thrower, fork: thrower };
  }

  const builtins = {
    fs, path, util, os, events: EventEmitter, assert, buffer: { Buffer }, process: proc,
    'fs/promises': promises, 'path/posix': path, 'assert/strict': assert,
    url: { URL: URL_, URLSearchParams: URLSearchParams_, fileURLToPath: (u) => decodeURIComponent(new URL_(String(u)).pathname), pathToFileURL: (p) => new URL_('file://' + path.resolve(p)) },
    timers: { setTimeout: (...a) => G.setTimeout(...a), clearTimeout: (h) => clearTimer(h), setInterval: (...a) => G.setInterval(...a), clearInterval: (h) => clearTimer(h), setImmediate: setImmediate_ },
    'timers/promises': { setTimeout: (ms, v) => new Promise((r) => addTimer(r, ms, [v], false)), setImmediate: (v) => new Promise((r) => setImmediate_(r, v)) },
    string_decoder: { StringDecoder: class { constructor() { } write(b) { return typeof b === 'string' ? b : host.utf8Decode(b); } end(b) { return b ? this.write(b) : ''; } } },
    child_process: noProcesses(),
    http: noNetwork('http'), https: noNetwork('https'), net: noNetwork('net'), dns: noNetwork('dns'),
  };
  const moduleCache = Object.create(null);
  function makeRequire(dir) {
    const req = function require(id) {
      if (typeof id !== 'string') throw new TypeError('The "id" argument must be of type string');
      const bare = id.startsWith('node:') ? id.slice(5) : id;
      if (Object.prototype.hasOwnProperty.call(builtins, bare)) return builtins[bare];
      if (id.startsWith('./') || id.startsWith('../') || id.startsWith('/') || id === '.' || id === '..') {
        const file = resolveFile(path.resolve(dir, id));
        if (!file) return notFound(id);
        if (moduleCache[file]) return moduleCache[file].exports;
        const mod = { id: file, filename: file, loaded: false, exports: {}, children: [], paths: [], path: path.dirname(file) };
        moduleCache[file] = mod;
        const text = host.readFile(file, false);
        if (file.endsWith('.json')) {
          try { mod.exports = JSON.parse(text); } catch (e) { e.message = file + ': ' + e.message; throw e; }
        } else {
          const body = text.startsWith('#!') ? '//' + text.slice(2) : text;
          const f = host.compile(body, file);
          f.call(mod.exports, mod.exports, makeRequire(path.dirname(file)), mod, file, path.dirname(file));
        }
        mod.loaded = true;
        return mod.exports;
      }
      return notFound(id);
    };
    function notFound(id) {
      const e = new Error(`Cannot find module '${id}'` + (id.startsWith('.') || id.startsWith('/') ? '' : ' (this sandbox has no npm packages: only built-in modules and local files can be required)'));
      e.code = 'MODULE_NOT_FOUND';
      throw e;
    }
    req.resolve = (id) => { if (builtins[id.replace(/^node:/, '')]) return id; const f = resolveFile(path.resolve(dir, id)); if (!f) notFound(id); return f; };
    req.cache = moduleCache;
    return req;
  }
  function resolveFile(p) {
    const isFile = (f) => { try { return host.stat(f, true).isFile; } catch (_) { return false; } };
    for (const c of [p, p + '.js', p + '.cjs', p + '.json', p + '/index.js', p + '/index.json']) if (isFile(c)) return c;
    try {
      const pkg = JSON.parse(host.readFile(p + '/package.json', false));
      if (pkg.main) return resolveFile(path.resolve(p, pkg.main));
    } catch (_) { }
    return null;
  }

  // ---- globals ----
  const def = (k, v) => Object.defineProperty(G, k, { value: v, writable: true, configurable: true, enumerable: false });
  def('console', console);
  def('process', proc);
  def('Buffer', Buffer);
  def('global', G);
  def('setTimeout', (fn, ms, ...a) => addTimer(fn, ms, a, false));
  def('setInterval', (fn, ms, ...a) => addTimer(fn, ms, a, true));
  def('clearTimeout', clearTimer);
  def('clearInterval', clearTimer);
  def('setImmediate', setImmediate_);
  def('clearImmediate', (h) => { const id = h && h._id; const i = immediates.findIndex((t) => t.id === id); if (i >= 0) immediates.splice(i, 1); });
  if (typeof G.queueMicrotask !== 'function') def('queueMicrotask', (fn) => { Promise.resolve().then(fn); });
  def('TextEncoder', TextEncoder);
  def('TextDecoder', TextDecoder);
  def('URL', URL_);
  def('URLSearchParams', URLSearchParams_);
  def('atob', (s) => String.fromCharCode(...b64decode(String(s))));
  def('btoa', (s) => b64encode(Array.from(String(s), (c) => { const n = c.charCodeAt(0); if (n > 255) { const e = new Error('Invalid character'); e.name = 'InvalidCharacterError'; throw e; } return n; }), false));
  def('structuredClone', (v) => clone(v, new Map()));
  def('performance', { now: () => host.hrtime(), timeOrigin: Date.now() - host.hrtime() });
  def('fetch', () => Promise.reject(Object.assign(new TypeError('fetch failed: this sandbox has no network'), { code: 'ENETUNREACH' })));
  function clone(v, seen) {
    if (typeof v !== 'object' || v === null) {
      if (typeof v === 'function' || typeof v === 'symbol') { const e = new Error(`${typeof v === 'function' ? inspect(v) : String(v)} could not be cloned.`); e.name = 'DataCloneError'; throw e; }
      return v;
    }
    if (seen.has(v)) return seen.get(v);
    let out;
    if (v instanceof Date) out = new Date(v.getTime());
    else if (v instanceof RegExp) out = new RegExp(v.source, v.flags);
    else if (v instanceof Map) { out = new Map(); seen.set(v, out); for (const [k, x] of v) out.set(clone(k, seen), clone(x, seen)); return out; }
    else if (v instanceof Set) { out = new Set(); seen.set(v, out); for (const x of v) out.add(clone(x, seen)); return out; }
    else if (ArrayBuffer.isView(v)) out = v.slice();
    else if (Array.isArray(v)) { out = []; seen.set(v, out); v.forEach((x, i) => { out[i] = clone(x, seen); }); return out; }
    else { out = {}; seen.set(v, out); for (const k of Object.keys(v)) out[k] = clone(v[k], seen); return out; }
    seen.set(v, out);
    return out;
  }

  // ---- running ----
  function reportError(e) {
    let text;
    if (e instanceof Error) {
      text = errorText(e);
      const extra = Object.keys(e).filter((k) => k !== 'stack' && k !== 'message');
      if (extra.length) text += ' ' + inspect(Object.fromEntries(extra.map((k) => [k, e[k]])));
    } else text = 'Uncaught ' + inspect(e);
    host.write(2, text + '\n');
  }
  function failUncaught(e) {
    if (proc.listenerCount('uncaughtException')) { proc.emit('uncaughtException', e, 'uncaughtException'); return false; }
    reportError(e);
    proc.exitCode = 1;
    if (!exiting) { exiting = true; try { proc.emit('exit', 1); } catch (_) { } }
    host.exit(1);
    return true;
  }
  const ticks = [];
  function drainJobs() {
    // Node runs the nextTick queue before the promise jobs.
    do {
      while (ticks.length) { const t = ticks.shift(); try { t(); } catch (e) { failUncaught(e); } }
      try { host.runJobs(); } catch (e) { failUncaught(e); }
    } while (ticks.length);
    const rejected = host.takeUnhandled();
    for (const [p, reason] of rejected) {
      if (proc.listenerCount('unhandledRejection')) { proc.emit('unhandledRejection', reason, p); continue; }
      if (reason instanceof Error) failUncaught(reason);
      else {
        host.write(2, `node:internal/process/promises: [UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "${inspect(reason)}".] {\n  code: 'ERR_UNHANDLED_REJECTION'\n}\n`);
        proc.exitCode = 1; host.exit(1);
      }
    }
  }
  function runTask(t) {
    try { t.fn(...t.args); } catch (e) { failUncaught(e); }
    drainJobs();
  }
  function loop() {
    drainJobs();
    for (;;) {
      if (immediates.length) {
        const batch = immediates.splice(0, immediates.length);
        for (const t of batch) runTask(t);
        continue;
      }
      if (!timerQ.length) break;
      let next = 0;
      for (let i = 1; i < timerQ.length; i++) if (timerQ[i].due < timerQ[next].due) next = i;
      const t = timerQ[next];
      const wait = t.due - host.hrtime();
      if (wait > 0) host.sleep(wait);
      if (t.repeat) t.due = Math.max(t.due + t.repeat, host.hrtime()); else timerQ.splice(next, 1);
      runTask(t);
    }
  }

  return function main(kind, code, filename) {
    const dir = kind === 'file' ? path.dirname(filename) : host.cwd();
    try {
      if (kind === 'file') {
        const mod = { id: '.', filename, loaded: false, exports: {}, children: [], paths: [], path: dir };
        moduleCache[filename] = mod;
        const req = makeRequire(dir);
        req.main = mod;
        const f = host.compile(code, filename);
        f.call(mod.exports, mod.exports, req, mod, filename, dir);
        mod.loaded = true;
      } else {
        const mod = { id: kind === 'print' ? '[eval]' : filename, filename: path.join(dir, filename), exports: {}, loaded: false, children: [], paths: [] };
        def('require', makeRequire(dir));
        def('module', mod);
        def('exports', mod.exports);
        def('__filename', filename);
        def('__dirname', '.');
        const r = host.evalScript(code, filename);
        if (kind === 'print') console.log(r);
      }
    } catch (e) {
      failUncaught(e);
    }
    loop();
    if (!exiting) { exiting = true; try { proc.emit('beforeExit', exitCodeNow()); loop(); proc.emit('exit', exitCodeNow()); } catch (e) { failUncaught(e); } }
    return exitCodeNow();
  };
})
