"""The reference pages, written from the code when the site is built, list all of it: the settings
page every field of `ModelConfig`, of the `train` section and of each task's `data` settings (and
nothing else); the commands page every option of every command; the API page the calls a user
makes. Each check compares the built HTML with the code, and is shown to catch a planted gap."""

from __future__ import annotations

import argparse
import dataclasses
import html
import itertools
import re
from pathlib import Path

from aiayn.cli.main import build_parser
from aiayn.model import ModelConfig
from aiayn.tasks import task_settings
from aiayn.training.config import TrainConfig

HEADING = re.compile(r'<h[23] id="([^"]+)"')
SETTING = re.compile(r'<span id="[^"]+"></span><code>([\w.]+)</code>')
CODE = re.compile(r"<code>([^<]+)</code>")


def sections(page: str) -> dict[str, str]:
    """The page's h2/h3 sections: heading id -> its HTML up to the next heading."""
    marks = [(m.start(), m.group(1)) for m in HEADING.finditer(page)] + [(len(page), "")]
    return {name: page[start:end] for (start, name), (end, _) in itertools.pairwise(marks)}


def expected_settings() -> dict[str, set[str]]:
    """Section id on the settings page -> the keys the dataclasses declare for it."""
    wanted = {
        f"data-{settings.kind}": {f"data.{f.name}" for f in dataclasses.fields(settings)}
        for settings in task_settings()
    }
    wanted["model"] = {"model.preset"} | {f"model.{f.name}" for f in dataclasses.fields(ModelConfig)}
    wanted["train"] = {f"train.{f.name}" for f in dataclasses.fields(TrainConfig)}
    return wanted


def settings_gaps(page: str) -> list[str]:
    """What the settings page lacks or lists beyond the dataclasses, each as `section: key`."""
    found = sections(page)
    gaps = []
    for section, keys in expected_settings().items():
        listed = set(SETTING.findall(found.get(section, "")))
        gaps += [f"{section}: missing {key}" for key in sorted(keys - listed)]
        gaps += [f"{section}: not a setting {key}" for key in sorted(listed - keys)]
    return gaps


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command of `aiayn` (`aiayn lm train`...) by its page anchor, from the parsers."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prog: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if child not in found.values():
                        found[f"{prog}-{name}"] = child
                        walk(child, f"{prog}-{name}")

    found["aiayn"] = build_parser()
    walk(found["aiayn"], "aiayn")
    return found


def option_gaps(page: str) -> list[str]:
    """The commands, and the options of each, that the commands page does not list."""
    found = sections(page)
    gaps = []
    for anchor, parser in commands().items():
        if anchor not in found:
            gaps.append(f"no section {anchor}")
            continue
        listed = {html.unescape(text) for text in CODE.findall(found[anchor])}
        for action in parser._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
                continue
            for name in action.option_strings or [action.dest]:
                if name not in listed:
                    gaps.append(f"{anchor}: {name}")
    return gaps


def test_the_settings_page_lists_every_field_of_every_section(built_site: Path) -> None:
    page = (built_site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert len(expected_settings()) == len(task_settings()) + 2
    assert settings_gaps(page) == []
    train = sections(page)["train"]
    assert "a finite number &gt; 0" in train and "train.warmup" in train  # ranges and help shown
    assert "takes <code>auto</code></b>: by the updates the run will reach" in train
    assert "by the epochs the run will reach" in sections(page)["model"]  # model.dropout: auto
    said = re.findall(r"takes <code>auto</code></b>(:?)", page)
    assert len(said) >= 10 and "" not in said, "a setting takes 'auto' without saying what it chooses"


def test_the_settings_check_sees_a_missing_and_a_stray_key(built_site: Path) -> None:
    page = (built_site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    planted = page.replace("<code>train.label_smoothing</code>", "<code>train.label_smoothin</code>")
    assert settings_gaps(planted) == [
        "train: missing train.label_smoothing", "train: not a setting train.label_smoothin",
    ]


def test_the_commands_page_lists_every_option_of_every_command(built_site: Path) -> None:
    page = (built_site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    assert {"aiayn-train", "aiayn-lm-generate", "aiayn-export-ctranslate2", "aiayn-serve"} <= set(commands())
    assert option_gaps(page) == []


def test_the_commands_check_sees_a_missing_option_and_command(built_site: Path) -> None:
    page = (built_site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    translate = sections(page)["aiayn-translate"]
    planted = page.replace(translate, translate.replace("<code>--beam</code>", "<code>--bean</code>"))
    planted = planted.replace('id="aiayn-serve"', 'id="aiayn-serf"')
    assert option_gaps(planted) == ["aiayn-translate: --beam", "no section aiayn-serve"]


def test_the_api_page_documents_the_calls_a_user_makes(built_site: Path) -> None:
    page = (built_site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in (
        "aiayn.inference.load", "aiayn.inference.Translator.translate",
        "aiayn.inference.Translator.translate_nbest", "aiayn.inference.Translator.score",
        "aiayn.inference.Generator.generate", "aiayn.model.Transformer",
        "aiayn.model.DecoderOnlyLM", "aiayn.model.EncoderOnly", "aiayn.model.ModelConfig", "aiayn.paper.load",
        "aiayn.paper.attention",
    ):
        assert f'id="{name}"' in page, f"the API page does not document {name}"
    # the docstrings themselves, not only the names
    assert "log P(target | source)" in html.unescape(page)
