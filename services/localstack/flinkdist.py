"""Flink 2.3.0's jars and scalefold's sample job, fetched and built once into the cache.

No Flink installation is needed: PyPI's `apache-flink-libraries` wheel (329 MB) holds
flink-dist with the REST API and the web UI, log4j and BashJavaUtils. `pip download`
fetches it into `<cache>/flink-wheel/`, its `pyflink/lib` and `pyflink/bin` are unpacked
into `<cache>/apache-flink-libraries-<version>/`, and the sample job (deploy/flink/job)
is compiled with javac against flink-dist into `<cache>/flink-sample-job-<digest>/`. As
with the broker's jars (jars.py), a directory is complete only once its `.complete`
marker exists, so an interrupted set-up is redone, and a second call only looks.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from services.localstack.flinkconf import FLINK_VERSION
from services.localstack.jars import pom_property, resolve
from services.localstack.layout import PROJECT_ROOT

WHEEL = f"apache-flink-libraries=={FLINK_VERSION}"
JOB_SOURCES = PROJECT_ROOT / "deploy" / "flink" / "job"
JOB_MAIN = "scalefold.SampleJob"
WORKLOAD_SOURCES = PROJECT_ROOT / "deploy" / "flink" / "workload"
WORKLOAD_POM = WORKLOAD_SOURCES / "pom.xml"
WORKLOAD_MAIN = "scalefold.WorkloadJob"
PROVIDED = ("slf4j-api",)
"""Dependencies of the workload's connector that flink-dist's classpath has already
(Flink loads `org.slf4j` parent-first)."""
MARKER = ".complete"
UNPACKED = ("pyflink/lib/", "pyflink/bin/")
"""What of the wheel the processes use: the jars and BashJavaUtils (not the Python parts,
opt/ or plugins/)."""

Progress = Callable[[str], None]


class FlinkSetupError(RuntimeError):
    """The wheel could not be fetched or the job not built; says what to do."""


def flink_home(cache: Path, progress: Progress = print) -> Path:
    """The unpacked `pyflink` directory (lib/, bin/) of the pinned Flink, fetched once."""
    target = cache / f"apache-flink-libraries-{FLINK_VERSION}"
    if not (target / MARKER).exists():
        wheel = _download(cache / "flink-wheel", progress)
        progress(f"unpacking {wheel.name} into {target}")
        _complete(target, lambda staging: _unpack(wheel, staging))
    return target / "pyflink"


def dist_jar(home: Path) -> Path:
    return home / "lib" / f"flink-dist-{FLINK_VERSION}.jar"


def _download(directory: Path, progress: Progress) -> Path:
    """The wheel, downloaded by pip unless it is there already (pip checks that itself)."""
    found = sorted(directory.glob("apache_flink_libraries-*.whl"))
    if found:
        return found[-1]
    progress(f"downloading {WHEEL} from PyPI (329 MB, once; cached in {directory})")
    directory.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
    command += ["--disable-pip-version-check", "--dest", str(directory), WHEEL]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(directory.glob("apache_flink_libraries-*.whl"))
    if result.returncode != 0 or not found:
        said = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise FlinkSetupError(f"could not download {WHEEL}: {said[0]}")
    return found[-1]


def _unpack(wheel: Path, staging: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith(UNPACKED):
                archive.extract(member, staging)


def _complete(target: Path, fill: Callable[[Path], None]) -> None:
    """Fill a staging directory beside `target`, mark it complete, put it in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        fill(staging)
        (staging / MARKER).touch()
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def job_digest(sources: Path = JOB_SOURCES) -> str:
    """The first 8 hex digits of a SHA-256 over the job's sources (its pom too, if it has
    one) and the Flink version: a changed source gets a build of its own."""
    digest = hashlib.sha256(FLINK_VERSION.encode())
    for path in sorted([*sources.rglob("*.java"), *sources.rglob("pom.xml")]):
        digest.update(path.relative_to(sources).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:8]


