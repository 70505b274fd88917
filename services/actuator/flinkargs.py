"""`scalefold actuator`'s Flink options: which real Flink clusters it commands, and how.

`--flink-rest NAME=URL`: the cluster's REST API; its jobs (`NAME.<Flink job id>`) get
SET_PARALLELISM through it, RAISE_COOLDOWN its refusal, and TaskManager commands a
REJECTED outcome (nothing here can start a TaskManager there).
`--flink-local NAME=DIR`: a local Flink cluster's directory (`local up --flink`'s
`.run/local/flink`): the REST URL read from DIR/rest.url at each command, and
TaskManagers started and stopped as its processes (launcher.LocalLauncher).
`--flink-max-taskmanagers [NAME=]N`: a PROVISION on local cluster NAME (without NAME:
every local one) starts TaskManagers only while fewer than N run (quota.py; default 5).
`--flink-ca [NAME=]FILE`: the PEM CA an https cluster's certificate must verify against
(a local cluster's own `rest-ca.pem` when none is named); else the system's CAs.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from services.actuator.quota import DEFAULT_LOCAL_MAX, FLAG
from services.contracts.flinkrest import ca_arg, ca_for

if TYPE_CHECKING:
    from services.actuator.flinkworker import Deliver, FlinkRouter

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
T = TypeVar("T")


def _named(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not _NAME.match(name) or not value:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not NAME={what} (a name of letters, digits, - or _: the prefix "
            "of its jobs' ids, as the bridge names them)"
        )
    return name, value


def rest_arg(text: str) -> tuple[str, str]:
    name, url = _named(text, "URL")
    if not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r}: the URL must start with http:// or https://")
    return name, url


def local_arg(text: str) -> tuple[str, str]:
    return _named(text, "DIR")


def max_arg(text: str) -> tuple[str | None, int]:
    """`[NAME=]N` of `--flink-max-taskmanagers`: a cap for cluster NAME, or for every one."""
    name, sep, number = text.rpartition("=")
    if (sep and not _NAME.match(name)) or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not [NAME=]N (N a whole number >= 0, NAME a --flink-local cluster)"
        )
    return (name if sep else None), int(number)


def max_for(name: str, given: list[tuple[str | None, int]]) -> int:
    """Cluster `name`'s cap: its own, else the one for every cluster, else the default."""
    own = [cap for cluster, cap in given if cluster == name]
    every = [cap for cluster, cap in given if cluster is None]
    chosen = own or every
    return chosen[-1] if chosen else DEFAULT_LOCAL_MAX


def add_arguments(parser: argparse.ArgumentParser) -> None:
    flink = parser.add_argument_group("real Flink clusters (docs/actuator.md, 'A real Flink')")
    flink.add_argument(
        "--flink-rest",
        metavar="NAME=URL",
        type=rest_arg,
        action="append",
        default=[],
        help="command the jobs NAME.<jid> of this Flink cluster through its REST API",
    )
    flink.add_argument(
        "--flink-local",
        metavar="NAME=DIR",
        type=local_arg,
        action="append",
        default=[],
        help="a local Flink cluster (e.g. .run/local/flink): REST and TaskManager processes",
    )
    flink.add_argument(
        FLAG,
        metavar="[NAME=]N",
        type=max_arg,
        action="append",
        default=[],
        help="a PROVISION starts TaskManagers on local cluster NAME (without NAME: on every "
        "--flink-local one) only while fewer than N run there, and is REJECTED when none "
        f"fits (default {DEFAULT_LOCAL_MAX}); those started by hand count, but are never "
        "refused (they are not the actuator's)",
    )
    flink.add_argument(
        "--flink-ca",
        metavar="[NAME=]FILE",
        type=ca_arg,
        action="append",
        default=[],
        help="a PEM CA that cluster NAME's (without NAME: every cluster's) https certificate "
        "must verify against; default: a local cluster's own, else the system's CAs",
    )


def router(args: argparse.Namespace, cache: Path, deliver: Deliver) -> FlinkRouter | None:
    """The Flink backends the options name (None: every job on the embedded cluster)."""
    from services.actuator.flinkbackend import FlinkBackend
    from services.actuator.flinkworker import FlinkRouter
    from services.actuator.launcher import LocalLauncher

    names = [name for name, _ in [*args.flink_rest, *args.flink_local]]
    if len(set(names)) != len(names):
        raise SystemExit("scalefold actuator: each Flink cluster needs a name of its own")
    local = {name for name, _ in args.flink_local}
    if unknown := sorted({n for n, _ in args.flink_max_taskmanagers if n and n not in local}):
        raise SystemExit(f"scalefold actuator: {FLAG} names no --flink-local cluster {unknown}")
    spare = getattr(args, "spare_slots", 0)  # `scalefold actuator --spare-slots`
    backends = [
        FlinkBackend(
            name, _fixed(url), None, ca=_fixed(ca_for(name, args.flink_ca)), spare_slots=spare
        )
        for name, url in args.flink_rest
    ]
    for name, directory in args.flink_local:
        cap = max_for(name, args.flink_max_taskmanagers)
        launcher = LocalLauncher(Path(directory).resolve(), cache, cap)
        given = ca_for(name, args.flink_ca)
        ca = _fixed(given) if given is not None else launcher.rest_ca
        backends.append(FlinkBackend(name, launcher.rest_url, launcher, ca=ca, spare_slots=spare))
    return FlinkRouter(backends, deliver) if backends else None


def _fixed(value: T) -> Callable[[], T]:
    return lambda: value
