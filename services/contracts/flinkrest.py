"""A small client of Flink's REST API (urllib, timeouts, typed errors).

Shared by everything that talks to a real Flink cluster (the bridge, `scalefold flink`,
later the actuator): the services may share only the contracts. Errors are typed by
what the caller does about them: an unreachable JobManager is retried, a 404 means the
thing is gone (or the feature is off), a bad answer (5xx, a body that is not JSON) is
recorded with what Flink said.

An https URL is always verified: against `ca` (a PEM file, e.g. the secured local stack's
CA) when given, else the system's trusted CAs. A certificate that does not verify is a
`FlinkTlsError` saying so in one line; nothing falls back to an unverified connection.
"""

from __future__ import annotations

import argparse
import json
import re
import ssl
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ERROR_BODY_LIMIT = 2_000
"""Characters of an error body an exception keeps (Flink's 404s carry a whole stack trace)."""


class FlinkRestError(Exception):
    """Any failure of a Flink REST call; `url` says which."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url


class FlinkUnreachableError(FlinkRestError):
    """No answer: connection refused, reset, or timed out."""


class FlinkTlsError(FlinkUnreachableError):
    """The TLS handshake failed: the certificate did not verify against the CA, or the
    endpoint does not speak TLS. Unreachable as far as retrying goes (a bridge polling
    many clusters keeps going), but said as what it is."""


class FlinkNotFoundError(FlinkRestError):
    """404: the job (or rescale) is not there, or the endpoint is off."""

    def __init__(self, url: str, errors: list[str]) -> None:
        first = errors[0].splitlines()[0] if errors else "not found"
        super().__init__(url, f"404 {first}")
        self.errors = errors


class FlinkBadAnswerError(FlinkRestError):
    """An answer that is not a usable one: a 5xx or other status, or a body not JSON."""

    def __init__(self, url: str, status: int, body: bytes, reason: str) -> None:
        super().__init__(url, reason)
        self.status = status
        self.body = body


def flink_errors(body: bytes) -> list[str]:
    """Flink's error list (`{"errors": [...]}`) from an answer's body, or []."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return []
    errors = parsed.get("errors") if isinstance(parsed, dict) else None
    return [str(e) for e in errors] if isinstance(errors, list) else []


