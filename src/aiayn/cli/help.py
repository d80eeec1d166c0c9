"""What `--help` shows beyond each command's own options: the top level's commands in groups,
1-3 examples at the end of every command's help, and "did you mean" for a mistyped command or
option.

The examples live here, in one table (`EXAMPLES`), so that a command's module keeps to its
options; `add_examples` puts them into each parser's epilog once every command is registered,
and `tests/cli/test_help.py` checks that every command has a description and an example.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterator

DOCS = "docs/index.md in the source tree (`make docs` serves the site on http://127.0.0.1:8000/)"
"""Where the documentation is: the package ships no site, and there is no hosted one."""

GROUPS = {
    "train and data": ["train", "prepare", "lm", "classify", "average"],
    "translate and evaluate": ["translate", "evaluate", "score"],
    "inspect": ["shapes", "plot", "explore"],
    "deploy": ["export", "import", "serve", "completion", "cache"],
}
"""The top level's commands, in the groups `aiayn --help` lists them in."""

EXAMPLES = {
    "train": [
        "aiayn train --out runs/dates                   # the built-in dates task, about 3 minutes",
        "aiayn train configs/multi30k_de_en.yaml --out runs/m30k --set train.max_minutes=30",
        "aiayn train --train-src train.de --train-tgt train.en --minutes 60 --out runs/mine",
    ],
    "prepare": [
        "aiayn prepare configs/wmt14_en_de_base.yaml     # tokenizer + token store, once",
        "aiayn prepare configs/tatoeba_en_es.yaml --set data.vocab_size=16000",
    ],
    "lm": [
        "aiayn lm train --text notes.txt --out runs/notes",
        "aiayn lm generate --model runs/notes --text 'ROMEO:' --max-new-tokens 300",
    ],
    "lm train": [
        "aiayn lm train --out runs/shakespeare          # the built-in tiny-Shakespeare settings",
        "aiayn lm train --text novel.txt --tokenizer gpt2 --out runs/novel",
        "aiayn lm train --resume runs/novel",
    ],
    "lm generate": [
        "aiayn lm generate --model runs/shakespeare --text 'ROMEO:' --max-new-tokens 300",
        "aiayn lm generate --model runs/shakespeare --temperature 0.8 --top-p 0.9 --seed 1",
    ],
    "classify": [
        "aiayn classify train --out runs/brackets",
        "aiayn classify predict --model runs/brackets --text '(][)'",
    ],
    "classify train": [
        "aiayn classify train --out runs/brackets       # the built-in balanced-brackets task",
        "aiayn classify train --tsv train.tsv --valid-tsv valid.tsv --out runs/sentiment",
    ],
    "classify predict": [
        "aiayn classify predict --model runs/brackets --text '(][)'",
        "aiayn classify predict --model runs/sentiment --input texts.txt",
    ],
    "average": [
        "aiayn average runs/m30k --out runs/m30k-avg               # the 5 newest checkpoints",
        "aiayn average runs/m30k --tail 20% --out runs/m30k-avg    # those of the run's last 20%",
    ],
    "translate": [
        "aiayn translate --model runs/dates --text 'nov 21st 2026'",
        "aiayn translate --model runs/m30k --input test.de --output test.hyp --beam 4",
        "aiayn translate --model runs/dates --input dates.txt --format jsonl --nbest 4 --beam 4",
    ],
    "evaluate": [
        "aiayn evaluate --model runs/m30k --input test.de --ref test.en",
        "aiayn evaluate --model runs/m30k --input test.de --ref test.en --report report.html",
    ],
    "score": [
        "aiayn score --model runs/m30k --input test.de --ref test.en   # log P(ref | input) per line",
    ],
    "shapes": [
        "aiayn shapes                                  # the small preset",
        "aiayn shapes --preset base --vocab-size 37000  # the paper's base model",
    ],
    "plot": [
        "aiayn plot attention --model runs/dates --text '13th of may 1974' --out attention.png",
        "aiayn plot curves runs/dates runs/m30k --out curves.png",
    ],
    "plot attention": [
        "aiayn plot attention --model runs/dates --text '13th of may 1974' --out attention.png",
        "aiayn plot attention --model runs/dates --text '13th of may 1974' --kind cross --layer all "
        "--out cross.svg",
    ],
    "plot positional": ["aiayn plot positional --d-model 512 --max-len 100 --out positional.png"],
    "plot schedule": [
        "aiayn plot schedule --out schedule.png                  # the paper's d_model and warmup",
        "aiayn plot schedule --d-model 512 --warmup 4000 --d-model 256 --warmup 8000 --out schedules.svg",
    ],
    "plot curves": [
        "aiayn plot curves runs/dates --out curves.png",
        "aiayn plot curves runs/a runs/b --x minutes --out curves.svg",
    ],
    "explore": [
        "aiayn explore --model runs/dates --input dates.txt --out explorer.html",
        "aiayn explore --model runs/m30k --input test.de --ref test.en --out explorer.html",
    ],
    "export": [
        "aiayn export ctranslate2 --model runs/m30k --out runs/m30k-ct2",
        "aiayn export huggingface --model runs/m30k --out runs/m30k-hf",
    ],
    "export ctranslate2": [
        "aiayn export ctranslate2 --model runs/m30k --out runs/m30k-ct2",
        "aiayn export ctranslate2 --model runs/m30k --out runs/m30k-ct2-int8 --quantization int8",
    ],
    "export huggingface": ["aiayn export huggingface --model runs/m30k --out runs/m30k-hf"],
    "import": ["aiayn import huggingface Helsinki-NLP/opus-mt-de-en --out runs/opus-de-en"],
    "import huggingface": [
        "aiayn import huggingface Helsinki-NLP/opus-mt-de-en --out runs/opus-de-en",
        "aiayn import huggingface ./gpt2-dir --out runs/gpt2",
    ],
    "serve": [
        "aiayn serve --model runs/dates                  # http://127.0.0.1:8000/ and /docs",
        "aiayn serve --model runs/m30k --host 0.0.0.0 --port 8080 --api-key SECRET",
    ],
    "completion": [
        "aiayn completion bash > ~/.local/share/bash-completion/completions/aiayn",
        "aiayn completion zsh > ~/.zfunc/_aiayn",
    ],
    "cache": [
        "aiayn cache list                 # the kept compiled decoding steps, their sizes",
        "aiayn cache clear --stale        # remove those this machine cannot use",
    ],
    "cache list": ["aiayn cache list"],
    "cache clear": [
        "aiayn cache clear                # all kept steps: --compile builds them again",
        "aiayn cache clear --stale        # only those of another torch version, CPU or thread count",
    ],
}
"""Each command's examples, by its path below `aiayn` ('lm train')."""

