"""The scheduler core's logic, compiled to C by mypyc when a build matches the sources.

mypyc (the mypy project's compiler) turns the typed modules of `COMPILED` into C
extensions: the same code, run 1.25-1.4x faster in the core bench (docs/benchmarks.md). The state
classes (msgspec Structs) and the effects stay interpreted; msgspec builds them from
their annotations, which a compiled class does not keep. A method or property of
theirs runs interpreted, even when compiled code calls it, so what a step calls often
lives in compiled modules instead (guards, timeline, allocator). The enums are
compiled (enums.py): compiled code then reads a member as a constant.

`python -m services.scheduler.compile_core` (run by `make core`) builds into
`build/core/` beside the sources, with a fingerprint of every source the build read.
On import, the core uses the build only if that fingerprint is still the sources'
one, so an edited source is never shadowed by an older build: it runs interpreted,
and says why. `SCALEFOLD_CORE` chooses: `auto` (the default: the build when it
matches), `interpreted`, or `compiled` (refuse to start without a matching build).
`SCALEFOLD_CORE_BUILD` names another build directory.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

CORE = Path(__file__).resolve().parent
SERVICES = CORE.parents[1]

# The core's logic, as paths below services/scheduler/core: everything but the modules
# that define msgspec Structs (model, effects), the serializer (serde), the configuration
# reader (read once per job and cached), the replay driver and this module.
COMPILED = (
    "allocator.py",
    "behaviour.py",
    "enums.py",
    "fold.py",
    "guards.py",
    "history.py",
    "jobgraph.py",
    "policy.py",
    "recording.py",
    "resources.py",
    "restart.py",
    "scheduler.py",
    "structs.py",
    "stm.py",
    "timeline.py",
    "transitions.py",
    "states/__init__.py",
    "states/ending.py",
    "states/running.py",
    "states/setup.py",
)
# What a build's C code depends on: the core, and the contracts whose types it reads.
SOURCES = (CORE, SERVICES / "contracts")
FINGERPRINT = "FINGERPRINT"
GROUP = "GROUP"  # the name of the build's shared library (mypyc's group module)


class CoreBuildError(ImportError):
    """SCALEFOLD_CORE=compiled, and no build matches the sources."""


def build_dir() -> Path:
    """Where `make core` builds: `build/core` at the top of the source tree."""
    configured = os.environ.get("SCALEFOLD_CORE_BUILD")
    return Path(configured) if configured else SERVICES.parent / "build" / "core"


def fingerprint() -> str:
    """The sources a build is made from, with the interpreter's ABI: sha256, hex."""
    digest = hashlib.sha256()
    digest.update(
        f"{sys.implementation.cache_tag} {sysconfig.get_config_var('EXT_SUFFIX')}".encode()
    )
    for root in SOURCES:
        for path in sorted(root.rglob("*.py")):
            digest.update(str(path.relative_to(SERVICES)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def activate(package_path: list[str]) -> str:
    """Put a matching build ahead of the sources on the core's `__path__`; say which runs.

    Returns "compiled" or "interpreted (<why>)".
    """
    mode = os.environ.get("SCALEFOLD_CORE", "auto")
    if mode not in ("auto", "interpreted", "compiled"):
        raise CoreBuildError(f"SCALEFOLD_CORE={mode!r}: expected auto, interpreted or compiled")
    if mode == "interpreted":
        return "interpreted (SCALEFOLD_CORE=interpreted)"
    build = build_dir()
    why = _mismatch(build)
    if why is not None:
        if mode == "compiled":
            raise CoreBuildError(f"SCALEFOLD_CORE=compiled, but {why}: run `make core`")
        return f"interpreted ({why})"
    _load_group(build)
    package_path.insert(0, str(build / "services" / "scheduler" / "core"))
    return "compiled"


def matches(build: Path) -> bool:
    """Whether `build` holds a build of the sources as they are."""
    return _mismatch(build) is None


def _mismatch(build: Path) -> str | None:
    try:
        built = (build / FINGERPRINT).read_text().strip()
    except OSError:
        return f"no compiled build in {build}"
    if built != fingerprint():
        return f"the build in {build} is older than the sources"
    return None


def _load_group(build: Path) -> None:
    """Import the build's shared library, which its modules import by a top-level name."""
    name = (build / GROUP).read_text().strip()
    if name in sys.modules:
        return
    (library,) = build.glob(f"{name}.*")
    spec = importlib.util.spec_from_file_location(name, library)
    if spec is None or spec.loader is None:
        raise CoreBuildError(f"cannot load {library}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
