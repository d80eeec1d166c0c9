"""`tests/` mirrors `src/aiayn/`: a test directory for every package, and no test directory
that is not a package's, besides the cross-cutting suites under `tests/integration/`."""

from pathlib import Path

import aiayn

TESTS = Path(__file__).resolve().parent
PACKAGE = Path(aiayn.__file__).resolve().parent
NOT_PACKAGES = {"integration", "fixtures", "__pycache__"}


def packages() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}


def test_every_package_has_its_test_directory() -> None:
    missing = sorted(name for name in packages() if not any((TESTS / name).glob("test_*.py")))
    assert not missing, f"packages of src/aiayn without tests/<package>/test_*.py: {missing}"


def test_every_test_directory_is_a_package_or_integration() -> None:
    directories = {p.name for p in TESTS.iterdir() if p.is_dir()} - NOT_PACKAGES
    strays = sorted(directories - packages())
    assert not strays, f"test directories that mirror no package of src/aiayn: {strays}"
