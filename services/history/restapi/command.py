"""`scalefold history serve`: the flags' defaults and the handler; the server loads on use."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from services.history.paths import Layout

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8082
"""Beside Flink's REST port (8081), so a Flink client needs only the port changed."""


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """`--rest-cert` and `--rest-key`: serve HTTPS (the secured local stack's, signed by its CA)."""
    parser.add_argument(
        "--rest-cert",
        type=Path,
        metavar="FILE",
        help="serve the REST API and page over TLS with this PEM certificate (chain)",
    )
    parser.add_argument(
        "--rest-key", type=Path, metavar="FILE", help="the certificate's PEM private key"
    )


def tls_files(args: argparse.Namespace) -> tuple[Path, Path] | None:
    """(certificate, key) when both are given; None for plain HTTP; SystemExit if half."""
    cert, key = getattr(args, "rest_cert", None), getattr(args, "rest_key", None)
    if (cert is None) != (key is None):
        raise SystemExit("scalefold history: --rest-cert and --rest-key go together")
    return (cert, key) if cert is not None and key is not None else None


def serve(args: argparse.Namespace, _context: object) -> int:
    """Answer until Ctrl-C or SIGTERM."""
    from services.history.restapi.server import make_server, stderr_log, url_of

    tables = Layout(args.data_dir).tables
    log = stderr_log if getattr(args, "verbose", False) else None
    try:
        server = make_server(tables, args.host, args.port, log, tls=tls_files(args))
    except OSError as error:
        print(
            f"scalefold history serve: cannot listen on {args.host}:{args.port}: {error.strerror}",
            file=sys.stderr,
        )
        return 1

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    url = url_of(server)
    if args.port_file is not None:
        temporary = args.port_file.with_suffix(".tmp")
        temporary.write_text(f"{server.server_address[1]}\n")
        temporary.replace(args.port_file)  # a reader never sees half a port
    stderr_log(f"FLIP-487's rescale API at {url}/jobs, the web page at {url}/web/ ({tables})")
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
