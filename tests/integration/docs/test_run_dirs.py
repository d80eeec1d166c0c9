"""Every command in the docs and the README that trains names its run directory (`--out
runs/dates`), and every command that reads one names it the same way: a quick start copied twice
still works (a timestamped default, `runs/dates-<time>`, matched by `runs/dates-*`, breaks
`--model` once two runs exist)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SHELL = ("", "bash", "console", "sh", "shell")
COMMAND = r"(?:\.venv/bin/)?aiayn|torchrun|python3?|nohup|taskset|time"
"""What a command line's first word is (other lines of a block are prose or listings)."""
NAMES_RUN = r"--(?:out|resume)\b|--print-config|--help"
TRAINS = re.compile(r"\baiayn (?:train|lm train|classify train)\b")


def command_lines(text: str) -> list[str]:
    """The command lines of a page's code blocks (a `$ ` prompt dropped, comments kept, a
    command continued over lines with a trailing backslash joined into one)."""
    blocks = [body for language, body in BLOCK.findall(text) if language in SHELL]
    joined = [re.sub(r"\s*\\\n\s*", " ", block) for block in blocks]
    return [line.removeprefix("$ ") for block in joined for line in block.splitlines()]


def offending(text: str) -> list[str]:
    """Lines that train without naming a run directory, or name one by a pattern or a time."""
    bad = []
    for line in command_lines(text):
        command = line.split("#", 1)[0]
        words = command.split()
        if not words or not re.fullmatch(COMMAND, words[0]):
            continue  # prose or a listing inside a code block
        unnamed = TRAINS.search(command) and not re.search(NAMES_RUN, command)
        if unnamed or re.search(r"runs/[\w.-]*(?:\*|<time>)", command):
            bad.append(line)
    return bad


def test_every_training_command_names_its_run_directory() -> None:
    bad = {page.name: offending(page.read_text(encoding="utf-8")) for page in PAGES}
    bad = {name: lines for name, lines in bad.items() if lines}
    assert not bad, f"commands without a named run directory: {bad}"


def test_the_check_catches_a_planted_command() -> None:
    planted = (
        "```python\nx = 1\n```\n\n```bash\naiayn train\naiayn translate --model runs/dates-* --text x\n"
        "aiayn train --out runs/d\n"
        "aiayn train \\\n    --minutes 3 \\\n    --out runs/e\naiayn train \\\n    --minutes 3\n```\n"
    )
    assert offending(planted) == [
        "aiayn train", "aiayn translate --model runs/dates-* --text x", "aiayn train --minutes 3",
    ]
