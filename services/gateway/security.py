"""The gateway's security: who a request comes from and whether that user may do what the route does.

Authentication (`authentication.method`, as Confluent REST Proxy's): NONE leaves every request
`User:ANONYMOUS`; BASIC checks HTTP Basic credentials against `authentication.password.file` and
then the SCRAM credentials in ZooKeeper (`/config/users/<name>`, SCRAM-SHA-512 then -256); BEARER
verifies a JWT (PyJWT) with `bearer.jwt.public.key.file` or `bearer.jwt.secret`, the principal being
`User:<sub>`. A request without valid credentials is answered 401, REST Proxy's 40101, with a
`WWW-Authenticate` challenge (left out for `X-Requested-With: XMLHttpRequest`, the console's calls,
so that a browser does not prompt). `/health`, the API documents and the console's page and assets are
served to anyone; the console's login (`/ui/login`) exchanges credentials for a session cookie (the
principal and an expiry signed with `authentication.session.secret`, else a key of the process's
own) that the other routes take in place of an Authorization header.

Authorization (`authorizer.class.name` set): each route names the Kafka operation and resource it
acts on (`ROUTE_ACCESS`, keyed by method and path template; a route not listed needs DESCRIBE on
the cluster), checked with `AclAuthorizer` for the authenticated principal and the client's host.
A route whose resources are in its body calls `authorize(request, ...)` itself. A refusal is 403,
REST Proxy's 40301, with Kafka's error name, and is logged to `odradek.audit` by the authorizer.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from services.common.security.acl import CLUSTER_NAME, AclOperation, Resource, ResourceType
from services.common.security.authorizer import AclAuthorizer, parse_super_users
from services.common.security.sasl import (
    ANONYMOUS_PRINCIPAL,
    SCRAM_MECHANISMS,
    ScramCredential,
    principal_of,
    verify_scram_password,
)
from services.common.zk.client import OdradekZkClient, close_session
from services.common.zk.connect import zk_client
from services.gateway.config import GatewayConfig
from services.gateway.errors import RestError

UNAUTHORIZED = 40101
FORBIDDEN = 40301
SESSION_COOKIE = "odradek_session"
SESSION_TTL_S = 8 * 3600
SESSION_ALGORITHM = "HS256"
VERIFIED_PASSWORDS_MAX = 1024
# Served to anyone: readiness, the API documents, the console's page, assets and login
OPEN_PATHS = frozenset({"/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/ui", "/ui/",
                        "/ui/login", "/ui/logout"})
OPEN_PREFIXES = ("/static-offline-docs", "/ui/static/")
DENIAL_ERRORS = {ResourceType.TOPIC: "TOPIC_AUTHORIZATION_FAILED", ResourceType.GROUP: "GROUP_AUTHORIZATION_FAILED",
                 ResourceType.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
                 ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}


class AuthenticationFailed(Exception):
    pass


@dataclass
class GatewaySecurity:
    """One process's authenticator and authorizer (None: every request allowed)."""

    config: GatewayConfig
    zk: OdradekZkClient | None = None
    authorizer: AclAuthorizer | None = None
    password_file_users: dict[str, str] = field(default_factory=dict)
    jwt_key: object = None
    session_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _verified: dict[tuple[str, str, str], bytes] = field(default_factory=dict)

    @classmethod
    def start(cls, config: GatewayConfig) -> GatewaySecurity:
        method = config.authentication_method
        security = cls(config)
        if config.zookeeper_connect and (config.authorizer_class_name or method == "BASIC"):
            security.connect_zookeeper()
        elif config.authorizer_class_name:
            raise ValueError("authorizer.class.name needs zookeeper.connect (where the ACLs are)")
        if config.authorizer_class_name:
            security.authorizer = AclAuthorizer(security.zk.zk, parse_super_users(config.super_users),
                                                config.allow_everyone_if_no_acl_found)
            security.authorizer.start()
        if config.authentication_session_secret:
            security.session_key = config.authentication_session_secret.encode()
        if config.authentication_password_file:
            security.password_file_users = read_password_file(Path(config.authentication_password_file))
        if method == "BEARER":
            if config.bearer_jwt_public_key_file:
                security.jwt_key = Path(config.bearer_jwt_public_key_file).read_text()
            elif config.bearer_jwt_secret:
                security.jwt_key = config.bearer_jwt_secret
            else:
                raise ValueError("authentication.method=BEARER needs bearer.jwt.public.key.file or bearer.jwt.secret")
        return security

    def connect_zookeeper(self) -> None:
        with self._lock:
            if self.zk is not None:
                return
            client = zk_client(self.config.zookeeper_connect, self.config.zk_tls())
            client.start(timeout=self.config.request_timeout_ms / 1000)
            self.zk = OdradekZkClient(client)

    def acl_admin(self) -> AclAuthorizer | None:
        """What the ACL routes read and write ZooKeeper's ACLs with (None without zookeeper.connect);
        blocking: the first call may open the ZooKeeper session."""
        if self.authorizer is not None:
            return self.authorizer
        if self.zk is None and self.config.zookeeper_connect:
            self.connect_zookeeper()
        if self.zk is None:
            return None
        admin = AclAuthorizer(self.zk.zk)
        admin.reload()
        return admin

    def close(self) -> None:
        if self.zk is not None:
            close_session(self.zk.zk)

    # ------------------------------------------------------------------ authentication

    @property
    def enabled(self) -> bool:
        return self.config.authentication_method != "NONE"

    def challenge(self) -> str:
        scheme = "Basic" if self.config.authentication_method == "BASIC" else "Bearer"
        return f'{scheme} realm="{self.config.authentication_realm}"'

    def principal_of_credentials(self, authorization: str | None, cookie: str | None) -> str:
        """The principal of a request's Authorization header or session cookie (blocking: it may read
        ZooKeeper and derive a SCRAM key); AuthenticationFailed when neither is valid."""
        if not self.enabled:
            return ANONYMOUS_PRINCIPAL
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if self.config.authentication_method == "BASIC" and scheme.lower() == "basic":
                return principal_of(self.check_basic(value.strip()))
            if self.config.authentication_method == "BEARER" and scheme.lower() == "bearer":
                return principal_of(self.check_bearer(value.strip()))
            raise AuthenticationFailed(f"{self.config.authentication_method} authentication is required")
        if cookie:
            try:
                return str(jwt.decode(cookie, self.session_key, algorithms=[SESSION_ALGORITHM],
                                      options={"require": ["sub", "exp"]})["sub"])
            except jwt.InvalidTokenError:
                raise AuthenticationFailed("the session has expired or is not valid; log in again") from None
        raise AuthenticationFailed("authentication is required")

    def check_basic(self, encoded: str) -> str:
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise AuthenticationFailed("malformed Basic credentials") from None
        if not sep or not user:
            raise AuthenticationFailed("malformed Basic credentials")
        if self.check_password(user, password):
            return user
        raise AuthenticationFailed("invalid user name or password")

    def check_password(self, user: str, password: str) -> bool:
        expected = self.password_file_users.get(user)
        if expected is not None:
            return hmac.compare_digest(expected.encode(), password.encode())
        if self.zk is None:
            return False
        stored = self.zk.get_user_config(user)
        for mechanism in reversed(SCRAM_MECHANISMS):  # SCRAM-SHA-512 first
            if mechanism in stored:
                return self._verify_scram(user, mechanism, stored[mechanism], password)
        return False

    def _verify_scram(self, user: str, mechanism: str, credential: str, password: str) -> bool:
        """Derives the SCRAM key (milliseconds of CPU) once per user, credential and password: a
        success is remembered as a keyed hash of the password, forgotten when the credential changes."""
        key = (user, mechanism, credential)
        token = hmac.new(self.session_key, password.encode("utf-8"), "sha256").digest()
        remembered = self._verified.get(key)
        if remembered is not None and hmac.compare_digest(remembered, token):
            return True
        if not verify_scram_password(mechanism, ScramCredential.decode(credential), password):
            return False
        with self._lock:
            if len(self._verified) >= VERIFIED_PASSWORDS_MAX:
                self._verified.pop(next(iter(self._verified)))
            self._verified[key] = token
        return True

    def check_bearer(self, token: str) -> str:
        algorithms = [a.strip() for a in self.config.bearer_jwt_algorithms.split(",") if a.strip()]
        options = {"require": ["sub", "exp"]}
        try:
            claims = jwt.decode(token, self.jwt_key, algorithms=algorithms, audience=self.config.bearer_jwt_audience,
                                issuer=self.config.bearer_jwt_issuer, options=options)
        except jwt.InvalidTokenError as exc:
            raise AuthenticationFailed(f"invalid bearer token: {exc}") from None
        return str(claims["sub"])

    def login(self, user: str, password: str, token: str) -> str:
        """The principal of the console's login form (a user and password with BASIC, a token with
        BEARER); AuthenticationFailed when they are not valid. Blocking, as `principal_of_credentials`."""
        if self.config.authentication_method == "BEARER":
            return principal_of(self.check_bearer(token))
        if user and self.check_password(user, password):
            return principal_of(user)
        raise AuthenticationFailed("invalid user name or password")

    def new_session(self, principal: str) -> str:
        """A session cookie's value: the principal and an expiry, signed (HS256) with the session key."""
        return jwt.encode({"sub": principal, "exp": int(time.time()) + SESSION_TTL_S}, self.session_key,
                          algorithm=SESSION_ALGORITHM)

    # ------------------------------------------------------------------ authorization

    def check(self, principal: str, host: str, operation: AclOperation, resource: Resource) -> None:
        """Raises 403 (40301, Kafka's error name) unless `principal` may do `operation` on `resource`."""
        if self.authorizer is None:
            return
        if resource.name == ANY_RESOURCE:
            allowed = self.authorizer.authorize_any(principal, host, operation, resource.resource_type)
            if not allowed:
                # audited as a refusal on every resource of the type
                self.authorizer.authorize(principal, host, operation, Resource(resource.resource_type, "*"))
        else:
            allowed = self.authorizer.authorize(principal, host, operation, resource)
        if not allowed:
            what = "the cluster" if resource.resource_type == ResourceType.CLUSTER else (
                f"{resource.resource_type.zk_name.lower()} {resource.name}")
            raise RestError(403, FORBIDDEN, f"{DENIAL_ERRORS.get(resource.resource_type, 'AUTHORIZATION_FAILED')}: "
                                            f"{principal} may not {operation.name} {what}")


