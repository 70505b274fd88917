"""A small client of Flink's REST API (urllib, timeouts, typed errors).

Shared by everything that talks to a real Flink cluster (the bridge, `scalefold flink`,
later the actuator): the services may share only the contracts. Errors are typed by
what the caller does about them: an unreachable JobManager is retried, a 404 means the
thing is gone (or the feature is off), a bad answer (5xx, a body that is not JSON) is
recorded with what Flink said.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
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
    """One Flink cluster's REST endpoint, e.g. `http://127.0.0.1:8081`."""

    def __init__(self, base_url: str, timeout: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def get_raw(self, path: str) -> tuple[int, bytes]:
        """(status, body) of a GET; raises only FlinkUnreachableError."""
        return self.request("GET", path)

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """(status, body) of a call with an optional JSON body; FlinkUnreachableError if none."""
        url = self.url(path)
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return int(response.status), response.read()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read()
        except (TimeoutError, urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise FlinkUnreachableError(url, f"no answer ({reason})") from None

    def get_json(self, path: str) -> Any:
        """The parsed JSON answer of a GET; typed errors for everything else."""
        return self.call_json("GET", path)

    def call_json(self, method: str, path: str, body: Any = None) -> Any:
        status, raw = self.request(method, path, body)
        return checked(self.url(path), status, raw)


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