def sample_job(cache: Path, home: Path, progress: Progress = print) -> Path:
    """The sample job's jar, compiled against flink-dist once per source digest."""
    target = cache / f"flink-sample-job-{job_digest()}"
    if not (target / MARKER).exists():
        _require(("javac", "jar"), "the sample job")
        progress(f"building the sample Flink job ({JOB_SOURCES}) into {target}")
        _complete(target, lambda staging: _build(home, staging))
    return target / "sample.jar"


def workload_job(cache: Path, home: Path, progress: Progress = print) -> Path:
    """The workload job's jar (deploy/flink/workload): compiled against flink-dist and
    Flink's Kafka connector, with the connector and the Kafka client packed in (a Flink
    job jar carries its connectors); once per source and pom digest."""
    target = cache / f"flink-workload-job-{job_digest(WORKLOAD_SOURCES)}"
    if not (target / MARKER).exists():
        _require(("javac",), "the workload job")
        version = pom_property(WORKLOAD_POM, "connector.version")
        libraries = resolve(WORKLOAD_POM, cache / f"flink-connector-kafka-{version}", {}, progress)
        packed = [jar for jar in libraries if not jar.name.startswith(PROVIDED)]
        progress(f"building the workload Flink job ({WORKLOAD_SOURCES}) into {target}")
        _complete(target, lambda staging: _build_fat(home, staging, packed))
    return target / "workload.jar"


def _build_fat(home: Path, staging: Path, libraries: list[Path]) -> None:
    """javac the workload's sources, then one jar of its classes and `libraries`' entries
    (the first of a name wins; signatures and module descriptors left out: they would
    not hold for the merged jar)."""
    classes = staging / "classes"
    _javac(WORKLOAD_SOURCES, [dist_jar(home), *libraries], classes)
    manifest = f"Manifest-Version: 1.0\nMain-Class: {WORKLOAD_MAIN}\n"
    seen = {"META-INF/MANIFEST.MF"}
    with zipfile.ZipFile(staging / "workload.jar", "w", zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest)
        for path in sorted(classes.rglob("*")):
            if path.is_file():
                name = path.relative_to(classes).as_posix()
                jar.write(path, name)
                seen.add(name)
        for library in libraries:
            with zipfile.ZipFile(library) as packed:
                for entry in packed.infolist():
                    name = entry.filename
                    if name in seen or entry.is_dir() or _unpackable(name):
                        continue
                    jar.writestr(entry, packed.read(entry))
                    seen.add(name)
    shutil.rmtree(classes)


def _unpackable(name: str) -> bool:
    """Entries a merged jar must not carry over: signatures, module descriptors."""
    upper = name.upper()
    signature = upper.startswith("META-INF/") and upper.endswith((".SF", ".DSA", ".RSA", ".EC"))
    return signature or name.endswith("module-info.class")


def _build(home: Path, staging: Path) -> None:
    classes = staging / "classes"
    _javac(JOB_SOURCES, [dist_jar(home)], classes)
    jar = str(staging / "sample.jar")
    _run(["jar", "--create", "--file", jar, "--main-class", JOB_MAIN, "-C", str(classes), "."])
    shutil.rmtree(classes)


def _require(tools: tuple[str, ...], job: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            raise FlinkSetupError(f"{tool} is not on PATH; a JDK 17 builds {job}")


def _javac(sources: Path, classpath: list[Path], classes: Path) -> None:
    """Compile every Java source under `sources` into `classes`."""
    files = [str(path) for path in sorted(sources.rglob("*.java"))]
    joined = ":".join(str(path) for path in classpath)
    _run(["javac", "-nowarn", "-d", str(classes), "-cp", joined, *files])


def _run(step: list[str]) -> None:
    result = subprocess.run(step, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise FlinkSetupError(f"{step[0]} failed: {(result.stderr or result.stdout)[-800:]}")
