"""TLS for the sandbox's Python, done by the host.

The interpreter is built without OpenSSL (`_ssl`), and a guest has no sockets of its own: its
connections are HTTP exchanges the host makes through the sandbox's network door
(`_wasmsand_net`). This module stands in for the standard `ssl` so that code written for it
(`http.client`, `urllib.request`, urllib3, `requests`, pip) works: `SSLContext.wrap_socket`
marks a door stream https, and the host makes the TLS connection, verifying the server's
certificate against the system's roots plus the CAs the operator configured, against the
server's name. What a program sets on a context (verification off, its own CA files, ciphers,
versions) does not change that: the host always verifies. Client certificates, server-side
TLS and `MemoryBIO`/`SSLObject` (asyncio's TLS) are not available.
"""

import base64
import enum
import os
import socket as _socket
from collections import namedtuple
from socket import SOCK_STREAM, AF_INET, AF_INET6  # noqa: F401  (re-exported, as ssl does)

import _wasmsand_net

OPENSSL_VERSION = "OpenSSL 3.0.0 compatible (TLS by the sandbox host: rustls)"
OPENSSL_VERSION_INFO = (3, 0, 0, 0, 0)
OPENSSL_VERSION_NUMBER = 0x30000000
_OPENSSL_API_VERSION = OPENSSL_VERSION_INFO
_DEFAULT_CIPHERS = "@SECLEVEL=2:ECDH+AESGCM:ECDH+CHACHA20:ECDHE+AES:!aNULL:!eNULL"

HAS_SNI = True
HAS_ALPN = True
HAS_ECDH = True
HAS_NPN = False
HAS_PSK = False
HAS_PHA = True
HAS_NEVER_CHECK_COMMON_NAME = True
HAS_SSLv2 = HAS_SSLv3 = HAS_TLSv1 = HAS_TLSv1_1 = False
HAS_TLSv1_2 = HAS_TLSv1_3 = True
CHANNEL_BINDING_TYPES = []

socket_error = OSError
create_connection = _socket.create_connection


class VerifyMode(enum.IntEnum):
    CERT_NONE = 0
    CERT_OPTIONAL = 1
    CERT_REQUIRED = 2


class VerifyFlags(enum.IntFlag):
    VERIFY_DEFAULT = 0
    VERIFY_CRL_CHECK_LEAF = 0x4
    VERIFY_CRL_CHECK_CHAIN = 0xC
    VERIFY_X509_STRICT = 0x20
    VERIFY_ALLOW_PROXY_CERTS = 0x40
    VERIFY_X509_TRUSTED_FIRST = 0x8000
    VERIFY_X509_PARTIAL_CHAIN = 0x80000


class Options(enum.IntFlag):
    OP_ALL = 0x80000850
    OP_NO_SSLv2 = 0
    OP_LEGACY_SERVER_CONNECT = 0x4
    OP_IGNORE_UNEXPECTED_EOF = 0x80
    OP_NO_TICKET = 0x4000
    OP_NO_COMPRESSION = 0x20000
    OP_NO_RENEGOTIATION = 0x40000000
    OP_ENABLE_MIDDLEBOX_COMPAT = 0x100000
    OP_CIPHER_SERVER_PREFERENCE = 0x400000
    OP_NO_SSLv3 = 0x2000000
    OP_NO_TLSv1 = 0x4000000
    OP_NO_TLSv1_2 = 0x8000000
    OP_NO_TLSv1_1 = 0x10000000
    OP_NO_TLSv1_3 = 0x20000000
    OP_SINGLE_DH_USE = 0
    OP_SINGLE_ECDH_USE = 0


class _SSLMethod(enum.IntEnum):
    PROTOCOL_TLS = 2
    PROTOCOL_TLS_CLIENT = 16
    PROTOCOL_TLS_SERVER = 17


class TLSVersion(enum.IntEnum):
    MINIMUM_SUPPORTED = -2
    MAXIMUM_SUPPORTED = -1
    SSLv3 = 0x300
    TLSv1 = 0x301
    TLSv1_1 = 0x302
    TLSv1_2 = 0x303
    TLSv1_3 = 0x304


class SSLErrorNumber(enum.IntEnum):
    SSL_ERROR_SSL = 1
    SSL_ERROR_WANT_READ = 2
    SSL_ERROR_WANT_WRITE = 3
    SSL_ERROR_WANT_X509_LOOKUP = 4
    SSL_ERROR_SYSCALL = 5
    SSL_ERROR_ZERO_RETURN = 6
    SSL_ERROR_WANT_CONNECT = 7
    SSL_ERROR_EOF = 8
    SSL_ERROR_INVALID_ERROR_CODE = 10


