"""Every relative link in README.md and docs/*.md reaches a file of the repository, and every
``#anchor`` a heading of that file (as GitHub derives anchors from headings)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def documents() -> list[Path]:
    """The README and every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to '-'."""
    text = FENCE.sub("", page.read_text())
    heads = re.findall(r"^#+\s+(.*)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that lead nowhere, as ``target`` strings."""
    bad = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md"
                                 and anchor not in anchors(dest)):
            bad.append(target)
    return bad


def test_every_relative_link_in_the_docs_resolves() -> None:
    pages = documents()
    assert len(pages) > 10, "the docs/ pages are missing"
    bad = {str(p.relative_to(REPO)): broken_links(p) for p in pages}
    assert not {page: links for page, links in bad.items() if links}


def test_the_check_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading, with `code`\n")
    page.write_text("[ok](there.md#a-heading-with-code) [gone](missing.md) "
                    "[no anchor](there.md#nowhere) [web](https://example.com)\n")
    assert broken_links(page) == ["missing.md", "there.md#nowhere"]
