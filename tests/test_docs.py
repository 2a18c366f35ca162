"""The README and docs/: short README with the two set-up commands, links that resolve, a configuration page
that is current, and no text that names the project's own history."""

from __future__ import annotations

import re
from pathlib import Path

from docs import gen_configuration as config_reference

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page: Path) -> list[str]:
    """Relative links and images on PAGE whose file (or, for a Markdown page, whose #anchor) does not exist."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks are not links
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", file.read_text(), flags=re.S), re.M)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(target)
    return broken


def test_readme_is_at_most_150_lines():
    lines = README.read_text().splitlines()
    assert 20 < len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150; the rest belongs in docs/)"


def test_readme_starts_with_the_two_set_up_commands():
    text = README.read_text()
    first_block = re.search(r"```bash\n(.*?)```", text, flags=re.S)
    assert first_block, "README.md has no bash block"
    assert text[:first_block.start()].count("\n") < 20, "the set-up commands are not near the top of README.md"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]


def test_every_relative_link_resolves():
    assert len(PAGES) >= 10 and any(LINK.search(page.read_text()) for page in PAGES)
    broken = {page.relative_to(ROOT).as_posix(): broken_links(page) for page in PAGES}
    broken = {page: links for page, links in broken.items() if links}
    assert not broken, f"links to files or anchors that do not exist: {broken}"


def test_the_link_check_finds_a_broken_link(tmp_path):
    (tmp_path / "a.md").write_text("# Title\n\n## A section\n\nSee [b](b.md), [c](a.md#a-section), ![p](p.png), "
                                   "[d](a.md#nothing) and [e](https://example.com).\n")
    assert broken_links(tmp_path / "a.md") == ["b.md", "p.png", "a.md#nothing"]


def test_configuration_page_is_current():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert "| `engine.decision_mode` |" in page
    assert page == config_reference.reference(), (
        f"docs/configuration.md is out of date with agent_runtime/config.py: run `{config_reference.COMMAND}`")


def test_every_config_field_has_a_description():
    from pydantic import BaseModel

    models = [config_reference.RunConfig] + [type(f.default) for f in config_reference.RunConfig.model_fields.values()
                                             if isinstance(f.default, BaseModel)]
    missing = [f"{m.__name__}.{name}" for m in models for name, f in m.model_fields.items() if not f.description]
    assert len(models) == 6 and not missing, f"fields without Field(description=...): {missing}"


def test_no_page_names_the_projects_own_history():
    """No issue numbers, dates or commit hashes: a figure names its machine and version instead."""
    found = {}
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        hits = re.findall(r"(?<![\w/&(])#\d+\b|\b20\d\d-\d\d-\d\d\b", text)  # issue numbers, dates
        hits += [word for word in re.findall(r"\b[0-9a-f]{7,40}\b", text)  # commit hashes: hex with digits and letters
                 if re.search(r"\d", word) and re.search("[a-f]", word)]
        if hits:
            found[page.relative_to(ROOT).as_posix()] = hits
    assert not found, found
