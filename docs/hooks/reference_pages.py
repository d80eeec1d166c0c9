"""MkDocs hook: the reference pages, written at build time from the code that knows the answer,
so that they cannot drift from it:

- `reference/settings.md`: every setting of a run's config (the `data` settings of each task,
  `model`, `train`), read from the settings dataclasses (`aiayn.core.settings.setting_docs`);
- `reference/commands.md`: every command and option of `aiayn`, read from its argparse parsers
  (`aiayn.cli.main.build_parser`), with their descriptions and examples;
- `changelog.md`: the repository's CHANGELOG.md, so the site carries the release notes.

The Python API page (`reference/api.md`) is written by mkdocstrings from the docstrings."""

from __future__ import annotations

import argparse
import html
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

SETTINGS_PAGE = "reference/settings.md"
COMMANDS_PAGE = "reference/commands.md"
CHANGELOG_PAGE = "changelog.md"


def cell(text: object) -> str:
    """Text for a Markdown table cell: HTML and the table's own syntax escaped, `code` kept."""
    escaped = html.escape(str(text), quote=False).replace("|", "&#124;").replace("*", "&#42;")
    return " ".join(escaped.split())


def code(text: object) -> str:
    """`text` as inline code in a table cell: written as HTML, so that a backtick, a pipe or a star
    inside it stays itself."""
    escaped = html.escape(str(text), quote=False).replace("|", "&#124;").replace("*", "&#42;")
    return f"<code>{escaped}</code>"


# ------------------------------------------------------------------------------------ settings
def _setting_rows(
    cls: type, where: str, anchor: str, auto_extra: dict[str, str], not_keys: dict[str, str]
) -> list[str]:
    from aiayn.core.settings import REQUIRED, setting_docs

    rows = ["| key and type | default | what it is |", "|---|---|---|"]
    for doc in setting_docs(cls, where):
        name = doc.key.rpartition(".")[2]
        default = "required" if doc.default is REQUIRED else code(repr(doc.default))
        about = [cell(doc.help) or "—"]
        if name in not_keys:
            about.append(f"<em>{cell(not_keys[name])}</em>")
        if doc.allowed:
            about.append(f"<b>allowed:</b> {cell(doc.allowed)}")
        if doc.auto or name in auto_extra:
            chooses = auto_extra.get(name) or _auto_clause(doc.help)
            about.append("<b>takes <code>auto</code></b>" + (f": {cell(chooses)}" if chooses else ""))
        kind = doc.type + (" | 'auto'" if name in auto_extra else "")  # the config takes it, the class not
        rows.append(
            f"| <span id=\"{anchor}-{name}\"></span>{code(doc.key)}<br>{code(kind)} | {default} | "
            f"{'<br>'.join(about)} |"
        )
    return rows


AUTO_CLAUSE = re.compile(r"'auto'(?: is|:)\s*(.+?)(?:;|\)|$)")


def _auto_clause(help_text: str) -> str:
    """What a help text says 'auto' chooses ("...; 'auto': by the updates the run will reach")."""
    match = AUTO_CLAUSE.search(help_text)
    return match.group(1).strip() if match else ""


def _presets_table() -> list[str]:
    from aiayn.model.config import PRESETS, ModelConfig

    built = {name: ModelConfig.preset(name) for name in PRESETS}
    differ = [
        key for key in vars(built[PRESETS[0]])
        if len({repr(getattr(config, key)) for config in built.values()}) > 1
    ]
    rows = ["| `model.preset` | " + " | ".join(code(key) for key in differ) + " |"]
    rows.append("|---" * (len(differ) + 1) + "|")
    for name, config in built.items():
        rows.append(f"| {code(name)} | " + " | ".join(code(getattr(config, key)) for key in differ) + " |")
    return rows


