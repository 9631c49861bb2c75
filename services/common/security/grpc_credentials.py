"""gRPC clients' SASL-style credentials: call metadata `authorization: Basic <base64 of user:password>`,
verified by every node before any other interceptor sees the call.

`PasswordVerifier` checks a user name and password as the Kafka listeners would accept them: a
PLAIN user of the node's `listener.name.sasl_plaintext.plain.sasl.jaas.config`, or the user's SCRAM
credential in ZooKeeper (`/config/users/<name>`, any stored mechanism: the password salted with the
stored salt and iterations must give the stored StoredKey). Deriving a SCRAM key costs a PBKDF2, so a
verified pair is remembered (as a keyed digest of the password, never the password) and taken
without a ZooKeeper read for `CREDENTIAL_RECHECK_MS`; after that the stored credential is read again,
and a changed or removed credential needs the password verified anew.

`GrpcCredentialsInterceptor` runs first on every gRPC listener. A call without an `authorization`
header passes unchanged (its principal is its TLS certificate's, or anonymous). A `Basic` header
that does not verify, or one of another scheme, is answered UNAUTHENTICATED with the trailing
ErrorDetail SASL_AUTHENTICATION_FAILED and logged to the `odradek.audit` logger; it never falls
back to anonymous. Until the node has its credential store (ZooKeeper not yet connected), such a
call is answered UNAVAILABLE, which clients retry, as is one whose credential cannot be read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence

import grpc

from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import Errors
from services.common.grpc_error_detail import error_detail_metadata
from services.common.security.authorizer import audit
from services.common.security.sasl import SCRAM_MECHANISMS, ScramCredential, plain_users, verify_scram_password
from services.common.security.tls import peer_host
from services.common.zk.client import OdradekZkClient

logger = logging.getLogger(__name__)

AUTHORIZATION_KEY = "authorization"  # gRPC metadata keys are lower case
BASIC_SCHEME = "basic"
CREDENTIAL_RECHECK_MS = 5000
VERIFIED_PAIRS_MAX = 4096

# user name -> that user's config under /config/users (mechanism -> Kafka's credential text)
UserConfigLookup = Callable[[str], Mapping[str, str]]


class MalformedCredentials(ValueError):
    """An `authorization: Basic` value that is not base64 of `user:password`."""


def basic_authorization(username: str, password: str) -> str:
    """The `authorization` metadata value of a user's credentials."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode("ascii")


def basic_credentials(metadata: Sequence[tuple[str, str | bytes]] | None) -> tuple[str, str] | None:
    """(user, password) of a call's `authorization: Basic` metadata; None without an
    `authorization` header; MalformedCredentials when it has another scheme or cannot be decoded."""
    for key, value in metadata or ():
        if key != AUTHORIZATION_KEY:
            continue
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        scheme, _, encoded = text.strip().partition(" ")
        if scheme.lower() != BASIC_SCHEME:
            raise MalformedCredentials(f"the {scheme or 'empty'} authorization scheme is not supported; use Basic")
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise MalformedCredentials("the Basic credentials are not base64 of user:password") from None
        if not sep or not user:
            raise MalformedCredentials("the Basic credentials name no user")
        return user, password
    return None


class PasswordVerifier:
    """Verifies a user's password against PLAIN users and SCRAM credentials (module docstring)."""

    def __init__(self, user_config: UserConfigLookup, plain_passwords: Mapping[str, str] | None = None, *,
                 recheck_ms: int = CREDENTIAL_RECHECK_MS, clock: Clock = SYSTEM_CLOCK,
                 max_entries: int = VERIFIED_PAIRS_MAX) -> None:
        self._user_config = user_config
        self._plain_passwords = dict(plain_passwords or {})
        self._recheck_ms = recheck_ms
        self._clock = clock
        self._max_entries = max_entries
        self._digest_key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        # (user, password digest) -> (the SCRAM credentials it was verified against, when, in ms)
        self._verified: OrderedDict[tuple[str, bytes], tuple[dict[str, str], int]] = OrderedDict()

    def _pair(self, user: str, password: str) -> tuple[str, bytes]:
        return user, hmac.new(self._digest_key, password.encode("utf-8"), hashlib.sha256).digest()

    def recently_verified(self, user: str, password: str) -> bool:
        """Whether the pair was verified within `recheck_ms` (no ZooKeeper read, no PBKDF2)."""
        if self._plain_match(user, password):
            return True
        with self._lock:
            entry = self._verified.get(self._pair(user, password))
        return entry is not None and self._clock.monotonic_ms() - entry[1] < self._recheck_ms

    def verify(self, user: str, password: str) -> bool:
        """Whether `password` is the user's; blocking (reads ZooKeeper, may derive a SCRAM key)."""
        if self._plain_match(user, password):
            return True
        stored = self._user_config(user)
        credentials = {mechanism: stored[mechanism] for mechanism in SCRAM_MECHANISMS if mechanism in stored}
        pair = self._pair(user, password)
        with self._lock:
            entry = self._verified.pop(pair, None)
        if credentials and entry is not None and entry[0] == credentials:
            self._remember(pair, credentials)
            return True
        for mechanism in reversed(SCRAM_MECHANISMS):  # SCRAM-SHA-512 first
            text = credentials.get(mechanism)
            if text is None:
                continue
            try:
                credential = ScramCredential.decode(text)
            except ValueError:
                continue
            if verify_scram_password(mechanism, credential, password):
                self._remember(pair, credentials)
                return True
        return False

    def _plain_match(self, user: str, password: str) -> bool:
        expected = self._plain_passwords.get(user)
        return expected is not None and hmac.compare_digest(expected.encode(), password.encode())

    def _remember(self, pair: tuple[str, bytes], credentials: dict[str, str]) -> None:
        with self._lock:
            self._verified[pair] = (credentials, self._clock.monotonic_ms())
            while len(self._verified) > self._max_entries:
                self._verified.popitem(last=False)