DESCRIPTIONS = {
    "shapes": "Build an untrained model of a preset and run one forward pass on random token ids: "
    "prints its parameter count and the tensor shapes in and out (no training, no data).",
}
"""Descriptions of commands whose module gives none."""


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a text of several lines (the examples, the top level's
    groups) keeps its lines as written; a one-line text is wrapped as usual."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "\n".join(indent + line if line else "" for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def subcommands(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(path, parser) of every command below `parser`, depth first ('train', 'lm', 'lm train')."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                yield full, sub
                yield from subcommands(sub, full)


def add_examples(parser: argparse.ArgumentParser) -> None:
    """Every command's examples as its epilog (`EXAMPLES`), and descriptions from `DESCRIPTIONS`."""
    for path, sub in subcommands(parser):
        if path in DESCRIPTIONS and not sub.description:
            sub.description = DESCRIPTIONS[path]
        examples = EXAMPLES.get(path)
        if examples:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)


def group_commands(parser: argparse.ArgumentParser, subparsers: argparse._SubParsersAction) -> None:
    """The top level's description: its commands in `GROUPS`, each with its one-line help, and
    where the documentation is (the flat list argparse would print is suppressed)."""
    helps = {action.dest: action.help or "" for action in subparsers._choices_actions}
    width = max(len(name) for name in helps) + 2
    listed = [name for names in GROUPS.values() for name in names]
    missing = sorted(set(helps) - set(listed))
    if missing:  # a new command must be given a group
        raise RuntimeError(f"aiayn.cli.help.GROUPS lists no group for {', '.join(missing)}")
    lines = [parser.description or "", ""]
    for title, names in GROUPS.items():
        lines.append(f"{title}:")
        lines += [f"  {name:{width}}{helps[name]}" for name in names if name in helps]
        lines.append("")
    lines.append("Run 'aiayn COMMAND --help' for a command's options and examples.")
    lines.append(f"Documentation: {DOCS}")
    parser.description = "\n".join(lines)


def suggestion(word: str, choices: list[str]) -> str | None:
    """The choice closest to a mistyped `word`, if any is close (difflib's ratio >= 0.6)."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None


RENAMED = {"demo": "shapes"}
"""Commands that were renamed: the old name suggests the new one."""

INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


def with_suggestion(message: str, parser: argparse.ArgumentParser) -> str:
    """argparse's error `message`, with "did you mean ...?" for a mistyped choice (a command) or
    option (Python 3.14's `suggest_on_error` does the same; this Python may predate it)."""
    found = INVALID_CHOICE.search(message)
    if found:
        choices = re.findall(r"'([^']*)'", found["choices"])
        guess = RENAMED.get(found["word"]) if RENAMED.get(found["word"]) in choices else None
        guess = guess or suggestion(found["word"], choices)
        if guess is None:
            return message
        return message[: found.start("choices") - len(" (choose from ")] + \
            f"; did you mean '{guess}'? (choose from {found['choices']})"
    if message.startswith("unrecognized arguments: "):
        options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
        guesses = []
        for word in message.removeprefix("unrecognized arguments: ").split():
            if word.startswith("--"):
                guess = suggestion(word.split("=", 1)[0], options)
                if guess:
                    guesses.append(f"'{guess}' for '{word}'")
        return f"{message}; did you mean {', '.join(guesses)}?" if guesses else message
    return message
