"""Every module of the model, the runtime and the reference is named (as `model/NAME.py`,
`runtime/NAME.py`, `paper/NAME.py`) in the README's paper-to-code table or in the module table
of docs/layout.md, so a new module cannot stay off the map; `src/aiayn` keeps at most five
top-level modules, each on both maps."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("model", "runtime", "paper")
PAGES = (ROOT / "README.md", ROOT / "docs" / "layout.md")


def unlisted(source: Path, pages: tuple[Path, ...] = PAGES) -> list[str]:
    """The modules `PACKAGE/NAME.py` of `source` (a copy of src/aiayn) that no page names."""
    text = "".join(page.read_text(encoding="utf-8") for page in pages)
    modules = [f"{package}/{path.name}" for package in PACKAGES for path in (source / package).glob("*.py")]
    assert len(modules) > 20, modules  # the packages were found
    return sorted(module for module in modules if f"`{module}`" not in text)


def test_every_module_of_the_model_runtime_and_reference_is_on_the_map() -> None:
    missing = unlisted(ROOT / "src" / "aiayn")
    assert not missing, f"modules named neither in README.md nor in docs/layout.md: {missing}"


def test_a_planted_new_module_is_reported(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).symlink_to(ROOT / "src" / "aiayn" / package)
    (tmp_path / "model").unlink()
    (tmp_path / "model").mkdir()
    for path in (ROOT / "src" / "aiayn" / "model").glob("*.py"):
        (tmp_path / "model" / path.name).write_text("")
    (tmp_path / "model" / "rotary.py").write_text('"""Rotary positions."""\n')
    assert unlisted(tmp_path) == ["model/rotary.py"]


def unmapped_top_level(source: Path, pages: tuple[Path, ...] = PAGES) -> list[str]:
    """'page: NAME' for each top-level module `NAME.py` and package `NAME/` of `source` (a copy
    of src/aiayn) that the page's map does not name."""
    names = [path.name for path in source.glob("*.py")]
    names += [f"{path.name}/" for path in source.iterdir() if (path / "__init__.py").is_file()]
    assert "__init__.py" in names and "model/" in names, names
    texts = {page.name: page.read_text(encoding="utf-8") for page in pages}
    return sorted(f"{page}: {name}" for page, text in texts.items() for name in names if name not in text)


def test_every_top_level_module_and_package_is_on_both_maps() -> None:
    missing = unmapped_top_level(ROOT / "src" / "aiayn")
    assert not missing, f"src/aiayn entries missing from the README's map or docs/layout.md: {missing}"


def linked_copy_of_the_package(target: Path) -> None:
    """`target` holds a link to every entry of src/aiayn, for planting a violation beside them."""
    for path in (ROOT / "src" / "aiayn").iterdir():
        (target / path.name).symlink_to(path)


def test_a_planted_top_level_module_is_reported(tmp_path: Path) -> None:
    linked_copy_of_the_package(tmp_path)
    (tmp_path / "helpers.py").write_text("")
    assert unmapped_top_level(tmp_path) == ["README.md: helpers.py", "layout.md: helpers.py"]


TOP_LEVEL_LIMIT = 5  # `__init__`, `__main__` and what every package needs (issue 52)


def crowded_top_level(source: Path) -> list[str]:
    """The top-level modules `NAME.py` of `source` (a copy of src/aiayn) when there are more than
    `TOP_LEVEL_LIMIT`, else nothing."""
    names = sorted(path.name for path in source.glob("*.py"))
    assert "__init__.py" in names, names
    return names if len(names) > TOP_LEVEL_LIMIT else []


def test_at_most_five_modules_at_the_top_level() -> None:
    crowded = crowded_top_level(ROOT / "src" / "aiayn")
    assert not crowded, f"src/aiayn has more than {TOP_LEVEL_LIMIT} top-level modules: {crowded}"


def test_a_planted_sixth_top_level_module_is_reported(tmp_path: Path) -> None:
    linked_copy_of_the_package(tmp_path)
    planted = [f"helpers{i}.py" for i in range(TOP_LEVEL_LIMIT + 1 - len(list(tmp_path.glob("*.py"))))]
    for name in planted:
        (tmp_path / name).write_text("")
    assert crowded_top_level(tmp_path) == sorted(path.name for path in tmp_path.glob("*.py"))
    assert set(planted) < set(crowded_top_level(tmp_path))