for _enum in (VerifyMode, VerifyFlags, Options, _SSLMethod, TLSVersion, SSLErrorNumber):
    globals().update(_enum.__members__)
PROTOCOL_SSLv23 = PROTOCOL_TLS  # noqa: F821  (set just above)
del _enum


class SSLError(OSError):
    library = "SSL"
    reason = None

    def __str__(self):
        return self.args[1] if len(self.args) > 1 else super().__str__()


class SSLZeroReturnError(SSLError):
    pass


class SSLWantReadError(SSLError):
    pass


class SSLWantWriteError(SSLError):
    pass


class SSLSyscallError(SSLError):
    pass


class SSLEOFError(SSLError):
    pass


class SSLCertVerificationError(SSLError, ValueError):
    reason = "CERTIFICATE_VERIFY_FAILED"

    def __init__(self, *args):
        super().__init__(*args)
        self.verify_code = 1
        self.verify_message = args[1] if len(args) > 1 else ""


CertificateError = SSLCertVerificationError


class _ASN1Object(namedtuple("_ASN1Object", "nid shortname longname oid")):
    pass


class Purpose(_ASN1Object, enum.Enum):
    SERVER_AUTH = (129, "serverAuth", "TLS Web Server Authentication", "1.3.6.1.5.5.7.3.1")
    CLIENT_AUTH = (130, "clientAuth", "TLS Web Client Authentication", "1.3.6.1.5.5.7.3.2")


DefaultVerifyPaths = namedtuple(
    "DefaultVerifyPaths",
    "cafile capath openssl_cafile_env openssl_cafile openssl_capath_env openssl_capath",
)


def get_default_verify_paths():
    return DefaultVerifyPaths(
        None, None, "SSL_CERT_FILE", "/etc/ssl/cert.pem", "SSL_CERT_DIR", "/etc/ssl/certs"
    )


def RAND_status():
    return True


def RAND_bytes(n):
    return os.urandom(n)


def RAND_add(string, entropy):
    pass


PEM_HEADER = "-----BEGIN CERTIFICATE-----"
PEM_FOOTER = "-----END CERTIFICATE-----"


def DER_cert_to_PEM_cert(der_cert_bytes):
    f = base64.standard_b64encode(der_cert_bytes).decode("ascii")
    lines = [f[i : i + 64] for i in range(0, len(f), 64)]
    return PEM_HEADER + "\n" + "\n".join(lines) + "\n" + PEM_FOOTER + "\n"


def PEM_cert_to_DER_cert(pem_cert_string):
    s = pem_cert_string.strip()
    if not s.startswith(PEM_HEADER) or not s.endswith(PEM_FOOTER):
        raise ValueError("Invalid PEM encoding; must be surrounded by certificate markers")
    return base64.decodebytes(s[len(PEM_HEADER) : -len(PEM_FOOTER)].encode("ASCII"))


def _unsupported(what):
    return SSLError(1, f"{what} is not available in the sandbox: TLS is done by the host")


class SSLSocket(_wasmsand_net.DoorSocket):
    """A door stream whose requests the host sends over TLS to `server_hostname`."""

    def __init__(self, *args, **kwargs):
        raise TypeError(
            f"{self.__class__.__name__} does not have a public constructor. "
            "Instances are returned by SSLContext.wrap_socket()."
        )

    @classmethod
    def _create(cls, sock, context, server_hostname):
        if not isinstance(sock, _wasmsand_net.DoorSocket):
            raise _unsupported("TLS over a socket the sandbox's network did not make")
        self = object.__new__(cls)
        self.__dict__.update(sock.__dict__)
        self._tls = True
        self.context = context
        self.server_hostname = server_hostname or sock._host
        self.server_side = False
        self.session = None
        self.session_reused = False
        return self

    def do_handshake(self, block=False):
        pass

    def version(self):
        return None

    def cipher(self):
        return None

    def shared_ciphers(self):
        return None

    def compression(self):
        return None

    def selected_alpn_protocol(self):
        return "http/1.1" if "http/1.1" in self.context._alpn else None

    def selected_npn_protocol(self):
        return None

    def getpeercert(self, binary_form=False):
        return None if binary_form else {}

    def get_verified_chain(self):
        return []

    def get_unverified_chain(self):
        return []

    def get_channel_binding(self, cb_type="tls-unique"):
        return None

    def verify_client_post_handshake(self):
        raise _unsupported("post-handshake authentication")

    def unwrap(self):
        raise _unsupported("unwrapping TLS")


