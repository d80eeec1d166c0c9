"""CITATION.cff is valid Citation File Format 1.2.0 (checked against the CFF schema, committed under
tests/fixtures/citation_cff/ so that nothing is downloaded), names the authors as LICENSE does and
the version pyproject.toml gives, and cites the paper; CHANGELOG.md follows Keep a Changelog."""

from __future__ import annotations

import copy
import datetime
import json
import re
from typing import Any

import jsonschema
import yaml

from .conftest import ROOT

SCHEMA = ROOT / "tests" / "fixtures" / "citation_cff" / "schema-1.2.0.json"


def as_json(value: Any) -> Any:
    """A YAML document as JSON sees it (YAML reads `2017-12-04` as a date; CFF wants the string)."""
    if isinstance(value, dict):
        return {key: as_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return value.isoformat() if isinstance(value, datetime.date) else value


def citation_errors(citation: dict[str, Any]) -> list[str]:
    """What the CFF 1.2.0 schema finds wrong with a citation, each as `path: message`."""
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    return [f"{'/'.join(map(str, error.path))}: {error.message}" for error in validator.iter_errors(citation)]


def project(key: str) -> str:
    """A string of pyproject.toml's [project] table (`version`, `license`)."""
    return re.search(rf'^{key} = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)


def citation() -> dict[str, Any]:
    return as_json(yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8")))


def test_the_citation_file_is_valid_and_agrees_with_the_project() -> None:
    cff = citation()
    assert citation_errors(cff) == []
    holder = re.search(r"Copyright \(c\) \d{4} (.+)", (ROOT / "LICENSE").read_text()).group(1).strip()
    assert cff["authors"] == [{"name": holder}] and holder == "The aiayn developers"
    assert cff["version"] == project("version") and cff["license"] == project("license")
    (paper,) = [ref for ref in cff["references"] if ref["title"] == "Attention Is All You Need"]
    assert paper["year"] == 2017 and paper["authors"][0]["family-names"] == "Vaswani"


def test_the_schema_refuses_a_broken_citation() -> None:
    broken = copy.deepcopy(citation())
    del broken["authors"]
    broken["references"][0]["type"] = "blog post"
    errors = citation_errors(broken)
    assert any("'authors' is a required property" in error for error in errors), errors
    assert any(error.startswith("references/0/type:") for error in errors), errors


def test_the_changelog_keeps_a_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert releases[0] == "Unreleased"
    version = project("version")
    assert version in releases, f"CHANGELOG.md has no entry for the current version {version}"
    kinds = set(re.findall(r"^### (\w+)", text, re.MULTILINE))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
