"""Typed settings, read once at the entry point and passed down.

Nothing below `services.cli` reads the environment. Kafka's security options
pass through unchanged to every client (librdkafka, aiokafka, Spark's Java
client); passwords are `Secret`s, which print as `***` in logs, reprs and errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from services.contracts.schemas import SCHEMAS_DIR
from services.contracts.topics import DEFAULT_PREFIX, Topics

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
ENV_PREFIX = "SCALEFOLD_"

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SettingsError(ValueError):
    """A setting has a value scalefold cannot use."""


@dataclass(frozen=True)
class Secret:
    """A value that must never be printed: its repr and str are `***`."""

    _value: str = field(repr=False)

    def reveal(self) -> str:
        """The secret itself, for handing to a client library only."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"


@dataclass(frozen=True)
class KafkaSecurity:
    """Kafka's `security.protocol` with its SASL and TLS options."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: Secret | None = None

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise SettingsError(
                f"security protocol {self.protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        if self.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise SettingsError(
                    f"SASL mechanism {self.sasl_mechanism!r} is not one of "
                    f"{', '.join(SASL_MECHANISMS)}"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise SettingsError(f"{self.protocol} needs a SASL username and password")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol.endswith("SSL")


@dataclass(frozen=True)
class Settings:
    """Where the broker is, how to reach it, and which topics to use."""

    bootstrap_servers: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = DEFAULT_PREFIX
    security: KafkaSecurity = KafkaSecurity()
    schemas_dir: Path = SCHEMAS_DIR

    @property
    def topics(self) -> Topics:
        return Topics(self.topic_prefix)

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with the non-None `changes` applied (command-line flags)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str], bootstrap_fallback: str | None = None) -> Settings:
        """Read `SCALEFOLD_*` variables; `bootstrap_fallback` applies when none is set."""

        def get(name: str) -> str | None:
            value = env.get(ENV_PREFIX + name)
            return value if value else None

        def secret(name: str) -> Secret | None:
            """`SCALEFOLD_<name>`, or the contents of the file `SCALEFOLD_<name>_FILE` names
            (a Docker or Kubernetes secret, or the local stack's files)."""
            value, path = get(name), get(name + "_FILE")
            if value is None and path is not None:
                try:
                    value = Path(path).read_text().rstrip("\n")
                except OSError as error:
                    raise SettingsError(
                        f"cannot read {ENV_PREFIX}{name}_FILE ({path}): {error.strerror}"
                    ) from None
            return Secret(value) if value is not None else None

        security = KafkaSecurity(
            protocol=(get("SECURITY_PROTOCOL") or "PLAINTEXT").upper(),
            sasl_mechanism=get("SASL_MECHANISM"),
            sasl_username=get("SASL_USERNAME"),
            sasl_password=secret("SASL_PASSWORD"),
            ssl_ca_location=get("SSL_CA_LOCATION"),
            ssl_certificate_location=get("SSL_CERTIFICATE_LOCATION"),
            ssl_key_location=get("SSL_KEY_LOCATION"),
            ssl_key_password=secret("SSL_KEY_PASSWORD"),
        )
        schemas = get("SCHEMAS_DIR")
        return cls(
            bootstrap_servers=get("BOOTSTRAP_SERVERS") or bootstrap_fallback or DEFAULT_BOOTSTRAP,
            topic_prefix=get("TOPIC_PREFIX") or DEFAULT_PREFIX,
            security=security,
            schemas_dir=Path(schemas) if schemas else SCHEMAS_DIR,
        )
