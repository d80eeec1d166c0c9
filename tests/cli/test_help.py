"""Every command's help teaches: a description, at least one example, no `%%`; the top level
lists the commands in groups with the docs; a mistyped command or option gets a suggestion."""

import pytest

from aiayn.cli.help import GROUPS, subcommands
from aiayn.cli.main import build_parser, main

COMMANDS = [path for path, _ in subcommands(build_parser())]


def test_the_walk_finds_every_command():
    assert {"train", "lm train", "export ctranslate2", "plot curves", "average", "shapes"} <= set(COMMANDS)
    assert "demo" not in COMMANDS  # renamed: it shows shapes, `make demo` trains


@pytest.mark.parametrize("path", COMMANDS)
def test_every_command_has_a_description_and_an_example(path, capsys):
    assert main([*path.split(), "--help"]) == 0
    text = capsys.readouterr().out
    body = text.split("\n\n")
    assert len(body) >= 3 and not body[1].startswith(("positional arguments", "options")), \
        f"aiayn {path} --help has no description"
    examples = text.split("examples:\n", 1)
    assert len(examples) == 2 and f"  aiayn {path}" in examples[1], f"aiayn {path} --help has no example"
    assert "%%" not in text


def test_top_level_help_groups_the_commands_and_names_the_docs(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for title, names in GROUPS.items():
        block = text.split(f"{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in block.splitlines()] == names
    assert "Documentation: docs/index.md" in text


@pytest.mark.parametrize(("argv", "suggested"), [
    (["tarin"], "did you mean 'train'?"),
    (["demo"], "did you mean 'shapes'?"),
    (["lm", "generat"], "did you mean 'generate'?"),
    (["translate", "--model", "m", "--max-extra-lenn", "3"], "did you mean '--max-extra-len'"),
    (["average", "runs/x", "--out", "y", "--lats", "3"], "did you mean '--last'"),
])
def test_a_mistyped_command_or_option_gets_a_suggestion(argv, suggested, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert suggested in err and len(err.strip().splitlines()) == 1


def test_max_len_is_now_max_extra_len_and_the_old_spelling_still_parses():
    parser = build_parser()
    new = parser.parse_args(["translate", "--model", "m", "--max-extra-len", "7"])
    old = parser.parse_args(["translate", "--model", "m", "--max-len", "7"])
    assert new.max_len == old.max_len == 7


def test_print_config_prints_the_effective_config_and_trains_nothing(tmp_path, monkeypatch, capsys):
    import yaml

    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", "train.lr=0.002", "--minutes", "7", "--print-config"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["train"]["lr"] == 0.002 and config["train"]["max_minutes"] == 7
    assert config["data"]["task"] == "dates" and not (tmp_path / "runs").exists()


def test_completion_prints_the_shells_script_or_names_the_extra(capsys, monkeypatch):
    pytest.importorskip("argcomplete", reason="the 'completion' extra is not installed")
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "complete " in script and "aiayn" in script and "_ARGCOMPLETE" in script
    monkeypatch.setitem(__import__("sys").modules, "argcomplete", None)  # as if not installed
    assert main(["completion", "zsh"]) == 2
    assert "pip install 'aiayn[completion]'" in capsys.readouterr().err


def test_the_shell_gets_commands_and_options_completed(tmp_path):
    """What the completion script asks of `aiayn` (argcomplete's protocol: the line in COMP_LINE,
    the answer on file descriptor 8)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("argcomplete", reason="the 'completion' extra is not installed")
    answers = tmp_path / "answers"
    cases = {"aiayn tra": {"train", "translate"}, "aiayn translate --max-e": {"--max-extra-len"}}
    for line, expected in cases.items():
        env = {**os.environ, "_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": " ", "COMP_LINE": line,
               "COMP_POINT": str(len(line)), "COMP_TYPE": "9"}
        shell = f'"{sys.executable}" -m aiayn 8>"{answers}" 9>/dev/null'
        subprocess.run(["bash", "-c", shell], env=env, check=True, timeout=120)
        assert set(answers.read_text().split()) == expected, line
