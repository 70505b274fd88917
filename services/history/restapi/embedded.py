"""The REST API inside `history run`: the local stack's and docker-compose's history serves it.

One server thread beside the streaming job, reading the tables that job commits (the
same files `history serve` reads), so a stack needs no process of its own for it.
Its base URL goes to DATA_DIR/rest.url, where `local status` finds it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

from services.history.paths import REST_URL, Layout
from services.history.restapi.server import make_server, url_of

URL_FILE = REST_URL


def start(
    data_dir: Path,
    host: str,
    port: int,
    say: Callable[[str], None],
    tls: tuple[Path, Path] | None = None,
) -> ThreadingHTTPServer:
    """Serve the API on (host, port) in a daemon thread (HTTPS with `tls`, the PEM
    certificate and key); its URL written to DATA_DIR/rest.url."""
    layout = Layout(data_dir)
    server = make_server(layout.tables, host, port, tls=tls)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.5}, name="rest-api", daemon=True
    ).start()
    url = url_of(server)
    temporary = layout.url_file(f"{URL_FILE}.tmp")
    temporary.write_text(url + "\n")
    temporary.replace(layout.url_file(URL_FILE))
    say(f"rescale REST API (FLIP-487) at {url}/jobs, web page at {url}/web/")
    return server


def stop(server: ThreadingHTTPServer, data_dir: Path) -> None:
    server.shutdown()
    server.server_close()
    Layout(data_dir).url_file(URL_FILE).unlink(missing_ok=True)
