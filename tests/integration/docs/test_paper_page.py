"""Every command of docs/paper.md runs, those that write a file twice (a reader who runs it again
is not stopped by the first run's files), against the trained `dates` model of the test session, so
the reading path cannot go stale; every section of the paper it promises has a command; and the
reference and engine code it names exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from aiayn.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "paper.md"
MODEL = "runs/dates"  # the page's model directory; the test puts the trained fixture in its place
SECTIONS = ["3.1", "3.2.1", "3.2.2", "3.2.3", "3.3", "3.4", "3.5", "4",
            "5.1", "5.2", "5.3", "5.4", "6.1", "6.2"]
CONSOLE = re.compile(r"^```console\n(.*?)^```", re.MULTILINE | re.DOTALL)


def sections(text: str) -> dict[str, str]:
    """The page's `## N.N title` sections: number -> body."""
    parts = re.split(r"^## (\d+(?:\.\d+)*) .*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def commands(text: str) -> list[str]:
    """The commands of the ```console blocks: a line starting `$ `, with the lines that continue it
    (after a trailing backslash, or inside a quote still open); the other lines are its output."""
    found: list[str] = []
    for block in CONSOLE.findall(text):
        open_command: str | None = None
        for line in block.splitlines():
            if open_command is None:
                if not line.startswith("$ "):
                    continue  # output
                open_command = line[2:]
            else:
                open_command += "\n" + line
            if open_command.endswith("\\"):
                open_command = open_command[:-1]
                continue
            try:
                shlex.split(open_command)
            except ValueError:  # a quote still open: the command goes on
                continue
            found.append(open_command)
            open_command = None
        assert open_command is None, f"a command of docs/paper.md never ends: {open_command}"
    return found


def test_every_section_of_the_reading_path_has_a_command() -> None:
    found = sections(PAGE.read_text(encoding="utf-8"))
    assert list(found) == SECTIONS
    for number, body in found.items():
        assert commands(body), f"section {number} of docs/paper.md has no command to run"
        for name in ("**Reference:**", "**Engine:**", "**See it:**"):
            assert name in body, f"section {number} of docs/paper.md lacks {name}"


def test_the_extraction_sees_a_planted_command() -> None:
    planted = "## 9.9 Planted\n\n```console\n$ aiayn translate --model runs/dates --text x\n```\n"
    assert commands(planted) == ["aiayn translate --model runs/dates --text x"]
    assert list(sections(planted)) == ["9.9"]
    assert commands(sections(planted)["9.9"]) == commands(planted)
    broken = '```console\n$ aiayn translate \\\n    --text x\nout put\n$ python -c "\nprint(1)\n"\n1\n```\n'
    assert [shlex.split(c) for c in commands(broken)] == [
        ["aiayn", "translate", "--text", "x"], ["python", "-c", "\nprint(1)\n"]]


def test_the_engine_files_it_names_exist() -> None:
    named = set(re.findall(r"`((?:model|data|training|decoding|runtime)/[\w/]+\.py)`", PAGE.read_text()))
    assert "model/attention.py" in named
    missing = sorted(path for path in named if not (ROOT / "src" / "aiayn" / path).is_file())
    assert not missing, f"docs/paper.md names engine files that do not exist: {missing}"


def test_the_reference_names_it_gives_exist() -> None:
    paper = pytest.importorskip("aiayn.paper")
    text = PAGE.read_text(encoding="utf-8")
    names = set()
    for bullet in re.findall(r"^- \*\*Reference:\*\*(.*?)(?=^- \*\*)", text, re.MULTILINE | re.DOTALL):
        found = re.findall(r"`((?:aiayn\.paper\.)?[A-Za-z_]\w*)`", bullet)
        names |= {name.removeprefix("aiayn.paper.") for name in found}
    assert "attention" in names
    missing = sorted(name for name in names if not hasattr(paper, name))
    assert not missing, f"docs/paper.md names aiayn.paper code that does not exist: {missing}"


def run_in_process(command: str) -> int:
    """Run a page command in this process, as its shell would: `python -c CODE` executes CODE,
    `aiayn ARGS` calls the CLI's `main(ARGS)`. (In process, the commands share one import of
    torch and aiayn instead of paying one each.) Returns the exit status."""
    words = shlex.split(command)
    if words[:2] == ["python", "-c"] and len(words) == 3:
        exec(compile(words[2], "<python -c>", "exec"), {"__name__": "__main__"})
        return 0
    if words[0] == "aiayn":
        return main(words[1:])
    if words[0] == "python" and words[1].startswith("benchmarks/"):
        import runpy
        import sys

        saved, saved_path = sys.argv, list(sys.path)
        script = ROOT / words[1]
        # As `python SCRIPT` does: the script's folder first on the path (a benchmark imports
        # its neighbours, e.g. benchmarks/timing.py).
        sys.argv, sys.path[:0] = [str(script), *words[2:]], [str(script.parent)]
        try:
            runpy.run_path(str(script), run_name="__main__")
        finally:
            sys.argv, sys.path[:] = saved, saved_path
        return 0
    raise AssertionError(f"docs/paper.md: a command the test cannot run: {command}")


def test_the_runner_reports_a_broken_command(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert run_in_process(f"aiayn translate --model {tmp_path / 'missing'} --text x") != 0
    assert "missing" in capsys.readouterr().err
    with pytest.raises(ZeroDivisionError):
        run_in_process('python -c "print(1 / 0)"')
    with pytest.raises(AssertionError, match="cannot run"):
        run_in_process("ls")


def files_under(directory: Path) -> dict[str, tuple[int, int]]:
    """What is in `directory`: path -> (size, modification time in ns), to see what a command wrote."""
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(directory.rglob("*")) if path.is_file()}


def test_every_command_of_the_page_runs(
    dates_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    listed = commands(PAGE.read_text(encoding="utf-8"))
    assert len(listed) >= len(SECTIONS)
    monkeypatch.chdir(tmp_path)  # the commands write their pictures into the current directory
    failed = []
    for command in listed:
        assert "--help" not in command, f"not a real command: {command}"
        before = files_under(tmp_path)
        for attempt in ("first", "second"):  # a page copied twice still works: nothing in the way
            if attempt == "second" and files_under(tmp_path) == before:
                break  # it wrote nothing: there is nothing in its way the second time
            try:
                status: int | str = run_in_process(command.replace(MODEL, str(dates_run)))
            except Exception as error:  # a `python -c` snippet that raises
                status = repr(error)
            out, err = capsys.readouterr()
            words = shlex.split(command)
            written = words[words.index("--out") + 1] if "--out" in words else None
            if status != 0 or not out.strip():
                failed.append(f"{command} ({attempt} run)\n  exit {status}: {err.strip()[-500:]}")
            elif written is not None and not (tmp_path / written).stat().st_size:
                failed.append(f"{command} ({attempt} run)\n  wrote an empty {written}")
    assert not failed, "commands of docs/paper.md that failed:\n" + "\n".join(failed)
