"""A certificate authority and a broker certificate for the secured local broker, made by openssl.

    secure/                 mode 0700, under the broker's run directory
      ca.pem                the CA's certificate: what clients trust (SCALEFOLD_SSL_CA_LOCATION)
      broker.p12            the broker's key and certificate chain (PKCS#12 keystore)
      broker.password       the keystore's password
      <server>.p12/.password  for each HTTPS server of the stack (HTTPS_SERVERS: Flink's
      <server>.pem/.key       REST endpoint, the history's REST API), its key and certificate
                            as a PKCS#12 keystore (Java) and as PEM (Python's ssl)

The CA's private key exists only while the certificates are signed and is
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
FLINK_REST = "flink-rest"
HISTORY_REST = "history-rest"
HTTPS_SERVERS = (FLINK_REST, HISTORY_REST)
"""Signed with the broker's certificate, while the CA key exists: each server its own key,
none of them the broker's (whose certificate is the cluster's super user)."""


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

    def server(self, name: str) -> ServerTls:
        """One HTTPS server's material (HTTPS_SERVERS), beside the broker's."""
        return ServerTls(self.directory, name)


@dataclass(frozen=True)
class ServerTls:
    """An HTTPS server's key and certificate (chain up to the CA), in two forms."""

    directory: Path
    name: str

    @property
    def keystore(self) -> Path:
        """PKCS#12: key, certificate and CA, opened with `password()` (Flink's keystore)."""
        return self.directory / f"{self.name}.p12"

    @property
    def password_file(self) -> Path:
        return self.directory / f"{self.name}.password"

    @property
    def certificate(self) -> Path:
        """PEM: the certificate, then the CA's (Python's `load_cert_chain`)."""
        return self.directory / f"{self.name}.pem"

    @property
    def key(self) -> Path:
        """PEM: the private key, unencrypted, mode 0600 in the 0700 directory."""
        return self.directory / f"{self.name}.key"

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def exists(self) -> bool:
        return all(
            p.exists() for p in (self.keystore, self.password_file, self.certificate, self.key)
        )


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
    """A new CA, a broker certificate it signed (a PKCS#12 keystore), and one for each of
    HTTPS_SERVERS; the CA key is gone afterwards."""
    tls = BrokerTls(private_directory(directory))
    ca_cert, ca_key = make_ca(directory)
    try:
        # The broker is a server to clients and a client of its own controller listener.
        # (broker.p12 and broker.password are BrokerTls' keystore and its password file)
        broker = ServerTls(directory, "broker")
        _sign(broker, BROKER_CN, subject_names, "serverAuth,clientAuth", (ca_cert, ca_key))
        for server in HTTPS_SERVERS:
            signed = _sign(tls.server(server), f"scalefold-{server}", subject_names, "serverAuth", (ca_cert, ca_key))  # fmt: skip
            _keep_pem(signed, ca_cert)
    finally:
        for leftover in (ca_key, broker.certificate, broker.key):
            leftover.unlink(missing_ok=True)
    return tls


def _sign(server: ServerTls, cn: str, names: str, usage: str, ca: tuple[Path, Path]) -> ServerTls:
    """`server`'s key and a certificate for `cn` and `names` the CA signed: as PEM files
    (key and certificate alone) and as a PKCS#12 keystore with the CA, password in a file."""
    directory, (ca_cert, ca_key) = server.directory, ca
    csr, extensions = directory / f"{server.name}.csr", directory / f"{server.name}.ext"
    extensions.write_text(
        f"subjectAltName={names}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        f"extendedKeyUsage={usage}\n"
    )
    try:
        _openssl(
            "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", server.key, "-out", csr, "-subj", f"/CN={cn}",
        )  # fmt: skip
        server.key.chmod(0o600)
        _openssl(
            "x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key,
            "-set_serial", str(secrets.randbits(63)), "-days", str(DAYS),
            "-extfile", extensions, "-out", server.certificate,
        )  # fmt: skip
        write_secret(server.password_file, new_password())
        _openssl(
            "pkcs12", "-export", "-in", server.certificate, "-inkey", server.key,
            "-certfile", ca_cert, "-name", server.name, "-out", server.keystore,
            "-passout", f"file:{server.password_file}",
        )  # fmt: skip
        server.keystore.chmod(0o600)
    finally:
        for leftover in (csr, extensions):
            leftover.unlink(missing_ok=True)
    return server


def _keep_pem(server: ServerTls, ca_cert: Path) -> None:
    """The PEM certificate followed by the CA's: a client that knows the CA alone verifies it."""
    server.certificate.write_text(server.certificate.read_text() + ca_cert.read_text())


def make_truststore(ca: Path, truststore: Path, password_file: Path) -> Path:
    """A PKCS#12 truststore holding the CA's certificate, for a Java client (Flink's CLI).

    The JDK's keytool, not openssl: Java takes a certificate in a PKCS#12 file as trusted
    only with Oracle's trust attribute, which openssl writes from 3.2 on (we have 3.0)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise TlsError("keytool (Java 17) is not on PATH; Flink's truststore needs it")
    truststore.unlink(missing_ok=True)
    result = subprocess.run(
        [
            keytool, "-importcert", "-noprompt", "-alias", "scalefold-ca", "-file", str(ca),
            "-storetype", "PKCS12", "-keystore", str(truststore),
            "-storepass:file", str(password_file),
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise TlsError(f"keytool -importcert failed:\n{result.stdout}{result.stderr}")
    truststore.chmod(0o600)
    return truststore


def _openssl(*args: object) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsError("openssl is not on PATH; the secured broker's certificates need it")
    result = subprocess.run(
        [openssl, *(str(a) for a in args)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise TlsError(f"openssl {args[0]} failed:\n{result.stdout}{result.stderr}")
