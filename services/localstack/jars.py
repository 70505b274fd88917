"""Resolve the Kafka broker's and Spark's connector jars from Maven Central, once.

Each set is resolved by `mvn dependency:copy-dependencies` on a pom under
`deploy/local/` into `<cache>/<name>-<version>/`, which is complete only once
its `.complete` marker exists; a second call is a directory listing.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from services.localstack.layout import DEPLOY_LOCAL

KAFKA_POM = DEPLOY_LOCAL / "kafka" / "pom.xml"
SPARK_POM = DEPLOY_LOCAL / "spark" / "pom.xml"
MARKER = ".complete"
ATTEMPTS = 3

Progress = Callable[[str], None]


class JarResolutionError(RuntimeError):
    """Maven could not resolve a jar set; the message carries Maven's own error."""


def pom_property(pom: Path, name: str) -> str:
    """A `<properties>` value of one of our poms (the pinned Kafka version)."""
    match = re.search(rf"<{re.escape(name)}>([^<]+)</{re.escape(name)}>", pom.read_text())
    if match is None:
        raise JarResolutionError(f"{pom} has no property {name}")
    return match.group(1).strip()


def resolve(
    pom: Path, target: Path, properties: dict[str, str], progress: Progress = print
) -> list[Path]:
    """The jars of `pom`'s runtime dependencies, copied into `target` (cached)."""
    if (target / MARKER).exists():
        return sorted(target.glob("*.jar"))
    if shutil.which("mvn") is None:
        raise JarResolutionError("Maven (mvn) is not on PATH; it fetches the jars")
    progress(f"resolving {target.name} from Maven Central (once; cached in {target.parent})")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    command = [
        "mvn",
        "-B",
        "-q",
        "-U",  # do not trust a cached "not found" from an earlier flaky attempt
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
        *(f"-D{key}={value}" for key, value in properties.items()),
    ]
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode == 0:
            break
        error = _maven_error(result.stdout + result.stderr)
        progress(f"  attempt {attempt}/{ATTEMPTS} failed: {error}")
    else:
        shutil.rmtree(staging, ignore_errors=True)
        raise JarResolutionError(f"could not resolve {target.name}: {error}")
    (staging / MARKER).write_text("\n".join(sorted(p.name for p in staging.glob("*.jar"))))
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    jars = sorted(target.glob("*.jar"))
    progress(f"  {len(jars)} jars in {target}")
    return jars


def kafka_jars(cache: Path, progress: Progress = print) -> list[Path]:
    """The broker's classpath."""
    version = pom_property(KAFKA_POM, "kafka.version")
    return resolve(KAFKA_POM, cache / f"kafka-{version}", {}, progress)


def pom_digest(pom: Path) -> str:
    """The first 8 hex digits of the pom's SHA-256: a changed pom gets a cache of its own
    (the Dockerfile names its cache the same way)."""
    return hashlib.sha256(pom.read_bytes()).hexdigest()[:8]


def spark_connector_jars(cache: Path, progress: Progress = print) -> list[Path]:
    """Kafka and Avro connector and Delta Lake jars matching the installed pyspark,
    minus what it ships."""
    import pyspark

    version = pyspark.__version__
    target = cache / f"spark-connectors-{version}-{pom_digest(SPARK_POM)}"
    jars = resolve(SPARK_POM, target, {"spark.version": version}, progress)
    bundled = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return [jar for jar in jars if _artifact(jar.name) not in bundled]


def _artifact(jar_name: str) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`."""
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar_name)


def _maven_error(output: str) -> str:
    lines = [line for line in output.splitlines() if "ERROR" in line]
    return lines[0].strip() if lines else output.strip()[-500:]