ANY_RESOURCE = "\0any"  # some resource of the type (a listing)


def read_password_file(path: Path) -> dict[str, str]:
    """`user: password[,role...]` lines (blank lines and `#` comments skipped)."""
    users = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        user, _, rest = line.partition(":")
        users[user.strip()] = rest.strip().split(",")[0].strip()
    return users


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def unauthorized(security: GatewaySecurity, message: str, *, challenge: bool = True) -> JSONResponse:
    return JSONResponse({"error_code": UNAUTHORIZED, "message": f"Unauthorized: {message}"}, status_code=401,
                        headers={"WWW-Authenticate": security.challenge()} if challenge else None)


class AuthenticationMiddleware:
    """Sets `request.state.principal` of every HTTP request, answering 401 when authentication is on
    and the request brings no valid credentials (open paths excepted)."""

    def __init__(self, app, security_of) -> None:
        self.app = app
        self.security_of = security_of  # () -> GatewaySecurity of the running app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        security: GatewaySecurity | None = self.security_of()
        state = scope.setdefault("state", {})
        state["principal"] = ANONYMOUS_PRINCIPAL
        if security is not None and security.enabled and not is_open(scope["path"]):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
            cookie = _cookie(headers.get("cookie", ""), SESSION_COOKIE)
            try:
                state["principal"] = await run_in_threadpool(
                    security.principal_of_credentials, headers.get("authorization"), cookie)
            except AuthenticationFailed as exc:
                # the console's own calls get no challenge: a browser would prompt for Basic credentials
                challenge = headers.get("x-requested-with") != "XMLHttpRequest"
                await unauthorized(security, str(exc), challenge=challenge)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


