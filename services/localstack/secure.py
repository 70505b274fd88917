"""Users and ACLs of the secured local broker, and the settings each client connects with.

One SCRAM-SHA-512 user per service and one for the CLI (`ACCESS` in
services/contracts/topics.py says who reads and writes which topic). Each may
read and write only its own topics and use only consumer groups named
`<prefix><user>...`; the bridge its transactional ids `<prefix>bridge...`; the scheduler may also create and use the topics of its
Faust app (`<prefix>scheduler-...`, its table changelogs). Kafka implies
DESCRIBE from READ and WRITE, so no grant names it.

    secure/<user>.password    each user's password (mode 0600), made once per run directory
    client.env                the CLI user's settings (the password by file), for `scalefold`

Users and ACLs are made with the admin API as the broker's super user, rather
than at `kafka-storage format` time, so no password is ever on a command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts.settings import KafkaSecurity, Secret, Settings
from services.contracts.topics import ACCESS, Topics
from services.localstack.tls import BrokerTls, new_password, private_directory, write_secret

if TYPE_CHECKING:
    from services.localstack.broker import LocalBroker

CLIENT_ENV = "client.env"
MECHANISM = "SCRAM-SHA-512"
USERS = tuple(ACCESS)
SCRAM_ITERATIONS = 8192


class ProvisionError(RuntimeError):
    """The broker refused a user or an ACL; the message says which and why."""


@dataclass(frozen=True)
class Grant:
    """One ALLOW ACL: `principal` may do `operation` on the resource(s) `name` names."""

    principal: str
    resource: str  # TOPIC | GROUP | TRANSACTIONAL_ID
    pattern: str  # LITERAL | PREFIXED
    name: str
    operation: str  # READ | WRITE | CREATE | DESCRIBE_CONFIGS | ALTER_CONFIGS


def grants(topics: Topics) -> list[Grant]:
    """Every ACL of the secured stack for the topics under `topics.prefix`."""
    result: list[Grant] = []
    for user, access in ACCESS.items():
        principal = f"User:{user}"
        for spec in access.reads:
            result.append(Grant(principal, "TOPIC", "LITERAL", topics.name(spec), "READ"))
        for spec in access.writes:
            result.append(Grant(principal, "TOPIC", "LITERAL", topics.name(spec), "WRITE"))
        result.append(Grant(principal, "GROUP", "PREFIXED", topics.own(user), "READ"))
    # `scalefold topics --create --apply`: the operator may create the topics and set their
    # declared settings (nothing else may).
    result.extend(
        Grant("User:cli", "TOPIC", "LITERAL", name, operation)
        for name in topics.all()
        for operation in ("CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
    )
    # The bridge's transactional producer (services/bridge/sink.py): its transactional ids
    # are `<prefix>bridge.<clusters>`. WRITE implies DESCRIBE; with WRITE on a topic, Kafka
    # needs no IDEMPOTENT_WRITE on the cluster for its producer id (KIP-679).
    result.append(
        Grant("User:bridge", "TRANSACTIONAL_ID", "PREFIXED", topics.own("bridge"), "WRITE")
    )
    # Faust's own topics: `<app id>-<table>-changelog` and `<app id>-__assignor-__leader`.
    faust_topics = topics.own("scheduler") + "-"
    result.extend(
        Grant("User:scheduler", "TOPIC", "PREFIXED", faust_topics, operation)
        for operation in ("CREATE", "READ", "WRITE")
    )
    return result


def password_file(directory: Path, user: str) -> Path:
    return directory / f"{user}.password"


def ensure_passwords(directory: Path) -> dict[str, Secret]:
    """Each user's password, made (and kept) in `directory` when missing."""
    private_directory(directory)
    passwords = {}
    for user in USERS:
        path = password_file(directory, user)
        if not path.exists():
            write_secret(path, new_password())
        passwords[user] = Secret(path.read_text().strip())
    return passwords


def client_security(tls: BrokerTls, user: str) -> KafkaSecurity:
    """How `user` connects to the secured broker of `tls`."""
    return KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism=MECHANISM,
        sasl_username=user,
        sasl_password=Secret(password_file(tls.directory, user).read_text().strip()),
        ssl_ca_location=str(tls.ca),
    )


