"""Compile the scheduler core's logic with mypyc: `python -m services.scheduler.compile_core`.

`make core` runs it (so do `make demo`, `make up` and `make test`); it takes 13-17 s
here. mypyc compiles a copy of the sources in a temporary
directory, so the source tree never holds a build; the build goes to `--out`
(default `build/core/`), replacing the one there only when it is complete.
What the build is, and when the core uses it: services/scheduler/core/native.py.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from services.scheduler.core import native

_LAYOUT = Path("services") / "scheduler" / "core"


class CompileError(RuntimeError):
    """mypyc (or the C compiler under it) failed; the message carries its output."""


def build(out: Path) -> None:
    """Compile `native.COMPILED` into `out`, stamped with the sources' fingerprint."""
    fingerprint = native.fingerprint()  # before reading: a source edited meanwhile won't match
    with tempfile.TemporaryDirectory(prefix="scalefold-core-") as tmp:
        work = Path(tmp)
        shutil.copytree(
            native.SERVICES,
            work / "services",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", ".mypy_cache"),
        )
        shutil.copy2(native.SERVICES.parent / "pyproject.toml", work)  # mypy's settings
        modules = [str(_LAYOUT / name) for name in native.COMPILED]
        result = subprocess.run(
            [sys.executable, "-m", "mypyc", *modules],
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise CompileError(f"mypyc failed:\n{result.stdout}{result.stderr}")
        (group,) = (path for path in work.glob("*__mypyc.*") if path.suffix == ".so")
        staged = out.with_name(out.name + ".new")
        shutil.rmtree(staged, ignore_errors=True)
        for library in (work / _LAYOUT).rglob("*.so"):
            target = staged / library.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(library, target)
        shutil.copy2(group, staged / group.name)
        (staged / native.GROUP).write_text(group.name.split(".", 1)[0] + "\n")
        (staged / native.FINGERPRINT).write_text(fingerprint + "\n")
    shutil.rmtree(out, ignore_errors=True)
    staged.rename(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m services.scheduler.compile_core",
        description="Compile the scheduler core's logic modules with mypyc "
        "(services/scheduler/core/native.py says which, and when the core uses them).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=native.build_dir(),
        help="the build directory (default: %(default)s; the core looks there, "
        "or in $SCALEFOLD_CORE_BUILD)",
    )
    parser.add_argument(
        "--force", action="store_true", help="build even if the build matches the sources"
    )
    parser.add_argument(
        "--optional",
        action="store_true",
        help="if the build fails (no C compiler, say), say so and exit 0: the core runs "
        "interpreted (what `make demo` and `make up` do)",
    )
    args = parser.parse_args(argv)
    if not args.force and native.matches(args.out):
        print(f"{args.out}: up to date")
        return
    began = time.monotonic()
    print(
        f"compiling {len(native.COMPILED)} modules of the scheduler core with mypyc ...", flush=True
    )
    try:
        build(args.out)
    except CompileError as error:
        if not args.optional:
            raise SystemExit(str(error)) from None
        print(f"{error}\nthe scheduler core runs interpreted", file=sys.stderr)
        return
    print(f"built {args.out} in {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