# ---------------------------------------------------------------------- what each route does

V3 = "/v3/clusters/{cluster_id}"
TOPIC_CONFIGS = V3 + "/topics/{topic_name}/configs"
BROKER_CONFIGS = V3 + "/brokers/{broker_id}/configs"
V2_CONSUMER = "/consumers/{group}/instances/{instance}"
IN_ROUTE = ()  # the route authorizes what its body names itself (besides what is listed)
Check = tuple[AclOperation, ResourceType, str]  # the name: a path parameter in braces, or a constant

_TOPIC = "{topic_name}"
_V2_TOPIC = "{topic}"
_CLUSTER = CLUSTER_NAME

ROUTE_ACCESS: dict[tuple[str, str], tuple[Check, ...]] = {
    # v2
    ("GET", "/topics"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, ANY_RESOURCE),),
    ("GET", "/topics/{topic}"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, _V2_TOPIC),),
    ("GET", "/topics/{topic}/partitions"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, _V2_TOPIC),),
    ("GET", "/topics/{topic}/partitions/{partition}"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, _V2_TOPIC),),
    ("POST", "/topics/{topic}"): ((AclOperation.WRITE, ResourceType.TOPIC, _V2_TOPIC),),
    ("POST", "/topics/{topic}/partitions/{partition}"): ((AclOperation.WRITE, ResourceType.TOPIC, _V2_TOPIC),),
    ("POST", "/consumers/{group}"): ((AclOperation.READ, ResourceType.GROUP, "{group}"),),
    ("DELETE", V2_CONSUMER): ((AclOperation.READ, ResourceType.GROUP, "{group}"),),
    ("GET", V2_CONSUMER + "/offsets"): ((AclOperation.DESCRIBE, ResourceType.GROUP, "{group}"),),
    # v3 topics
    ("GET", V3 + "/topics"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, ANY_RESOURCE),),
    ("POST", V3 + "/topics"): IN_ROUTE,
    ("DELETE", V3 + "/topics/{topic_name}"): ((AclOperation.DELETE, ResourceType.TOPIC, _TOPIC),),
    ("PATCH", V3 + "/topics/{topic_name}"): ((AclOperation.ALTER, ResourceType.TOPIC, _TOPIC),),
    ("GET", TOPIC_CONFIGS): ((AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, _TOPIC),),
    ("GET", TOPIC_CONFIGS + "/{config_name}"): ((AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, _TOPIC),),
    ("PUT", TOPIC_CONFIGS + "/{config_name}"): ((AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, _TOPIC),),
    ("DELETE", TOPIC_CONFIGS + "/{config_name}"): ((AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, _TOPIC),),
    ("POST", TOPIC_CONFIGS + ":alter"): ((AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, _TOPIC),),
    ("GET", BROKER_CONFIGS): ((AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, _CLUSTER),),
    ("GET", BROKER_CONFIGS + "/{config_name}"): ((AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, _CLUSTER),),
    ("PUT", BROKER_CONFIGS + "/{config_name}"): ((AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, _CLUSTER),),
    ("DELETE", BROKER_CONFIGS + "/{config_name}"): ((AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, _CLUSTER),),
    ("POST", BROKER_CONFIGS + ":alter"): ((AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, _CLUSTER),),
    ("POST", V3 + "/topics/{topic_name}/records"): ((AclOperation.WRITE, ResourceType.TOPIC, _TOPIC),),
    ("POST", V3 + "/records"): IN_ROUTE,
    ("GET", V3 + "/topics/{topic_name}/partitions/{partition_id}/records"): (
        (AclOperation.READ, ResourceType.TOPIC, _TOPIC),),
    ("GET", V3 + "/topics/{topic_name}/offsets"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, _TOPIC),),
    ("GET", V3 + "/consumer-groups"): ((AclOperation.DESCRIBE, ResourceType.GROUP, ANY_RESOURCE),),
    # ACLs: Kafka's DescribeAcls, CreateAcls and DeleteAcls
    ("GET", V3 + "/acls"): ((AclOperation.DESCRIBE, ResourceType.CLUSTER, _CLUSTER),),
    ("POST", V3 + "/acls"): ((AclOperation.ALTER, ResourceType.CLUSTER, _CLUSTER),),
    ("POST", V3 + "/acls:batch"): ((AclOperation.ALTER, ResourceType.CLUSTER, _CLUSTER),),
    ("DELETE", V3 + "/acls"): ((AclOperation.ALTER, ResourceType.CLUSTER, _CLUSTER),),
    # the console's views
    ("GET", "/ui/api/topics"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, ANY_RESOURCE),),
    ("GET", "/ui/api/topics/{topic_name}/partitions"): ((AclOperation.DESCRIBE, ResourceType.TOPIC, _TOPIC),),
    ("GET", "/ui/api/groups"): ((AclOperation.DESCRIBE, ResourceType.GROUP, ANY_RESOURCE),),
}