class SSLObject:
    def __init__(self, *args, **kwargs):
        raise _unsupported("SSLObject (TLS over memory buffers, asyncio's TLS)")


class MemoryBIO:
    def __init__(self, *args, **kwargs):
        raise _unsupported("MemoryBIO (TLS over memory buffers, asyncio's TLS)")


class SSLSession:
    pass


class SSLContext:
    """Settings are kept for programs that read them back; the host's TLS ignores them."""

    sslsocket_class = SSLSocket
    sslobject_class = SSLObject

    def __init__(self, protocol=None, *args, **kwargs):
        if protocol is None:
            protocol = PROTOCOL_TLS  # noqa: F821
        self.protocol = _SSLMethod(protocol)
        client = self.protocol != _SSLMethod.PROTOCOL_TLS_SERVER
        strict = self.protocol == _SSLMethod.PROTOCOL_TLS_CLIENT
        self.verify_mode = CERT_REQUIRED if strict else CERT_NONE  # noqa: F821
        self.check_hostname = strict
        self.options = Options.OP_ALL | Options.OP_NO_SSLv3 | Options.OP_NO_COMPRESSION
        self.verify_flags = VerifyFlags.VERIFY_X509_TRUSTED_FIRST
        self.minimum_version = TLSVersion.MINIMUM_SUPPORTED
        self.maximum_version = TLSVersion.MAXIMUM_SUPPORTED
        self.post_handshake_auth = False
        self.hostname_checks_common_name = False
        self.keylog_filename = None
        self.security_level = 2
        self.sni_callback = None
        self.num_tickets = 2
        self._alpn = []
        self._client = client

    def __setattr__(self, name, value):
        if name == "verify_mode":
            value = VerifyMode(value)
        super().__setattr__(name, value)

    def load_default_certs(self, purpose=Purpose.SERVER_AUTH):
        pass

    def set_default_verify_paths(self):
        pass

    def load_verify_locations(self, cafile=None, capath=None, cadata=None):
        if cafile is None and capath is None and cadata is None:
            raise TypeError("cafile, capath and cadata cannot be all omitted")
        for path in (cafile, capath):
            if path is not None and not os.path.exists(path):
                raise FileNotFoundError(2, "No such file or directory", path)

    def load_cert_chain(self, certfile, keyfile=None, password=None):
        raise _unsupported("a client certificate")

    def set_ciphers(self, ciphers):
        pass

    def get_ciphers(self):
        return []

    def set_alpn_protocols(self, protocols):
        self._alpn = list(protocols)

    def set_npn_protocols(self, protocols):
        pass

    def set_servername_callback(self, callback):
        self.sni_callback = callback

    def set_ecdh_curve(self, name):
        pass

    def cert_store_stats(self):
        return {"x509": 0, "crl": 0, "x509_ca": 0}

    def get_ca_certs(self, binary_form=False):
        return []

    def session_stats(self):
        return {}

    def wrap_socket(
        self,
        sock,
        server_side=False,
        do_handshake_on_connect=True,
        suppress_ragged_eofs=True,
        server_hostname=None,
        session=None,
    ):
        if server_side or not self._client:
            raise _unsupported("server-side TLS")
        return self.sslsocket_class._create(sock, self, server_hostname)

    def wrap_bio(self, *args, **kwargs):
        raise _unsupported("TLS over memory buffers (wrap_bio)")


def create_default_context(purpose=Purpose.SERVER_AUTH, *, cafile=None, capath=None, cadata=None):
    if purpose == Purpose.SERVER_AUTH:
        context = SSLContext(PROTOCOL_TLS_CLIENT)  # noqa: F821
    else:
        context = SSLContext(PROTOCOL_TLS_SERVER)  # noqa: F821
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


def _create_unverified_context(
    protocol=None,
    *,
    cert_reqs=CERT_NONE,  # noqa: F821
    check_hostname=False,
    purpose=Purpose.SERVER_AUTH,
    certfile=None,
    keyfile=None,
    cafile=None,
    capath=None,
    cadata=None,
):
    context = SSLContext(PROTOCOL_TLS_CLIENT if protocol is None else protocol)  # noqa: F821
    context.check_hostname = check_hostname
    context.verify_mode = cert_reqs
    if certfile or keyfile:
        context.load_cert_chain(certfile, keyfile)
    if cafile or capath or cadata:
        context.load_verify_locations(cafile, capath, cadata)
    return context


_create_default_https_context = create_default_context
_create_stdlib_context = _create_unverified_context


def get_server_certificate(addr, ssl_version=None, ca_certs=None, timeout=None):
    raise _unsupported("reading a server's certificate")
