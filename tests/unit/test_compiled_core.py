"""The compiled scheduler core (mypyc, services/scheduler/core/native.py) is the same core.

The tests use the source tree's `build/core` where it matches the sources (`make test`
has just made it: building again would take half a minute of CI's); otherwise a build is
made once for the session into a temporary directory (the tree's own is left alone). The
core's unit tests then run against it, and the bench's workload folds to byte-identical
states and effects compiled and interpreted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.scheduler import compile_core
from services.scheduler.core import native

ROOT = Path(__file__).resolve().parents[2]

# Folds the core bench's workload and prints the core's mode and a digest of every state
# stored and every effect, in order.
FOLD_DIGEST = """
import hashlib, msgspec
import services.scheduler.core as core
from bench.core_bench import workload
from services.scheduler.core.serde import dumps
digest, jobs = hashlib.sha256(), {}
for event in workload(200, 20_000):
    step = core.handle(jobs.get(event.job_id), event)
    jobs[event.job_id] = step.job
    digest.update(msgspec.json.encode(step.effects))
    if step.job is not None:
        digest.update(dumps(step.job))
print(core.MODE.split(" ")[0], type(core.handle).__name__, digest.hexdigest())
"""


@pytest.fixture(scope="session")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = native.build_dir()
    if native.matches(made):
        return made
    out = tmp_path_factory.mktemp("core") / "build"
    compile_core.build(out)
    return out


def _run(build: Path, mode: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCALEFOLD_CORE": mode, "SCALEFOLD_CORE_BUILD": str(build)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


def test_the_core_unit_tests_pass_on_the_compiled_core(build: Path, tmp_path: Path) -> None:
    probe = _run(build, "compiled", "-c", "import services.scheduler.core as c; print(c.MODE)")
    assert probe.stdout.strip() == "compiled", probe.stderr
    suite = _run(
        build,
        "compiled",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(tmp_path / "inner"),
        "tests/unit/scheduler",
    )
    assert suite.returncode == 0, suite.stdout[-5000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout.splitlines()[-1]


def test_compiled_and_interpreted_fold_the_same_events_to_the_same_bytes(build: Path) -> None:
    compiled = _run(build, "compiled", "-c", FOLD_DIGEST)
    interpreted = _run(build, "interpreted", "-c", FOLD_DIGEST)
    assert compiled.returncode == 0, compiled.stderr
    assert interpreted.returncode == 0, interpreted.stderr
    mode, kind, digest = compiled.stdout.split()
    assert (mode, kind) == ("compiled", "builtin_function_or_method")
    assert interpreted.stdout.split() == ["interpreted", "function", digest]


def test_a_matching_build_goes_first_on_the_core_path(
    build: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SCALEFOLD_CORE_BUILD", str(build))
    monkeypatch.setenv("SCALEFOLD_CORE", "auto")
    path = ["sources"]
    assert native.activate(path) == "compiled"
    assert path == [str(build / "services" / "scheduler" / "core"), "sources"]
    compile_core.main(["--out", str(build)])
    assert capsys.readouterr().out == f"{build}: up to date\n"


def test_a_build_older_than_the_sources_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / native.FINGERPRINT).write_text("0" * 64 + "\n")
    monkeypatch.setenv("SCALEFOLD_CORE_BUILD", str(stale))
    path = ["sources"]
    monkeypatch.setenv("SCALEFOLD_CORE", "auto")
    assert native.activate(path) == f"interpreted (the build in {stale} is older than the sources)"
    monkeypatch.setenv("SCALEFOLD_CORE", "compiled")
    with pytest.raises(native.CoreBuildError, match="older than the sources: run `make core`"):
        native.activate(path)
    assert path == ["sources"]


def test_without_a_build_or_when_told_the_core_runs_interpreted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCALEFOLD_CORE_BUILD", str(tmp_path / "none"))
    monkeypatch.setenv("SCALEFOLD_CORE", "auto")
    assert native.activate([]) == f"interpreted (no compiled build in {tmp_path / 'none'})"
    monkeypatch.setenv("SCALEFOLD_CORE", "interpreted")
    assert native.activate([]) == "interpreted (SCALEFOLD_CORE=interpreted)"
    monkeypatch.setenv("SCALEFOLD_CORE", "fast")
    with pytest.raises(native.CoreBuildError, match="expected auto, interpreted or compiled"):
        native.activate([])


def test_a_failed_build_stops_make_core_only_when_it_is_not_optional(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(native, "COMPILED", ("no_such_module.py",))
    out = tmp_path / "build"
    with pytest.raises(SystemExit, match="mypyc failed"):
        compile_core.main(["--out", str(out)])
    compile_core.main(["--out", str(out), "--optional"])
    assert "the scheduler core runs interpreted" in capsys.readouterr().err
    assert not out.exists()
