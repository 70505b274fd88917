"""The secured local broker's material for a stack of containers (docker-compose's
deploy/docker/secure.yml): the same CA, broker certificate, users and ACLs as
`scalefold local up --secure` (tls.py, secure.py), laid out one directory per
holder, so that each container mounts only what it needs.

    ROOT/
      authority/      the CA's certificate, the broker's keystore and its password, every
                      user's password: what `accounts` connects and provisions with
      broker/         ca.pem, broker.p12, broker.properties (the keystore's password, which
                      the broker reads through Kafka's FileConfigProvider)
      <user>/         ca.pem and <user>.password, for scheduler, history, actuator, bridge
                      and cli
      flink/          ca.pem, flink-rest.p12 and its password, flink-rest-truststore.p12 (the
                      CA, same password): the JobManager's REST endpoint over TLS
                      (security.ssl.rest.*, deploy/docker/flink-run.sh)
      history-api/    ca.pem, history-rest.pem and .key: the history's REST API over TLS
                      (`history serve --rest-cert --rest-key`)
      ca/             ca.pem alone, for what only verifies (the TaskManagers' health check)

The HTTPS servers' certificates hold the same names as the broker's (`--hostname`), so
the compose names (jobmanager, history-api) go there too.

`make` runs before the broker starts and `accounts` once it answers; both are
idempotent (a restarted stack keeps its certificates and passwords).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.contracts.topics import Topics
from services.localstack.secure import ensure_passwords, password_file, provision
from services.localstack.tls import (
    FLINK_REST,
    HISTORY_REST,
    BrokerTls,
    make_broker_tls,
    make_truststore,
    private_directory,
    write_secret,
)

AUTHORITY = "authority"
BROKER = "broker"
BROKER_PROPERTIES = "broker.properties"
FLINK = "flink"
HISTORY_API = "history-api"
CA_ONLY = "ca"
FLINK_TRUSTSTORE = f"{FLINK_REST}-truststore.p12"
KEYSTORE_PASSWORD_KEY = "ssl.keystore.password"


class MaterialError(RuntimeError):
    """The broker did not answer the provisioning in time; the message says where."""


def subject_names(hostnames: Sequence[str]) -> str:
    """The broker certificate's names: its hostnames, and loopback for published ports."""
    names = dict.fromkeys([*hostnames, "localhost"])
    return ",".join([*(f"DNS:{name}" for name in names), "IP:127.0.0.1"])


def make(root: Path, hostnames: Sequence[str], owner: tuple[int, int] | None = None) -> list[str]:
    """Write (or keep) ROOT's material; the names of the directories written."""
    tls = BrokerTls(root / AUTHORITY)
    if not tls.exists():
        make_broker_tls(tls.directory, subject_names(hostnames))
    passwords = ensure_passwords(tls.directory)
    broker = private_directory(root / BROKER)
    _copy(tls.ca, broker)
    _copy(tls.keystore, broker)
    write_secret(broker / BROKER_PROPERTIES, f"{KEYSTORE_PASSWORD_KEY}={tls.keystore_password()}")
    written = [AUTHORITY, BROKER]
    for user in passwords:
        directory = private_directory(root / user)
        _copy(tls.ca, directory)
        _copy(password_file(tls.directory, user), directory)
        written.append(user)
    written += _https_servers(root, tls)
    if owner is not None:
        for name in written:
            _chown_tree(root / name, owner)
    return written


def _https_servers(root: Path, tls: BrokerTls) -> list[str]:
    """The JobManager's and the history API's directories: each server's own key only.
    Material made before the servers had certificates has none (and no CA key to sign
    one): those directories are left out, and the stack must start with fresh volumes."""
    flink, history = tls.server(FLINK_REST), tls.server(HISTORY_REST)
    if not (flink.exists() and history.exists()):
        return []
    directory = private_directory(root / FLINK)
    for source in (tls.ca, flink.keystore, flink.password_file):
        _copy(source, directory)
    if not (directory / FLINK_TRUSTSTORE).exists():
        # Flink's REST client side (its CLI, inside the container) trusts the CA.
        make_truststore(tls.ca, directory / FLINK_TRUSTSTORE, flink.password_file)
    directory = private_directory(root / HISTORY_API)
    for source in (tls.ca, history.certificate, history.key):
        _copy(source, directory)
    _copy(tls.ca, private_directory(root / CA_ONLY))
    return [FLINK, HISTORY_API, CA_ONLY]


def admin_config(root: Path, bootstrap: str) -> dict[str, Any]:
    """librdkafka settings of the broker's own identity (its certificate), the super user,
    on its TLS listener with client authentication at `bootstrap`."""
    tls = BrokerTls(root / AUTHORITY)
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(tls.ca),
        "ssl.keystore.location": str(tls.keystore),
        "ssl.keystore.password": tls.keystore_password(),
    }


def accounts(root: Path, bootstrap: str, topics: Topics, timeout: float = 120.0) -> None:
    """Create (or update) every user and ACL of secure.py on the broker at `bootstrap`."""
    from confluent_kafka.admin import AdminClient

    config = admin_config(root, bootstrap)
    admin = AdminClient({**config, "log_level": 0})
    deadline = time.monotonic() + timeout
    while not _answers(admin):
        if time.monotonic() > deadline:
            raise MaterialError(f"no metadata answer from {bootstrap} in {timeout:.0f} s")
        time.sleep(0.5)
    provision(config, BrokerTls(root / AUTHORITY), topics)


def _answers(admin: Any) -> bool:
    try:
        return bool(admin.list_topics(timeout=2).brokers)
    except Exception:  # not answering yet
        return False


def _copy(source: Path, directory: Path) -> None:
    target = directory / source.name
    shutil.copyfile(source, target)
    target.chmod(0o600)


def _chown_tree(path: Path, owner: tuple[int, int]) -> None:
    os.chown(path, *owner)
    for child in path.iterdir():
        os.chown(child, *owner)
