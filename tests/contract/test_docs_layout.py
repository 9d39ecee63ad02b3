"""README stays a user's guide: a short section per executable linking its report in docs/.

Fails when a console script has no README section or no docs/<method>.md link there, when a section
grows past its budget (a method's detail belongs in its report), when README grows past its total
budget, or when README or a report cites a docs/ or bench/ file that does not exist; and when a
command or verb has no help text, or its help carries results narrative (that goes to docs/).
"""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_MAX_LINES = 400  # CONVENTIONS: a user's guide of at most about 400 lines
SECTION_MAX_LINES = 25  # per method (and per shared block): what, claim, one pipeline, a small table
ENTRY_POINTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
SCRIPTS = sorted(ENTRY_POINTS)
# Words of a lab notebook, not of usage: figures belong in docs/<method>.md with their commands.
NARRATIVE = re.compile(r"\bsession\b|load average|\bREADME\b|\bmeasured on\b", re.IGNORECASE)
CITED_FILE = re.compile(r"\b(?:bench|docs)/[\w./-]+\.(?:py|sh|txt|md|csv|jsonl|json|toml|parquet)\b")


def sections(text: str) -> list[tuple[str, list[str]]]:
    """(heading, lines) for every `##` and `###` heading, each up to the next heading of any level."""
    found: list[tuple[str, list[str]]] = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = not in_code and re.match(r"#{2,3} ", line)
        if heading:
            found.append((line.lstrip("#").strip(), [line]))
        elif found:
            found[-1][1].append(line)
    return [(title, _trim(lines)) for title, lines in found]


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def names_in(title: str) -> set[str]:
    """`irt-sim / irt-fit` -> {irt-sim, irt-fit}: a heading may name several executables of one method."""
    return {part.strip(" `") for part in re.split(r"/|,| and ", title)}


def script_section(name: str) -> list[str]:
    matches = [lines for title, lines in sections(README.read_text()) if name in names_in(title)]
    assert matches, f"README has no `## {name}` section (a heading naming the executable)"
    return matches[0]


def test_readme_within_its_line_budget():
    count = len(README.read_text().splitlines())
    assert count <= README_MAX_LINES, f"README.md has {count} lines (budget {README_MAX_LINES}): move detail to docs/"


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_links_its_report(name):
    text = "\n".join(script_section(name))
    links = re.findall(r"\]\((docs/[\w.-]+\.md)\)", text)
    assert links, f"README's {name} section has no link to its report docs/<method>.md"
    for link in links:
        assert (REPO / link).is_file(), f"README's {name} section links {link}, which does not exist"


def test_every_section_within_its_budget():
    budgets = {"Executables": SECTION_MAX_LINES + len(SCRIPTS)}  # the table grows a row per script
    over = [
        f"{title!r}: {len(lines)} lines (budget {budgets.get(title, SECTION_MAX_LINES)})"
        for title, lines in sections(README.read_text())
        if len(lines) > budgets.get(title, SECTION_MAX_LINES)
    ]
    assert not over, "README sections over budget (move the detail to docs/<method>.md): " + "; ".join(over)


def test_every_report_is_linked_from_readme():
    readme = README.read_text()
    orphans = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"(docs/{p.name})" not in readme]
    assert not orphans, f"docs/ reports no README section links: {orphans}"


@pytest.mark.parametrize("doc", ["README.md", *(f"docs/{p.name}" for p in sorted((REPO / "docs").glob("*.md")))])
def test_cited_files_exist(doc):
    missing = sorted({m for m in CITED_FILE.findall((REPO / doc).read_text()) if not (REPO / m).exists()})
    assert not missing, f"{doc} cites files that do not exist: {missing}"


def commands(name: str):
    """(prog, click command) for a script and each of its verbs, loaded without running anything."""
    module, attr = ENTRY_POINTS[name].split(":")
    stack = [(name, getattr(importlib.import_module(module), attr))]
    while stack:
        prog, command = stack.pop()
        yield prog, command
        if isinstance(command, click.Group):
            stack += [(f"{prog} {verb}", sub) for verb, sub in command.commands.items()]


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_says_what_and_not_results(name):
    for prog, command in commands(name):
        text = command.help or ""
        assert text.strip(), f"`{prog} --help` has no description (is the docstring a real docstring?)"
        found = NARRATIVE.search(text)
        assert not found, f"`{prog} --help` carries results narrative ({found.group(0)!r}): move it to docs/"


@pytest.mark.parametrize(
    "folder", sorted(p.name for p in (REPO / "bench").iterdir() if (REPO / f"docs/{p.name}.md").is_file())
)
def test_every_bench_file_is_cited_by_its_report(folder):
    """A script or results file in bench/<method>/ that no report cites is a one-off: document or remove it."""
    cited = (REPO / f"docs/{folder}.md").read_text() + README.read_text()
    files = [p for p in sorted((REPO / "bench" / folder).iterdir()) if p.name != "__pycache__"]
    orphans = [p.name for p in files if f"bench/{folder}/{p.name}" not in cited]
    assert not orphans, f"bench/{folder}/ holds files docs/{folder}.md does not cite: {orphans}"
