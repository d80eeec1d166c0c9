"""`aiayn --help`, `aiayn CMD --help` for every command and subcommand, `--version` and a
usage error parse without importing torch (nor does `import aiayn.core.errors`); a command module
that imports torch at its top is caught (a planted one)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = r"""
import argparse, contextlib, io, json, sys

import aiayn.core.errors  # must not load torch
errors_alone = "torch" in sys.modules

import aiayn.cli
from aiayn.cli import main as cli

if len(sys.argv) > 1:  # a planted command module, in this directory (with a stand-in torch)
    sys.path.insert(0, sys.argv[1])
    aiayn.cli.__path__.append(sys.argv[1])
    cli.COMMAND_MODULES.append("planted")


def commands(parser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield [*prefix, name]
                yield from commands(sub, (*prefix, name))


argvs = [["--help"], ["--version"], *([*c, "--help"] for c in commands(cli.build_parser()))]
argvs += [["translate", "--no-such-flag"], ["evaluate"]]  # usage errors
codes = {}
for argv in argvs:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codes[" ".join(argv)] = cli.main(argv)
print(json.dumps({"errors_alone": errors_alone, "torch": "torch" in sys.modules, "codes": codes}))
"""

PLANTED = '''
import torch  # the violation: torch at the top of a command module


def register(subparsers):
    subparsers.add_parser("planted").set_defaults(func=lambda args: 0)
'''


def parse_all(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_help_version_and_usage_errors_do_not_import_torch(tmp_path):
    result = parse_all()
    assert not result["errors_alone"]
    assert not result["torch"]
    codes = result["codes"]
    for command in ("train", "translate", "evaluate", "serve", "lm train", "lm generate", "plot attention"):
        assert codes[f"{command} --help"] == 0
    assert {code for argv, code in codes.items() if argv.endswith("--help")} == {0}
    assert codes["translate --no-such-flag"] == 2 and codes["evaluate"] == 2
    # the check sees a command module that imports torch at its top
    (tmp_path / "planted.py").write_text(PLANTED, encoding="utf-8")
    (tmp_path / "torch.py").write_text("# a stand-in: the check looks for the name\n", encoding="utf-8")
    planted = parse_all(str(tmp_path))
    assert planted["codes"]["planted --help"] == 0 and planted["torch"]


def test_the_aiayn_program_prints_help_without_importing_torch():
    argv = [sys.executable, "-X", "importtime", "-m", "aiayn", "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage: aiayn" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "aiayn.cli.main" in imported and "torch" not in imported
