"""Extra options for every JVM scalefold starts on this machine.

`SCALEFOLD_JVM_OPTIONS` (split as a shell would) is appended to the Kafka broker's, the
Flink JobManager's and TaskManagers', and the history's Spark driver's command lines. Unset,
nothing is added. `make test` sets `-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`: its JVMs
live a minute or two on two shared cores, where C2's compiler threads and parallel GC
cost more CPU than they save (measured in docs/testing.md); long-running services keep
the JVM's defaults.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

JVM_OPTIONS_ENV = "SCALEFOLD_JVM_OPTIONS"


def extra_jvm_options(environ: Mapping[str, str]) -> list[str]:
    """The options `environ` asks every started JVM to take (none when unset)."""
    return shlex.split(environ.get(JVM_OPTIONS_ENV, ""))