def settings_page() -> str:
    from aiayn.model.config import ModelConfig
    from aiayn.tasks import DEFAULT_TASK, task_settings
    from aiayn.training.config import AUTO_MODEL_KEYS, TOKENIZER_IDS, ModelSection, TrainConfig

    lines = [
        "# Settings",
        "",
        "Every key a run's config takes (`aiayn train CONFIG`, `aiayn lm train`, `aiayn classify",
        "train`), and every `--set section.key=value`. This page is written from the settings",
        "dataclasses when the site is built (`aiayn.core.settings.setting_docs`), so it lists exactly what",
        "the code checks: a number outside its range or a string outside its choices is refused,",
        "naming the key.",
        "",
        "A config has three sections: `data` (whose keys depend on `data.task`), `model` and `train`.",
        "A setting that takes `auto` is chosen at start-up from the corpus and the machine's speed; how,",
        "and from what, is on [Settings that size themselves](../auto-settings.md).",
        "",
        "## data {#data}",
        "",
        f"The `data` section's keys depend on its `task` (`{DEFAULT_TASK}` when the config names none).",
    ]
    for settings in task_settings():
        names = ", ".join(f"`{name}`" for name in settings.task_names())
        lines += [
            "",
            f"### data: {settings.kind} tasks {{#data-{settings.kind}}}",
            "",
            f"Read by `data.task` {names}; trained by `{settings.command}`.",
            "",
            *_setting_rows(settings, "data", f"data-{settings.kind}", {}, {}),
        ]
    from_tokenizer = {name: "set by the tokenizer; not a config key" for name in
                      ("src_vocab_size", "tgt_vocab_size", *TOKENIZER_IDS)}
    lines += [
        "",
        "## model {#model}",
        "",
        "`model.preset` names the sizes to start from; any other key is a field of `ModelConfig`",
        "(`aiayn.model.ModelConfig`, checked by it) that replaces the preset's value. The defaults below",
        "are `ModelConfig`'s own (the paper's base model), which a preset changes:",
        "",
        *_presets_table(),
        "",
        *[
            row for row in _setting_rows(ModelSection, "model", "model", {}, {})
            if "model.overrides" not in row
        ],
        *_setting_rows(ModelConfig, "model", "model", AUTO_MODEL_KEYS, from_tokenizer)[2:],
        "",
        "## train {#train}",
        "",
        *_setting_rows(TrainConfig, "train", "train", {}, {}),
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ commands
def subcommands(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """`(name, parser, one-line summary)` of every command under `parser`, depth first, each once
    (an alias is not a second command)."""
    found: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {choice.dest: choice.help for choice in action._choices_actions}
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) in seen:
                    continue
                seen.add(id(child))
                summary = summaries.get(name) or _text(child, child.description or "").split("\n")[0]
                found.append((f"{prog} {name}", child, summary))
                found += subcommands(child, f"{prog} {name}")
    return found


def _text(parser: argparse.ArgumentParser, text: str) -> str:
    """A description or epilog as its author meant it: `%(prog)s` filled in, `%%` a percent sign
    (argparse itself unescapes `%%` only in a text that also names `%(prog)s`)."""
    return text % {"prog": parser.prog} if "%(prog)" in text or "%%" in text else text


def _option_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows: list[str] = []
    for group in parser._action_groups:
        actions = [
            action for action in group._group_actions
            if action.help is not argparse.SUPPRESS and not isinstance(action, argparse._SubParsersAction)
        ]
        if not actions:
            continue
        first = "option" if any(action.option_strings for action in actions) else "argument"
        rows += ["", f"**{cell(group.title)}**", "", f"| {first} | default | what it does |", "|---|---|---|"]
        for action in actions:
            flags = ", ".join(code(flag) for flag in action.option_strings) or code(action.dest)
            value = ""
            if action.choices is not None:
                value = "one of " + ", ".join(code(choice) for choice in action.choices)
            elif action.nargs != 0 and action.option_strings:  # a positional's name is its value
                metavar = formatter._get_default_metavar_for_optional(action)
                value = code(formatter._format_args(action, metavar))
            shown = action.default not in (None, argparse.SUPPRESS, False) and action.nargs != 0
            default = code(action.default) if shown else "—"
            help_text = cell(formatter._expand_help(action)) if action.help else "—"
            rows.append(f"| {flags}{'<br>' + value if value else ''} | {default} | {help_text} |")
    return rows


def _usage(parser: argparse.ArgumentParser) -> str:
    """The parser's usage without argparse's `usage: ` (its continuation lines moved left to match)."""
    prefix = "usage: "
    first, *rest = parser.format_usage().removeprefix(prefix).splitlines()
    return "\n".join([first, *(line.removeprefix(" " * len(prefix)) for line in rest)])


def _text_block(text: str) -> list[str]:
    return ["", "```text", text.strip("\n"), "```"]


def commands_page() -> str:
    from aiayn.cli.main import build_parser

    parser = build_parser()
    lines = [
        "# Commands",
        "",
        "Every command of `aiayn` and every option it takes, written from the command-line parsers",
        "when the site is built, with the examples they carry. `aiayn COMMAND --help` prints the",
        "same in a terminal.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    itself = ("aiayn", parser, "the program itself: its version, and the list of commands")
    commands = [itself, *subcommands(parser, "aiayn")]
    for name, _, summary in commands:
        lines.append(f"| [{code(name)}](#{name.replace(' ', '-')}) | {cell(summary)} |")
    for name, child, _ in commands:
        lines += ["", f"## {name} {{#{name.replace(' ', '-')}}}", ""]
        description = _text(child, child.description or "")
        if "\n " in description:  # laid out by hand (RawDescriptionHelpFormatter)
            lines += _text_block(description)
        elif description:
            lines.append(cell(description))
        lines += _text_block(_usage(child))
        lines += _option_rows(child)
        if child.epilog:
            lines += _text_block(_text(child, child.epilog))
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the hook
def on_files(files: Files, config) -> Files:
    root = Path(config["config_file_path"]).resolve().parent
    files.append(File.generated(config, SETTINGS_PAGE, content=settings_page()))
    files.append(File.generated(config, COMMANDS_PAGE, content=commands_page()))
    files.append(File.generated(config, CHANGELOG_PAGE, abs_src_path=str(root / "CHANGELOG.md")))
    return files
