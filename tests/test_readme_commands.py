"""The README's commands name things that exist, with options their parsers accept.

Every command the README shows must work as written after ``make run``. What each command
does is tested where the command lives; this reads the README itself, so that a renamed
option, a removed choice or a bench script that moved is caught where a reader meets it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)
SPAN = re.compile(r"`([^`]+)`")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
MAKE = re.compile(r"(?<![\w/.-])make ([a-z]+)")
BENCH = re.compile(r"bench/([a-z_]+\.py)((?:[^`\n]|\n(?!\n))*)")


def snippets(text: str) -> list[str]:
    """The README's code: each command of a fenced block (continuation lines joined) and
    each inline span (which may wrap onto the next line)."""
    out: list[str] = []
    for block in FENCE.findall(text):
        out.extend(line for line in block.replace("\\\n", " ").splitlines() if line.strip())
    out.extend(span.replace("\n", " ") for span in SPAN.findall(FENCE.sub("", text)))
    return out


def manage_commands(text: str) -> list[tuple[str, str]]:
    """Each ``manage.py NAME …`` the README shows, with the rest of its snippet (comments cut)."""
    found = []
    for snippet in snippets(text):
        for match in re.finditer(r"manage\.py ([a-z_]+)([^#]*)", snippet):
            found.append((match.group(1), match.group(2)))
    return found


def parser_of(name: str) -> argparse.ArgumentParser:
    return load_command_class(get_commands()[name], name).create_parser("manage.py", name)


def alternatives(rest: str, option: str) -> list[str]:
    """The ``a|b|c`` written after ``option`` in ``rest``, if any."""
    match = re.search(re.escape(option) + r"[ =]([A-Za-z0-9._-]+(?:\|[A-Za-z0-9._-]+)+)", rest)
    return match.group(1).split("|") if match else []


def test_the_readme_shows_the_commands_this_test_reads():
    commands = {name for name, _ in manage_commands(README.read_text())}

    # If the parsing broke, these would vanish and every check below would pass on nothing.
    assert {"import_inventory", "export_dataset", "recommend", "simulate_campaign"} <= commands


@pytest.mark.parametrize(
    ("name", "rest"), sorted(set(manage_commands(README.read_text()))), ids=lambda v: v[:40]
)
def test_each_manage_py_command_and_its_options_exist(name, rest):
    assert name in get_commands(), f"README shows manage.py {name}, which does not exist"
    parser = parser_of(name)
    known = parser._option_string_actions
    for option in OPTION.findall(rest):
        assert option in known, f"README shows manage.py {name} {option}, which it does not take"
        choices = known[option].choices
        for choice in alternatives(rest, option):
            if choices is not None:
                assert choice in choices, (
                    f"README shows manage.py {name} {option} {choice}; it takes "
                    f"{', '.join(map(str, choices))}"
                )


def test_each_make_target_the_readme_shows_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z]+):", makefile, re.M))
    shown = {t for s in snippets(README.read_text()) for t in MAKE.findall(s)}

    assert {"run", "test"} <= shown
    assert shown <= targets, f"README shows make {', '.join(sorted(shown - targets))}"


def test_each_bench_script_the_readme_names_exists_and_takes_its_options():
    text = README.read_text()
    named = {}
    for snippet in snippets(text):
        for script, rest in BENCH.findall(snippet):
            named.setdefault(script, set()).update(OPTION.findall(rest))
    # The table of bench scripts names each in a span of its own.
    named.update({s: named.get(s, set()) for s in re.findall(r"\| `([a-z_]+\.py)` \|", text)})

    assert "steering.py" in named
    for script, options in named.items():
        path = ROOT / "bench" / script
        assert path.exists(), f"README names bench/{script}, which does not exist"
        source = path.read_text()
        for option in options:
            assert f'"{option}"' in source, f"README shows bench/{script} {option}; it has none"


def test_the_uploader_takes_the_options_the_readme_shows():
    text = README.read_text()
    shown = [s for s in snippets(text) if s.startswith("python fieldcraft_upload.py")]
    source = (ROOT / "tools" / "fieldcraft_upload.py").read_text()

    assert shown
    for snippet in shown:
        for option in OPTION.findall(snippet):
            assert f'"{option}"' in source, f"README shows fieldcraft_upload.py {option}"
