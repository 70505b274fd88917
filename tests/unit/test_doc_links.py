"""Every relative link and image in README.md and docs/*.md points at something that exists.

Pages move (the README was split into docs/); this keeps a move from leaving a
link behind. A link to a Markdown heading (`page.md#section`) must name a
heading of that page, with GitHub's anchor rules.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


def links(page: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return [target for target in LINK.findall(text) if not EXTERNAL.match(target)]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        base, n = slug, 1
        while slug in found:
            slug, n = f"{base}-{n}", n + 1
        found.add(slug)
    return found


def broken(page: Path) -> list[str]:
    problems = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            problems.append(f"{target}: no such file {os.path.relpath(resolved, page.parent)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: {resolved.name} has no heading #{anchor}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_exists(page: Path) -> None:
    assert broken(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading, with punctuation!\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md#a-heading-with-punctuation) ![gone](img/missing.png)\n"
        "[bad anchor](there.md#nowhere) [web](https://example.org/x.md)\n"
        "```\n[in code](not-checked.md)\n```\n"
    )
    problems = broken(page)
    assert len(problems) == 2
    assert "img/missing.png: no such file" in problems[0]
    assert "there.md has no heading #nowhere" in problems[1]
