"""Sockets for the sandbox's Python, carried by the host's network door.

WASI gives a guest no sockets. This module replaces the `socket` module's `socket`,
`create_connection` and `getaddrinfo` with versions whose TCP streams are HTTP/1.1 exchanges
the host makes for the guest (the door `curl` uses, under the sandbox's egress policy): what a
program writes to a stream is read as one request, sent whole, and the response is served back
as the stream's bytes, always with `Connection: close`. The request is sent by the write that
completes it. `ssl.SSLContext.wrap_socket` (this
directory's `ssl`) marks a stream https: the host does the TLS handshake and verifies the
certificate. So `http.client`, `urllib.request`, urllib3, `requests` and pip work unchanged,
while nothing but HTTP can be spoken.

`connect()` asks the host whether the name may be reached (it resolves and pins it), so a
refusal surfaces where programs expect it: `ConnectionRefusedError` carrying the policy's
message. Names are never resolved in the guest: `getaddrinfo` hands the name back as the
address, and the host resolves it under the policy.
"""

import base64
import errno
import io
import json
import socket as _socket

import _host

OFF = "network access is off in this sandbox (it has no network policy)"

_real_create_connection = _socket.create_connection
_real_getaddrinfo = _socket.getaddrinfo
_DEFAULT = object()
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "upgrade",
    "content-length",
}
_frame_id = 0


def _error(kind, message):
    if kind == "denied":
        return ConnectionRefusedError(errno.ECONNREFUSED, message)
    if kind == "resolve":
        return _socket.gaierror(_socket.EAI_NONAME, message)
    if kind == "timeout":
        return TimeoutError(errno.ETIMEDOUT, message)
    if kind == "tls":
        import ssl

        return ssl.SSLCertVerificationError(1, message)
    if kind == "limit":
        return OSError(errno.ENOBUFS, message)
    if kind in ("bad_request", "unsupported"):
        return OSError(errno.EINVAL, message)
    if kind == "protocol":
        # The run has host tools but no network: its channel serves only the tools.
        return ConnectionRefusedError(errno.ECONNREFUSED, OFF)
    return ConnectionError(errno.ECONNRESET, message)


def call(frame):
    """Sends one door frame; its answer, or the exception its refusal maps to."""
    global _frame_id
    _frame_id += 1
    frame = {"v": 1, "id": _frame_id, **frame}
    try:
        raw = _host.call(json.dumps(frame).encode())
    except ConnectionRefusedError:
        raise ConnectionRefusedError(errno.ECONNREFUSED, OFF) from None
    except OSError as e:
        raise OSError(errno.EIO, f"the sandbox's network door failed: {e}") from None
    answer = json.loads(raw)
    if answer.get("ok"):
        return answer
    err = answer.get("error") or {}
    raise _error(err.get("kind"), err.get("message") or "the request failed")


