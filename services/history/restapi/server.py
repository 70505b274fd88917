"""The HTTP shell: the standard library's ThreadingHTTPServer around `routes.route`.

Loopback by default. One thread per connection; the tables are read through the
stores' locks, so concurrent requests share one in-memory copy of each version.
"""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from services.history.restapi import pages
from services.history.restapi.routes import FLINK, SCALEFOLD, History, route
from services.history.restapi.store import SCALEFOLD_TABLES, FlinkSource, Source


def history_of(tables_dir: Path) -> History:
    """The sources of the history whose tables are in `tables_dir`."""
    return History(
        {SCALEFOLD: Source(tables_dir, SCALEFOLD_TABLES), FLINK: FlinkSource(tables_dir)}
    )


def handler_class(
    history: History, log: Callable[[str], None] | None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "scalefold-history"
        protocol_version = "HTTP/1.1"

        def _answer(self, head_only: bool) -> None:
            path, _, query = self.path.partition("?")
            started = time.perf_counter()
            try:
                answer = route(history, self.command, path, query, pages.page)
            except Exception as error:  # a bug must not kill the thread silently
                self._send(500, "application/json", b'{"errors":["internal error"]}', {}, head_only)
                if log is not None:
                    log(f"500 on {self.path}: {error!r}")
                raise
            self._send(answer.status, answer.content_type, answer.body, answer.headers, head_only)
            if log is not None:
                log(
                    f"{answer.status} {self.command} {self.path} {(time.perf_counter() - started) * 1000:.0f} ms"
                )

        def _send(
            self, status: int, kind: str, body: bytes, headers: object, head_only: bool
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in dict(headers).items():  # type: ignore[call-overload]
                self.send_header(name, value)
            self.end_headers()
            if not head_only:
                self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(head_only=False)

        def do_HEAD(self) -> None:
            self._answer(head_only=True)

        def do_POST(self) -> None:
            self._answer(head_only=False)

        def do_PUT(self) -> None:
            self._answer(head_only=False)

        def do_DELETE(self) -> None:
            self._answer(head_only=False)

        def log_message(self, format: str, *args: object) -> None:
            pass  # `_answer` logs one line per request when asked to

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that leaves, or fails the TLS handshake (it does not trust our CA),
        is its own business: no traceback in the log for it."""
        if isinstance(sys.exc_info()[1], ssl.SSLError | ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def make_server(
    tables_dir: Path,
    host: str,
    port: int,
    log: Callable[[str], None] | None = None,
    *,
    tls: tuple[Path, Path] | None = None,
) -> ThreadingHTTPServer:
    """A server bound to (host, port) (port 0: a free one); call `serve_forever` on it.
    With `tls` (PEM certificate chain, key) it speaks HTTPS only."""
    server = _Server((host, port), handler_class(history_of(tables_dir), log))
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        # The handshake happens in the connection's own thread (on its first read), so a
        # client that never finishes it holds no other request up.
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    host = server.server_address[0]
    text = host.decode() if isinstance(host, bytes) else str(host)
    scheme = "https" if isinstance(server.socket, ssl.SSLSocket) else "http"
    return f"{scheme}://{text}:{server.server_address[1]}"


def stderr_log(line: str) -> None:
    print(f"[history serve] {line}", file=sys.stderr, flush=True)