PLAINTEXT_ENV = {
    # Set, even empty, so that nothing a service inherits from the shell that started
    # the stack (a user's own SCALEFOLD_SASL_PASSWORD, say) takes the place of its own.
    "SCALEFOLD_SECURITY_PROTOCOL": "PLAINTEXT",
    "SCALEFOLD_SASL_MECHANISM": "",
    "SCALEFOLD_SASL_USERNAME": "",
    "SCALEFOLD_SASL_PASSWORD": "",
    "SCALEFOLD_SASL_PASSWORD_FILE": "",
    "SCALEFOLD_SSL_CA_LOCATION": "",
    "SCALEFOLD_SSL_CERTIFICATE_LOCATION": "",
    "SCALEFOLD_SSL_KEY_LOCATION": "",
    "SCALEFOLD_SSL_KEY_PASSWORD": "",
    "SCALEFOLD_SSL_KEY_PASSWORD_FILE": "",
}
"""The environment of a client of the plaintext local broker."""


def client_env(tls: BrokerTls, user: str) -> dict[str, str]:
    """`SCALEFOLD_*` variables for `user`; the password by file, so no secret is in them."""
    return {
        **PLAINTEXT_ENV,
        "SCALEFOLD_SECURITY_PROTOCOL": "SASL_SSL",
        "SCALEFOLD_SASL_MECHANISM": MECHANISM,
        "SCALEFOLD_SASL_USERNAME": user,
        "SCALEFOLD_SASL_PASSWORD_FILE": str(password_file(tls.directory, user)),
        "SCALEFOLD_SSL_CA_LOCATION": str(tls.ca),
    }


def identities(broker: LocalBroker, settings: Settings) -> dict[str, dict[str, str]]:
    """Provision the users and ACLs for `settings`' topics; each user's environment."""
    provision(broker.admin_config(), broker.tls, settings.topics)
    return {user: client_env(broker.tls, user) for user in USERS}


def as_user(settings: Settings, identities: Mapping[str, Mapping[str, str]], user: str) -> Settings:
    """`settings` with `user`'s security, when the stack is secured."""
    if user not in identities:
        return settings
    return replace(settings, security=Settings.from_env(identities[user]).security)


def write_client_env(run_dir: Path, env: Mapping[str, str] | None) -> None:
    """`run_dir/client.env`: the CLI's settings for a secured stack (no file otherwise).

    `scalefold` reads it when no SCALEFOLD_BOOTSTRAP_SERVERS is set, as it reads
    the local stack's address, so the CLI works on a secured stack as it is."""
    path = run_dir / CLIENT_ENV
    if env is None:
        path.unlink(missing_ok=True)
        return
    path.write_text("".join(f"{key}={value}\n" for key, value in env.items() if value))


def read_client_env(run_dir: Path) -> dict[str, str]:
    try:
        lines = (run_dir / CLIENT_ENV).read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def export_lines(env: Mapping[str, str]) -> list[str]:
    """Shell lines that set `env`, with the password read from its file when they run."""
    lines = []
    for key, value in env.items():
        if key == "SCALEFOLD_SASL_PASSWORD_FILE":
            lines.append(f'export SCALEFOLD_SASL_PASSWORD="$(cat {value})"')
        elif value:
            lines.append(f"export {key}={value}")
    return lines


def provision(admin_config: Mapping[str, Any], tls: BrokerTls, topics: Topics) -> None:
    """Create (or update) every user and ACL; idempotent."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(dict(admin_config))
    passwords = ensure_passwords(tls.directory)
    _upsert_users(admin, passwords)
    _create_acls(admin, grants(topics))


def _upsert_users(admin: Any, passwords: Mapping[str, Secret]) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upserts = [
        UserScramCredentialUpsertion(user, info, password.reveal().encode())
        for user, password in passwords.items()
    ]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        try:
            future.result()
        except Exception as error:
            raise ProvisionError(f"could not create SCRAM user {user}: {error}") from None


def _create_acls(admin: Any, wanted: list[Grant]) -> None:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [
        AclBinding(
            ResourceType[grant.resource],
            grant.name,
            ResourcePatternType[grant.pattern],
            grant.principal,
            "*",
            AclOperation[grant.operation],
            AclPermissionType.ALLOW,
        )
        for grant in wanted
    ]
    for binding, future in admin.create_acls(bindings, request_timeout=30).items():
        try:
            future.result()
        except Exception as error:
            raise ProvisionError(f"could not create ACL {binding}: {error}") from None