def _parse_request(data):
    """One whole HTTP/1.1 request from the bytes written so far: (method, target, headers,
    body, rest), or None while it is incomplete."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise OSError(errno.EPROTO, "only HTTP/1.x can be sent through the sandbox's network")
    method, target = parts[0], parts[1]
    headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise OSError(errno.EPROTO, f"malformed request header line {line!r}")
        headers.append((name.strip(), value.strip()))
    rest = data[end + 4 :]
    fields = {k.lower(): v for k, v in headers}
    if "chunked" in fields.get("transfer-encoding", "").lower():
        body = bytearray()
        pos = 0
        while True:
            eol = rest.find(b"\r\n", pos)
            if eol < 0:
                return None
            size = int(rest[pos:eol].split(b";")[0], 16)
            if size == 0:
                trailer = rest.find(b"\r\n\r\n", eol)
                if trailer < 0 and rest[eol + 2 : eol + 4] != b"\r\n":
                    return None
                done = eol + 4 if rest[eol + 2 : eol + 4] == b"\r\n" else trailer + 4
                return method, target, headers, bytes(body), rest[done:]
            if len(rest) < eol + 2 + size + 2:
                return None
            body += rest[eol + 2 : eol + 2 + size]
            pos = eol + 2 + size + 2
    length = int(fields.get("content-length", "0") or 0)
    if len(rest) < length:
        return None
    return method, target, headers, rest[:length], rest[length:]


class _Raw(io.RawIOBase):
    def __init__(self, sock, mode):
        self._sock = sock
        self._mode = mode

    def readable(self):
        return "r" in self._mode

    def writable(self):
        return "w" in self._mode

    def readinto(self, b):
        return self._sock.recv_into(b)

    def write(self, b):
        return self._sock.send(b)

    def close(self):
        if not self.closed:
            self._sock._refs -= 1
            if self._sock._closed and self._sock._refs <= 0:
                self._sock._release()
        super().close()


class DoorSocket:
    """A TCP stream whose requests the host carries (see the module's docstring)."""

    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        family = _socket.AF_INET if family == -1 else family
        type = _socket.SOCK_STREAM if type == -1 else type
        if fileno is not None:
            raise OSError(errno.EBADF, "a sandbox has no sockets to adopt")
        if family not in (_socket.AF_INET, _socket.AF_INET6):
            raise OSError(
                errno.EAFNOSUPPORT,
                "only TCP over IP goes through the sandbox's network",
            )
        if type & 0xF != _socket.SOCK_STREAM:
            raise OSError(
                errno.EPROTONOSUPPORT,
                "only TCP streams carrying HTTP go through the sandbox's network (no UDP)",
            )
        self.family = _socket.AddressFamily(family)
        self.type = _socket.SocketKind(_socket.SOCK_STREAM)
        self.proto = 0 if proto == -1 else proto
        self._timeout = _socket.getdefaulttimeout()
        self._host = None
        self._port = None
        self._peer = None
        self._tls = False
        self._out = bytearray()
        self._in = bytearray()
        self._after = None
        self._closed = False
        self._refs = 0

    def __repr__(self):
        state = "closed" if self._closed else f"to {self._host}:{self._port}"
        return f"<DoorSocket {state}{' (TLS)' if self._tls else ''}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # Settings that have no effect on a request carried by the host.
    def settimeout(self, value):
        if value is not None and value < 0:
            raise ValueError("Timeout value out of range")
        self._timeout = value

    def gettimeout(self):
        return self._timeout

    def setblocking(self, flag):
        self._timeout = None if flag else 0.0

    def getblocking(self):
        return self._timeout != 0.0

    def setsockopt(self, *args):
        pass

    def getsockopt(self, level, option, buflen=None):
        return 0 if buflen is None else b"\0" * buflen

    def bind(self, address):
        pass

    def listen(self, backlog=0):
        raise OSError(errno.EOPNOTSUPP, "a sandbox cannot accept connections")

    def accept(self):
        raise OSError(errno.EOPNOTSUPP, "a sandbox cannot accept connections")

    def fileno(self):
        return -1

    def getpeername(self):
        if self._peer is None:
            raise OSError(errno.ENOTCONN, "not connected")
        return self._peer

    def getsockname(self):
        return ("::", 0, 0, 0) if self.family == _socket.AF_INET6 else ("0.0.0.0", 0)

    def connect(self, address):
        if self._closed:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._host is not None:
            raise OSError(errno.EISCONN, "already connected")
        host, port = address[0], int(address[1])
        answer = call({"op": "connect", "host": host})
        self._host, self._port = host, port
        self._peer = (answer["ip"], port)

    def connect_ex(self, address):
        try:
            self.connect(address)
        except OSError as e:
            return e.errno or errno.ECONNREFUSED
        return 0

    def sendall(self, data, flags=0):
        self.send(data)

    def send(self, data, flags=0):
        if self._closed:
            raise OSError(errno.EBADF, "Bad file descriptor")
        if self._host is None:
            raise OSError(errno.ENOTCONN, "not connected")
        data = memoryview(data).cast("B")
        self._out += data
        # A request goes out once it is whole, so its failure (a refusal, a certificate that
        # does not verify, a timeout) is raised by the write, where HTTP clients expect it.
        while self._out:
            parsed = _parse_request(bytes(self._out))
            if parsed is None:
                break
            method, target, headers, body, rest = parsed
            self._out = bytearray(rest)
            self._in += self._exchange(method, target, headers, body)
        return len(data)

    def recv(self, bufsize, flags=0):
        self._fill()
        out = bytes(self._in[:bufsize])
        if not (flags & getattr(_socket, "MSG_PEEK", 2)):
            del self._in[:bufsize]
        return out

    def recv_into(self, buffer, nbytes=0, flags=0):
        view = memoryview(buffer).cast("B")
        n = nbytes or len(view)
        data = self.recv(n, flags)
        view[: len(data)] = data
        return len(data)

    def read(self, n=1024, buffer=None):
        if buffer is not None:
            return self.recv_into(buffer, n)
        return self.recv(n)

    def write(self, data):
        return self.send(data)

    def pending(self):
        return len(self._in)

    def makefile(self, mode="r", buffering=None, *, encoding=None, errors=None, newline=None):
        if not set(mode) <= {"r", "w", "b"}:
            raise ValueError(f"invalid mode {mode!r} (only r, w, b)")
        raw = _Raw(self, ("r" if "r" in mode else "") + ("w" if "w" in mode else ""))
        self._refs += 1
        if buffering is None:
            buffering = -1
        if buffering == 0:
            if "b" not in mode:
                raise ValueError("unbuffered streams must be binary")
            return raw
        size = io.DEFAULT_BUFFER_SIZE if buffering < 0 else buffering
        if "r" in mode and "w" in mode:
            buf = io.BufferedRWPair(raw, raw, size)
        elif "r" in mode:
            buf = io.BufferedReader(raw, size)
        else:
            buf = io.BufferedWriter(raw, size)
        if "b" in mode:
            return buf
        text = io.TextIOWrapper(buf, encoding, errors, newline)
        text.mode = mode
        return text

    def shutdown(self, how):
        pass

    def close(self):
        self._closed = True
        if self._refs <= 0:
            self._release()

    def detach(self):
        self._closed = True
        return -1

    def _release(self):
        self._out.clear()
        self._in.clear()

    def _fill(self):
        if self._in:
            return
        if self._after is not None:
            err, self._after = self._after, None
            raise err
        if self._out:
            if self._timeout == 0.0:
                raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
            raise OSError(
                errno.EPROTO,
                "the request written to this connection is incomplete; the sandbox's network "
                "sends a request once it is whole",
            )
        # Nothing pending: the host closed the stream after its response.

    def _exchange(self, method, target, headers, body):
        scheme = "https" if self._tls else "http"
        if "://" in target:
            url = target
        else:
            host = f"[{self._host}]" if ":" in self._host else self._host
            default = 443 if self._tls else 80
            port = "" if self._port == default else f":{self._port}"
            url = f"{scheme}://{host}{port}{target}"
        frame = {
            "op": "http",
            "method": method,
            "url": url,
            "headers": [[k, v] for k, v in headers if k.lower() not in _HOP_BY_HOP],
        }
        if body or method in ("POST", "PUT", "PATCH"):
            frame["body"] = base64.b64encode(body).decode()
        if self._timeout:
            frame["timeout_ms"] = max(1, int(self._timeout * 1000))
        answer = call(frame)
        data = base64.b64decode(answer.get("body") or "")
        status = answer["status"]
        lines = [f"{answer.get('version') or 'HTTP/1.1'} {status} {answer.get('reason') or ''}"]
        length = None
        for k, v in answer.get("headers") or []:
            lk = k.lower()
            if lk == "content-length":
                length = v
            if lk not in _HOP_BY_HOP:
                lines.append(f"{k}: {v}")
        if answer.get("truncated"):
            # Declared as the server did, so a client counting bytes sees the cut; the next
            # read says why.
            if length is not None:
                lines.append(f"Content-Length: {length}")
            self._after = OSError(
                errno.ENOBUFS,
                f"the run's network download limit cut this response at {len(data)} bytes",
            )
        elif method == "HEAD":
            if length is not None:
                lines.append(f"Content-Length: {length}")
        elif not (100 <= status < 200 or status in (204, 304)):
            lines.append(f"Content-Length: {len(data)}")
        lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data


def create_connection(
    address, timeout=_DEFAULT, source_address=None, *, all_errors=False
):
    sock = DoorSocket(_socket.AF_INET6 if ":" in str(address[0]) else _socket.AF_INET)
    if timeout is not _DEFAULT and timeout is not _socket._GLOBAL_DEFAULT_TIMEOUT:
        sock.settimeout(timeout)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
    if host is None:
        raise _socket.gaierror(_socket.EAI_NONAME, "Name or service not known")
    if isinstance(host, bytes):
        host = host.decode("idna")
    if isinstance(port, str):
        port = {"http": 80, "https": 443}.get(port) or int(port)
    port = int(port or 0)
    if ":" in host:
        fam, addr = _socket.AF_INET6, (host, port, 0, 0)
    else:
        fam, addr = _socket.AF_INET, (host, port)
    if family not in (0, fam) and not (family == _socket.AF_INET6 and fam == _socket.AF_INET):
        raise _socket.gaierror(_socket.EAI_FAMILY, "Address family for hostname not supported")
    return [(_socket.AddressFamily(fam), _socket.SOCK_STREAM, _socket.IPPROTO_TCP, "", addr)]


def install():
    """Puts the door's versions into the `socket` module (idempotent)."""
    _socket.socket = DoorSocket
    _socket.SocketType = DoorSocket
    _socket.create_connection = create_connection
    _socket.getaddrinfo = getaddrinfo


install()