class FlinkRest:
    """One Flink cluster's REST endpoint, e.g. `http://127.0.0.1:8081`, or an https URL
    whose certificate is verified against `ca` (PEM), else the system's CAs."""

    def __init__(self, base_url: str, timeout: float = 5.0, ca: Path | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.ca = ca
        self._context = tls_context(ca) if self.base_url.startswith("https:") else None

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def get_raw(self, path: str) -> tuple[int, bytes]:
        """(status, body) of a GET; raises only FlinkUnreachableError."""
        return self.request("GET", path)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """(status, body) of a call with an optional JSON body; FlinkUnreachableError if none."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        return self.send(method, path, data, headers)

    def send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        """(status, body) of a call with a body of any type; FlinkUnreachableError if none."""
        url = self.url(path)
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout, context=self._context
            ) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()
        except (TimeoutError, urllib.error.URLError, OSError) as error:
            # an SSLError's own `reason` is a word (CERTIFICATE_VERIFY_FAILED): keep the error
            reason = error if isinstance(error, ssl.SSLError) else getattr(error, "reason", error)
            if isinstance(reason, ssl.SSLError):
                raise FlinkTlsError(url, tls_failure(reason, self.ca)) from None
            raise FlinkUnreachableError(url, f"no answer ({reason})") from None

    def get_json(self, path: str) -> Any:
        """The parsed JSON answer of a GET; typed errors for everything else."""
        return self.call_json("GET", path)

    def call_json(self, method: str, path: str, body: Any = None) -> Any:
        status, raw = self.request(method, path, body)
        return checked(self.url(path), status, raw)

    # What `scalefold flink` and the tests call (the REST API's names, Flink 2.3.0).

    def overview(self) -> dict[str, Any]:
        """`/overview`: the cluster's TaskManagers, slots and jobs, counted."""
        return dict(self.get_json("/overview"))

    def taskmanagers(self) -> list[dict[str, Any]]:
        """`/taskmanagers`: each registered TaskManager (`id` is its resource id)."""
        return list(self.get_json("/taskmanagers")["taskmanagers"])

    def jobs(self) -> list[dict[str, Any]]:
        """`/jobs/overview`: every job the JobManager knows, with `jid`, `name`, `state`."""
        return list(self.get_json("/jobs/overview")["jobs"])

    def job(self, jid: str) -> dict[str, Any]:
        return dict(self.get_json(f"/jobs/{jid}"))

    def rescale_history(self, jid: str) -> list[dict[str, Any]]:
        """`/jobs/:jid/rescales/history`, newest first (vertices and slots left empty)."""
        return list(self.get_json(f"/jobs/{jid}/rescales/history"))

    def rescale_details(self, jid: str, uuid: str) -> dict[str, Any]:
        return dict(self.get_json(f"/jobs/{jid}/rescales/details/{uuid}"))

    def requirements(self, jid: str) -> dict[str, Any]:
        return dict(self.get_json(f"/jobs/{jid}/resource-requirements"))

    def set_requirements(self, jid: str, bounds: dict[str, tuple[int, int]]) -> None:
        """PUT the job's per-vertex parallelism bounds, {vertex id: (lower, upper)}."""
        self.call_json("PUT", f"/jobs/{jid}/resource-requirements", requirements_body(bounds))

    def cancel(self, jid: str) -> None:
        self.call_json("PATCH", f"/jobs/{jid}?mode=cancel")

    def upload_jar(self, name: str, content: bytes) -> str:
        """POST /jars/upload; the id under which the JobManager keeps the jar."""
        content_type, body = multipart("jarfile", name, content)
        status, raw = self.send("POST", "/jars/upload", body, {"Content-Type": content_type})
        answer = checked(self.url("/jars/upload"), status, raw)
        # "filename" is the stored jar's path; its last part is the id /jars/:id takes
        return str(answer["filename"]).rsplit("/", 1)[-1]

    def run_jar(self, jar_id: str, arguments: list[str], entry_class: str | None = None) -> str:
        """POST /jars/:id/run with `arguments` for the program; the new job's id."""
        body: dict[str, Any] = {"programArgsList": arguments}
        if entry_class:
            body["entryClass"] = entry_class
        return str(self.call_json("POST", f"/jars/{jar_id}/run", body)["jobid"])


def tls_context(ca: Path | None) -> ssl.SSLContext:
    """A client context that verifies the server's certificate and name, against `ca`."""
    return ssl.create_default_context(cafile=str(ca) if ca is not None else None)


def tls_failure(error: ssl.SSLError, ca: Path | None) -> str:
    """One line: why the handshake failed, and what to check."""
    why = getattr(error, "verify_message", None) or error.reason or str(error)
    kind = (
        "certificate verify failed"
        if isinstance(error, ssl.SSLCertVerificationError)
        else "TLS error"
    )
    against = f"the CA in {ca}" if ca is not None else "the system's CAs (no --flink-ca given)"
    return f"TLS failed: {kind}: {why}; checked against {against}"


_CLUSTER = re.compile(r"^[A-Za-z0-9_-]+$")


def ca_arg(text: str) -> tuple[str | None, Path]:
    """`[NAME=]FILE` of `--flink-ca`: a PEM CA for cluster NAME, or for every cluster."""
    name, sep, path = text.partition("=")
    named = bool(sep) and bool(_CLUSTER.match(name))
    file = Path(path if named else text)
    if not file.is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: no CA file {file}")
    return (name if named else None), file


def ca_for(name: str, cas: list[tuple[str | None, Path]]) -> Path | None:
    """Cluster `name`'s CA among `--flink-ca`'s: its own, else the one for every cluster."""
    own = [path for cluster, path in cas if cluster == name]
    every = [path for cluster, path in cas if cluster is None]
    chosen = own or every
    return chosen[-1] if chosen else None


def requirements_body(bounds: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The body of PUT /jobs/:jid/resource-requirements for {vertex: (lower, upper)}."""
    return {
        vertex: {"parallelism": {"lowerBound": lower, "upperBound": upper}}
        for vertex, (lower, upper) in bounds.items()
    }


def multipart(field: str, filename: str, content: bytes) -> tuple[str, bytes]:
    """(Content-Type, body) of a multipart/form-data upload of one file, as /jars/upload
    takes it (urllib has no encoder of its own)."""
    boundary = f"scalefold-{uuid.uuid4().hex}"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        "Content-Type: application/x-java-archive\r\n\r\n"
    ).encode()
    return f"multipart/form-data; boundary={boundary}", (
        head + content + f"\r\n--{boundary}--\r\n".encode()
    )


def checked(url: str, status: int, raw: bytes) -> Any:
    """The parsed body of a 2xx answer; FlinkNotFoundError / FlinkBadAnswerError otherwise."""
    if status == 404:
        raise FlinkNotFoundError(url, flink_errors(raw))
    if not 200 <= status < 300:
        errors = flink_errors(raw)
        said = errors[0].splitlines()[0] if errors else raw[:200].decode("utf-8", "replace")
        raise FlinkBadAnswerError(url, status, raw, f"HTTP {status}: {said[:ERROR_BODY_LIMIT]}")
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as error:
        raise FlinkBadAnswerError(url, status, raw, f"the body is not JSON ({error})") from None
