"""SASL on a Kafka listener: the PLAIN and SCRAM-SHA-256/512 server mechanisms, and SCRAM
credentials as Kafka keeps them in ZooKeeper.

SCRAM (RFC 5802, RFC 7677) is the `scramp` library's server. A user's credential is the config
value Kafka writes under `/config/users/<user>` for its mechanism:

    "SCRAM-SHA-512": "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=4096"

PLAIN checks the password against `user_<name>="<password>"` entries of the listener's PLAIN JAAS
config (`listener.name.sasl_plaintext.plain.sasl.jaas.config`), as Kafka's PlainLoginModule does;
users kept only as SCRAM credentials cannot authenticate with PLAIN.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
DEFAULT_SCRAM_ITERATIONS = 4096
MIN_SCRAM_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
ANONYMOUS = "ANONYMOUS"
USER_PRINCIPAL_TYPE = "User"
_JAAS_USER = re.compile(r'\buser_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


class SaslAuthenticationFailed(Exception):
    """The client's SASL exchange failed: wrong credentials or a malformed message."""


def principal_of(user: str) -> str:
    """Kafka's principal string of an authenticated (or anonymous) user: `User:<name>`."""
    return f"{USER_PRINCIPAL_TYPE}:{user}"


ANONYMOUS_PRINCIPAL = principal_of(ANONYMOUS)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def encode(self) -> str:
        """Kafka's form: `salt=...,stored_key=...,server_key=...,iterations=N` (base64 values)."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def decode(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                       base64.b64decode(fields["server_key"]), int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def make_scram_credential(mechanism: str, password: str,
                          iterations: int = DEFAULT_SCRAM_ITERATIONS) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; known: {', '.join(SCRAM_MECHANISMS)}")
    if iterations < MIN_SCRAM_ITERATIONS:
        raise ValueError(f"iterations must be at least {MIN_SCRAM_ITERATIONS} for {mechanism}")
    salt, stored_key, server_key, count = ScramMechanism(mechanism).make_auth_info(password, iterations)
    return ScramCredential(salt, stored_key, server_key, count)


_JAAS_LOGIN = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_login(jaas_config: str | None) -> tuple[str, str] | None:
    """The `username` and `password` a JAAS config gives this node as a client, if both."""
    found = dict(_JAAS_LOGIN.findall(jaas_config or ""))
    if "username" in found and "password" in found:
        return found["username"], found["password"]
    return None


SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_JAAS_ENTRY = re.compile(r'^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*?);\s*$', re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def client_jaas_login(jaas_config: str) -> tuple[str, str]:
    """The `username` and `password` of a client's `sasl.jaas.config`, one ScramLoginModule or
    PlainLoginModule entry: `<module> required username="alice" password="secret";`. ValueError
    names what is wrong (another login module, a missing option, not Kafka's JAAS form)."""
    entry = _JAAS_ENTRY.match(jaas_config)
    if entry is None:
        raise ValueError('expected "<LoginModule> required username=\"...\" password=\"...\";"')
    module, _, text = entry.groups()
    if module not in (SCRAM_LOGIN_MODULE, PLAIN_LOGIN_MODULE):
        raise ValueError(f"login module {module} is not supported; use {SCRAM_LOGIN_MODULE} or {PLAIN_LOGIN_MODULE}")
    options, position = {}, 0
    for option in _JAAS_OPTION.finditer(text):
        if text[position:option.start()].strip():
            break
        name, quoted, bare = option.groups()
        options[name] = bare if quoted is None else re.sub(r'\\(.)', r'\1', quoted)
        position = option.end()
    if text[position:].strip():
        raise ValueError(f"cannot parse the login module's options at {text[position:].strip()!r}")
    missing = [name for name in ("username", "password") if name not in options]
    if missing:
        raise ValueError(f"{module} needs {' and '.join(missing)}")
    return options["username"], options["password"]


def plain_initial_response(username: str, password: str) -> bytes:
    """A SASL/PLAIN client's only message (RFC 4616), without an authorization id."""
    return b"\0" + username.encode() + b"\0" + password.encode()


# Kafka's code of each SCRAM mechanism in AlterUserScramCredentials and DescribeUserScramCredentials
SCRAM_MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MAX_SCRAM_ITERATIONS = 16384  # Kafka's ScramMechanism maximum


def scram_credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                          iterations: int) -> ScramCredential:
    """The stored credential of a client-salted password, as AlterUserScramCredentials sends it:
    StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")
    (RFC 5802 section 3; `scramp` derives keys only from a password, so these two lines are ours)."""
    digest = _SCRAM_HASHES[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", digest).digest()
    server_key = hmac.new(salted_password, b"Server Key", digest).digest()
    return ScramCredential(salt, digest(client_key).digest(), server_key, iterations)


def verify_scram_password(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from: its salted password (Hi, PBKDF2 with
    the credential's salt and iterations) gives the same StoredKey (RFC 5802 section 3)."""
    salted = hashlib.pbkdf2_hmac(_SCRAM_HASHES[mechanism]().name, password.encode("utf-8"), credential.salt,
                                 credential.iterations)
    derived = scram_credential_from_salted_password(mechanism, credential.salt, salted, credential.iterations)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)


def plain_users(jaas_config: str | None) -> dict[str, str]:
    """user name -> password of a PlainLoginModule JAAS config's `user_<name>="<password>"` entries."""
    return {name: password.replace('\\"', '"') for name, password in _JAAS_USER.findall(jaas_config or "")}


# user name -> credential (None when the user has none for the mechanism)
CredentialLookup = Callable[[str, str], ScramCredential | None]


class SaslServer:
    """One connection's SASL exchange for one mechanism: `step` takes each client message and
    returns the server's answer; `user` is set once the exchange `complete`s."""

    def __init__(self, mechanism: str, scram_credentials: CredentialLookup, plain_passwords: dict[str, str]) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}")
        self.mechanism = mechanism
        self.user: str | None = None
        self.complete = False
        self._plain_passwords = plain_passwords
        self._credentials = scram_credentials
        self._scram = None
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramMechanism(mechanism).make_server(self._scram_auth_info)
        self._scram_steps = 0
        self._scram_user: str | None = None

    def step(self, message: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("the SASL exchange is already complete")
        if self._scram is None:
            return self._plain(message)
        return self._scram_step(message)

    def _plain(self, message: bytes) -> bytes:
        parts = message.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authorization_id, user, password = (part.decode("utf-8", "replace") for part in parts)
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if authorization_id and authorization_id != user:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                           "different from username")
        expected = self._plain_passwords.get(user)
        if expected is None or not _equal(expected, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self.user, self.complete = user, True
        return b""

    def _scram_step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
            if self._scram_steps == 0:
                self._scram_steps = 1
                self._scram.set_client_first(text)
                return self._scram.get_server_first().encode()
            self._scram_steps = 2
            self._accept_nonce_ending_with_ours(text)
            self._scram.set_client_final(text)
            final = self._scram.get_server_final()
        except (ScramException, UnicodeDecodeError, KeyError) as exc:
            raise SaslAuthenticationFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}") from exc
        self.user, self.complete = self._scram_user, True
        return final.encode()

    def _accept_nonce_ending_with_ours(self, client_final: str) -> None:
        """Kafka's server takes a client-final nonce that ends with the nonce it sent (librdkafka
        2.0.2, Debian's kcat, sends its own nonce again in front of it); scramp wants them equal,
        so it is given the client's. The proof still covers the messages as sent."""
        sent = str(self._scram.nonce)
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce = attribute[2:]
                if nonce != sent and nonce.endswith(sent):
                    self._scram.nonce = Nonce(nonce)
                return

    def _scram_auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        self._scram_user = _unescape_sasl_name(username)
        credential = self._credentials(self._scram_user, self.mechanism)
        if credential is None:
            raise ScramException(f"unknown user {username}")
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations


def _equal(expected: str, given: str) -> bool:
    return hmac.compare_digest(expected.encode(), given.encode())


def _unescape_sasl_name(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")