def route_checks(method: str, template: str) -> tuple[Check, ...]:
    """What a route needs: its ROUTE_ACCESS entry; else, by its path parameters, READ on a v2
    consumer's group, DESCRIBE on a v3 group and on a topic the path names; else DESCRIBE on the
    cluster."""
    listed = ROUTE_ACCESS.get((method, template))
    if listed is not None:
        return listed
    checks: list[Check] = []
    if template.startswith("/consumers/{group}"):
        checks.append((AclOperation.READ, ResourceType.GROUP, "{group}"))
    if "{consumer_group_id}" in template:
        checks.append((AclOperation.DESCRIBE, ResourceType.GROUP, "{consumer_group_id}"))
    if "{topic_name}" in template:
        checks.append((AclOperation.DESCRIBE, ResourceType.TOPIC, _TOPIC))
    return tuple(checks) or ((AclOperation.DESCRIBE, ResourceType.CLUSTER, _CLUSTER),)


def security_of(request: Request) -> GatewaySecurity | None:
    return getattr(request.app.state, "security", None)


def client_host(request: Request) -> str:
    return request.client.host if request.client else ""


async def authorize_route(request: Request) -> None:
    """The app's dependency: the route's checks for the request's principal (403 on a refusal)."""
    security = security_of(request)
    if security is None or security.authorizer is None:
        return
    route = request.scope.get("route")
    template = getattr(route, "path", request.url.path)
    if is_open(template):
        return
    params = request.path_params
    for operation, resource_type, name in route_checks(request.method, template):
        if name.startswith("{"):
            name = str(params.get(name[1:-1], ""))
        security.check(request.state.principal, client_host(request), operation, Resource(resource_type, name))


def authorize(request: Request, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> None:
    """A route's own check of resources its body names (403 on the first refused)."""
    security = security_of(request)
    if security is None or security.authorizer is None:
        return
    for name in sorted(set(names)):
        security.check(request.state.principal, client_host(request), operation, Resource(resource_type, name))


def authorize_create_topic(request: Request, topic: str) -> None:
    """CreateTopics: CREATE on the cluster, else on the topic (Kafka's rule)."""
    security = security_of(request)
    if security is None or security.authorizer is None:
        return
    principal, host = request.state.principal, client_host(request)
    if security.authorizer.authorize(principal, host, AclOperation.CREATE, Resource(ResourceType.CLUSTER, CLUSTER_NAME),
                                     log_denial=False):
        return
    security.check(principal, host, AclOperation.CREATE, Resource(ResourceType.TOPIC, topic))

