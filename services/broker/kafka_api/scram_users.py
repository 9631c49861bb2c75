"""DescribeUserScramCredentials and AlterUserScramCredentials (version 0) over Kafka's protocol:
users' SCRAM credentials in ZooKeeper's `/config/users/<user>`, as `odradek configs --entity-type
users` writes them, so `kafka-configs.sh --bootstrap-server ... --entity-type users` works too
(its --describe also asks DescribeClientQuotas 0-1, answered with no quota: Odradek applies none,
DESCRIBE_CONFIGS on the cluster needed).

Describing needs DESCRIBE on the cluster, altering ALTER (CLUSTER_AUTHORIZATION_FAILED otherwise).
An upsertion carries the client's salt and salted password, from which the broker derives the
stored and server keys; the iterations must be 4096-16384 (UNACCEPTABLE_CREDENTIAL), the mechanism
SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2) (UNSUPPORTED_SASL_MECHANISM), and a user may be named once
per mechanism (DUPLICATE_RESOURCE). A named user without credentials is RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.security.sasl import (
    MAX_SCRAM_ITERATIONS,
    MIN_SCRAM_ITERATIONS,
    SCRAM_MECHANISM_CODES,
    ScramCredential,
    scram_credential_from_salted_password,
)
from services.common.zk.client import OdradekZkClient
from services.common.zk.configs import USER_ENTITY_TYPE, entity_type_path

DESCRIBE_CLIENT_QUOTAS, DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 48, 50, 51
SCRAM_USER_API_VERSIONS = {DESCRIBE_CLIENT_QUOTAS: (0, 1), DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
                           ALTER_USER_SCRAM_CREDENTIALS: (0, 0)}
MECHANISMS_BY_CODE = {code: name for name, code in SCRAM_MECHANISM_CODES.items()}


class ScramUserKafkaApis:
    def __init__(self, zk: OdradekZkClient) -> None:
        self.zk = zk

    def register(self, registry: ApiRegistry) -> None:
        handlers = {DESCRIBE_CLIENT_QUOTAS: self.describe_client_quotas,
                    DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe, ALTER_USER_SCRAM_CREDENTIALS: self.alter}
        for api_key, (low, high) in SCRAM_USER_API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])

    async def describe_client_quotas(self, request: Any, context: RequestContext) -> Any:
        allowed = context.access.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME)
        code = Errors.NONE if allowed else Errors.CLUSTER_AUTHORIZATION_FAILED
        return fields_of(context.response_type, error_code=kafka_error(code), error_message=None, entries=())

    async def describe(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        if not context.access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return fields_of(context.response_type, error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED),
                             error_message=None, results=())
        named = None if request.users is None else [u.name for u in request.users]

        def read() -> list[tuple[str, int, dict[str, str]]]:
            users = named
            if users is None:
                path = entity_type_path(USER_ENTITY_TYPE)
                users = sorted(self.zk.zk.get_children(path)) if self.zk.zk.exists(path) else []
            found = []
            for user in dict.fromkeys(users):
                config = {k: v for k, v in self.zk.get_user_config(user).items() if k in SCRAM_MECHANISM_CODES}
                if config or named is not None:
                    found.append((user, Errors.NONE if config else Errors.RESOURCE_NOT_FOUND, config))
            return found

        results = await asyncio.get_running_loop().run_in_executor(None, read)
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), error_message=None,
                         results=tuple(module.DescribeUserScramCredentialsResult(
                             user=user, error_code=kafka_error(code),
                             error_message=None if code == Errors.NONE else f"Attempt to describe a user credential "
                                                                             f"that does not exist: {user}",
                             credential_infos=tuple(module.CredentialInfo(
                                 mechanism=SCRAM_MECHANISM_CODES[name],
                                 iterations=ScramCredential.decode(value).iterations)
                                 for name, value in sorted(config.items())))
                             for user, code, config in results))

    async def alter(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
        if not context.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return fields_of(context.response_type, results=tuple(module.AlterUserScramCredentialsResult(
                user=u, error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED), error_message=None)
                for u in users))
        errors: dict[str, tuple[int, str]] = {}
        seen: set[tuple[str, int]] = set()
        changes: dict[str, dict[str, str | None]] = {}
        for item in (*request.deletions, *request.upsertions):
            mechanism = MECHANISMS_BY_CODE.get(int(item.mechanism))
            if (item.name, int(item.mechanism)) in seen:
                errors.setdefault(item.name, (Errors.DUPLICATE_RESOURCE,
                                              f"A user credential cannot be altered twice in the same request: "
                                              f"{item.name}"))
            seen.add((item.name, int(item.mechanism)))
            if mechanism is None:
                errors.setdefault(item.name, (Errors.UNSUPPORTED_SASL_MECHANISM,
                                              f"Unknown SCRAM mechanism {item.mechanism}"))
                continue
            if hasattr(item, "salted_password"):
                if not MIN_SCRAM_ITERATIONS <= item.iterations <= MAX_SCRAM_ITERATIONS:
                    errors.setdefault(item.name, (Errors.UNACCEPTABLE_CREDENTIAL,
                                                  f"Iterations must be in {MIN_SCRAM_ITERATIONS}.."
                                                  f"{MAX_SCRAM_ITERATIONS}"))
                    continue
                changes.setdefault(item.name, {})[mechanism] = scram_credential_from_salted_password(
                    mechanism, item.salt, item.salted_password, item.iterations).encode()
            else:
                changes.setdefault(item.name, {})[mechanism] = None

        def write() -> None:
            for user, change in changes.items():
                if user in errors:
                    continue
                current = self.zk.get_user_config(user)
                missing = [m for m, value in change.items() if value is None and m not in current]
                if missing:
                    errors[user] = (Errors.RESOURCE_NOT_FOUND,
                                    f"Attempt to delete a user credential that does not exist: {user} {missing[0]}")
                    continue
                updated = {k: v for k, v in current.items() if k not in change}
                updated.update({k: v for k, v in change.items() if v is not None})
                self.zk.set_user_config(user, updated)

        await asyncio.get_running_loop().run_in_executor(None, write)
        return fields_of(context.response_type, results=tuple(module.AlterUserScramCredentialsResult(
            user=u, error_code=kafka_error(errors.get(u, (Errors.NONE, None))[0]),
            error_message=errors.get(u, (Errors.NONE, None))[1]) for u in users))
