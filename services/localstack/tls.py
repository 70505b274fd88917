"""A certificate authority and a broker certificate for the secured local broker, made by openssl.

    secure/                 mode 0700, under the broker's run directory
      ca.pem                the CA's certificate: what clients trust (SCALEFOLD_SSL_CA_LOCATION)
      broker.p12            the broker's key and certificate chain (PKCS#12 keystore)
      broker.password       the keystore's password

The CA's private key exists only while the broker certificate is signed and is
deleted afterwards, so nobody, not even the owner of the run directory, can
mint another certificate this broker would trust. openssl rather than the
JDK's keytool: one process per step instead of a JVM start, and PEM output
that librdkafka, Python's ssl module and Kafka's Java client all read
directly. Passwords reach openssl through files, never its command line.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

BROKER_CN = "scalefold-broker"
"""The broker's certificate subject; `User:CN=scalefold-broker` is the cluster's super user."""
BROKER_PRINCIPAL = f"User:CN={BROKER_CN}"
DAYS = 365
SUBJECT_NAMES = "IP:127.0.0.1,DNS:localhost"


class TlsError(RuntimeError):
    """openssl failed; the message carries its output."""


@dataclass(frozen=True)
class BrokerTls:
    """The files of one secured broker's TLS material."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.directory / "broker.p12"

    @property
    def keystore_password_file(self) -> Path:
        return self.directory / "broker.password"

    def keystore_password(self) -> str:
        return self.keystore_password_file.read_text().strip()

    def exists(self) -> bool:
        return all(p.exists() for p in (self.ca, self.keystore, self.keystore_password_file))


def private_directory(path: Path) -> Path:
    """`path`, created readable by its owner only."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def write_secret(path: Path, value: str) -> Path:
    """Write `value` to a file only its owner can read."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(value + "\n")
    return path


def new_password() -> str:
    """A random password (URL-safe: no quoting trouble in JAAS strings or properties)."""
    return secrets.token_urlsafe(24)


def make_ca(directory: Path, name: str = "scalefold local CA") -> tuple[Path, Path]:
    """A self-signed CA in `directory`: (certificate, private key)."""
    private_directory(directory)
    cert, key = directory / "ca.pem", directory / "ca.key"
    _openssl(
        "req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", key, "-out", cert, "-days", str(DAYS), "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    key.chmod(0o600)
    return cert, key


def make_broker_tls(directory: Path, subject_names: str = SUBJECT_NAMES) -> BrokerTls:
    """A new CA and a broker certificate it signed, as a PKCS#12 keystore; the CA key is gone."""
    tls = BrokerTls(private_directory(directory))
    ca_cert, ca_key = make_ca(directory)
    key, csr, cert = directory / "broker.key", directory / "broker.csr", directory / "broker.pem"
    extensions = directory / "broker.ext"
    extensions.write_text(
        f"subjectAltName={subject_names}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        # The broker is a server to clients and a client of its own controller listener.
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    try:
        _openssl(
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={BROKER_CN}",
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
            "-set_serial", str(secrets.randbits(63)), "-days", str(DAYS),
            "-extfile", extensions, "-out", cert,
        )  # fmt: skip
        write_secret(tls.keystore_password_file, new_password())
        _openssl(
            "pkcs12", "-export", "-in", cert, "-inkey", key, "-certfile", ca_cert,
            "-name", "broker", "-out", tls.keystore,
            "-passout", f"file:{tls.keystore_password_file}",
        )  # fmt: skip
        tls.keystore.chmod(0o600)
    finally:
        for leftover in (ca_key, key, csr, cert, extensions):
            leftover.unlink(missing_ok=True)
    return tls


def _openssl(*args: object) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsError("openssl is not on PATH; the secured broker's certificates need it")
    result = subprocess.run(
        [openssl, *(str(a) for a in args)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise TlsError(f"openssl {args[0]} failed:\n{result.stdout}{result.stderr}")