def node_password_verifier(zk: OdradekZkClient, plain_jaas_config: str | None) -> PasswordVerifier:
    """A node's verifier: SCRAM credentials from its ZooKeeper, PLAIN users from its Kafka listener's
    PLAIN JAAS config (None: no PLAIN users)."""
    return PasswordVerifier(zk.get_user_config, plain_users(plain_jaas_config))


def _refusing_handler(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, details: str,
                      trailing: tuple[tuple[str, bytes], ...],
                      on_call: Callable[[grpc.aio.ServicerContext], None] | None = None) -> grpc.RpcMethodHandler:
    """A handler of the same kind as `handler` that answers every call with `code` (after
    `on_call(context)`, if given)."""
    async def refuse(_request_or_iterator, context: grpc.aio.ServicerContext):
        if on_call is not None:
            on_call(context)
        await context.abort(code, details, trailing_metadata=trailing)

    serializers = {"request_deserializer": handler.request_deserializer,
                   "response_serializer": handler.response_serializer}
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(refuse, **serializers)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(refuse, **serializers)
    if handler.stream_unary is not None:
        return grpc.stream_unary_rpc_method_handler(refuse, **serializers)
    return grpc.stream_stream_rpc_method_handler(refuse, **serializers)


class GrpcCredentialsInterceptor(grpc.aio.ServerInterceptor):
    """Verifies `authorization: Basic` credentials before anything else handles a call; `verifier`
    gives the node's PasswordVerifier when the call arrives (None: not yet available)."""

    def __init__(self, verifier: Callable[[], PasswordVerifier | None]) -> None:
        self._verifier = verifier

    async def intercept_service(self, continuation, handler_call_details):
        try:
            credentials = basic_credentials(handler_call_details.invocation_metadata)
        except MalformedCredentials as exc:
            return await self._refused(continuation, handler_call_details, None, str(exc))
        if credentials is None:
            return await continuation(handler_call_details)
        user, password = credentials
        verifier = self._verifier()
        if verifier is None:
            return await self._unavailable(continuation, handler_call_details,
                                           "credentials cannot be verified yet: the node is starting")
        if not verifier.recently_verified(user, password):
            try:
                verified = await asyncio.get_running_loop().run_in_executor(None, verifier.verify, user, password)
            except Exception as exc:  # ZooKeeper unreachable: the client retries, the call never passes
                logger.warning("cannot verify the credentials of %s: %r", user, exc)
                return await self._unavailable(continuation, handler_call_details,
                                               "credentials cannot be verified now: the credential store is "
                                               "unreachable")
            if not verified:
                return await self._refused(continuation, handler_call_details, user,
                                           "Authentication failed: Invalid username or password")
        return await continuation(handler_call_details)

    @staticmethod
    async def _unavailable(continuation, handler_call_details, reason: str):
        handler = await continuation(handler_call_details)
        return None if handler is None else _refusing_handler(handler, grpc.StatusCode.UNAVAILABLE, reason, ())

    async def _refused(self, continuation, handler_call_details, user: str | None, reason: str):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method

        def audited(context: grpc.aio.ServicerContext) -> None:
            audit.info("Failed authentication with %s (user %s calling %s over gRPC: %s)", peer_host(context),
                       user if user is not None else "unknown", method, reason)

        return _refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED, f"SASL_AUTHENTICATION_FAILED: {reason}",
                                 error_detail_metadata(Errors.SASL_AUTHENTICATION_FAILED, reason), audited)
