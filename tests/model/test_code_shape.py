"""The model reads top to bottom like the paper: checks on the shape of the code itself.

- the paper package is only the paper (`model_purity_violations`, the one guard over `model/`):
  its code (the syntax tree, not the text: imports and attribute chains, aliases followed)
  reaches no compiler, precision, kernel-registration or file-system API, and sets no
  attribute by name (what `model/` may import of aiayn is pyproject.toml's import contract,
  `tests/test_import_contract.py`);
- no `nonlocal` (no state smuggled out of closures);
- no `forward` with more than 6 parameters besides `self`, none taking *args / **kwargs
  (per-call state travels in one `AttentionContext`);
- from `Transformer.forward` to the function computing softmax(QK^T / sqrt(d_k)) V, at
  most 6 of aiayn's own functions on the call stack (`nn.Module.__call__` not counted).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import aiayn
from aiayn.model import ModelConfig, MultiHeadAttention, Transformer

from .helpers import pad_to_lengths, random_tokens

PACKAGE_ROOT = Path(aiayn.__file__).parent
MODEL_DIR = PACKAGE_ROOT / "model"


def model_sources() -> list[Path]:
    return sorted(MODEL_DIR.rglob("*.py"))


def test_no_nonlocal_in_the_model() -> None:
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in model_sources()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Nonlocal)
    ]
    assert offenders == []


FORBIDDEN = {
    "torch.compiler": "the compiler",
    "torch._dynamo": "the compiler",
    "torch._inductor": "the compiler",
    "torch.jit": "the compiler",
    "torch.library": "operator registration",
    "torch.ops": "custom operators",
    "torch.backends": "kernel choice",
    "torch.autocast": "precision",
    "torch.amp": "precision",
    "torch.cpu.amp": "precision",
    "torch.cuda.amp": "precision",
    "torch.is_autocast_enabled": "precision",
    "torch.get_autocast_dtype": "precision",
    "torch.set_autocast_enabled": "precision",
    "os": "the OS and its file system",
    "sys": "the OS",
    "pathlib": "the file system",
    "io": "the file system",
    "shutil": "the file system",
    "tempfile": "the file system",
    "glob": "the file system",
    "mmap": "the file system",
    "importlib": "imports by name",
    "builtins.open": "the file system",
    "builtins.__import__": "imports by name",
    "builtins.setattr": "attributes set by name",
    "builtins.delattr": "attributes set by name",
}
"""What no code of `model/` reaches (a dotted path, or any path below it), and why."""

FILE_METHODS = {"read_text", "write_text", "read_bytes", "write_bytes", "open", "mkdir", "unlink"}
"""Methods of files and paths: called on anything, they read or write the file system."""

BUILTINS = {"open", "__import__", "setattr", "delattr", "getattr"}


def _type_checking_only(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:` (annotations only: its body never runs)."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _running_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` except the bodies of `if TYPE_CHECKING:` blocks."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if _type_checking_only(node):
            todo += [node.test, *node.orelse]  # type: ignore[attr-defined]
        else:
            todo += list(ast.iter_child_nodes(node))
    return found


class _Paths:
    """The dotted path each name and attribute chain of one module stands for: `import`s,
    `from ... import ... as`, assignments of a path to a name (wherever they are: a name bound
    to a path anywhere counts everywhere) and `getattr(x, "name")`."""

    def __init__(self, nodes: list[ast.AST]) -> None:
        self.names: dict[str, str] = {}
        self.bound: set[str] = set()
        for node in nodes:  # names the module binds itself are no builtins
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bound.add(node.name)
            elif isinstance(node, ast.arg):
                self.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.bound.add(node.id)
        for node in nodes:
            for alias, path in self.imported(node):
                if alias.asname is None and isinstance(node, ast.Import):  # `import a.b` binds `a`
                    self.names[path.split(".")[0]] = path.split(".")[0]
                else:
                    self.names[alias.asname or alias.name] = path
        for _ in range(len(nodes)):  # to a fixed point: `a = torch; b = a.compiler`
            before = dict(self.names)
            for node in nodes:
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    path = self.path(node.value)
                    for target in targets:
                        if path is not None and isinstance(target, ast.Name):
                            self.names[target.id] = path
            if self.names == before:
                break

    @staticmethod
    def imported(node: ast.AST) -> list[tuple[ast.alias, str]]:
        """(alias, the module or object's dotted path) of each name an import binds."""
        if isinstance(node, ast.Import):
            return [(alias, alias.name) for alias in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            return [(alias, f"{node.module}.{alias.name}") for alias in node.names]
        return []

    def path(self, node: ast.AST) -> str | None:
        """The dotted path `node` stands for, or None (a value, not a module's name)."""
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return self.names[node.id]
            return f"builtins.{node.id}" if node.id in BUILTINS and node.id not in self.bound else None
        if isinstance(node, ast.Attribute):
            base = self.path(node.value)
            return None if base is None else f"{base}.{node.attr}"
        if isinstance(node, ast.Call) and self.path(node.func) == "builtins.getattr" and len(node.args) >= 2:
            base, name = self.path(node.args[0]), node.args[1]
            if base is not None and isinstance(name, ast.Constant) and isinstance(name.value, str):
                return f"{base}.{name.value}"
        return None


def _forbidden(path: str) -> str | None:
    """The FORBIDDEN entry `path` reaches (itself or below it), or None."""
    return next((entry for entry in FORBIDDEN if path == entry or path.startswith(entry + ".")), None)


def purity_violations(source: str, name: str = "<source>") -> list[str]:
    """'name:line: what' for every place the code of one module of `model/` breaks the rules
    above (comments and strings are not code: only the syntax tree is read)."""
    nodes = _running_nodes(ast.parse(source))
    paths = _Paths(nodes)
    found: dict[tuple[int, str], str] = {}
    for node in nodes:
        line = getattr(node, "lineno", 0)
        reached = [path for _, path in paths.imported(node)]
        if isinstance(node, (ast.Name, ast.Attribute, ast.Call)):
            reached.append(paths.path(node) or "")
        if isinstance(node, ast.Attribute) and node.attr in FILE_METHODS:
            found.setdefault((line, node.attr), f"{name}:{line}: calls .{node.attr} (the file system)")
        if isinstance(node, ast.Constant) and str(node.value).startswith(("/proc", "/sys")):
            found.setdefault((line, "/proc"), f"{name}:{line}: names {node.value} (the OS)")
        for path in reached:
            entry = _forbidden(path)
            if entry is not None:
                found.setdefault((line, entry), f"{name}:{line}: reaches {path} ({FORBIDDEN[entry]})")
    return [found[key] for key in sorted(found)]


def model_purity_violations(root: Path) -> list[str]:
    """`purity_violations` of every .py file under `root`."""
    files = sorted(root.rglob("*.py"))
    return [entry for path in files for entry in purity_violations(path.read_text(), path.name)]


def test_the_model_package_is_only_the_paper() -> None:
    assert model_purity_violations(MODEL_DIR) == []


PLANTED = {
    "compiler": "if torch.compiler.is_compiling():\n    pass\n",
    "compiler under another name": "from torch import compiler as _c\nif _c.is_compiling():\n    pass\n",
    "dynamo imported": "import torch._dynamo\nif torch._dynamo.is_compiling():\n    pass\n",
    "dynamo through torch": "COMPILING = torch._dynamo.is_compiling()\n",
    "compiler assigned to a name": "_compiler = torch.compiler\nCOMPILING = _compiler.is_compiling()\n",
    "compiler by getattr": "COMPILING = getattr(torch, 'compiler').is_compiling()\n",
    "autocast": "with torch.autocast('cpu', enabled=False):\n    pass\n",
    "autocast of amp, aliased": "from torch import amp as _amp\nCONTEXT = _amp.autocast('cpu')\n",
    "autocast query": "ON = torch.is_autocast_enabled('cpu')\n",
    "library": "LIBRARY = torch.library.Library('aiayn', 'FRAGMENT')\n",
    "open": "HANDLE = open('weights.bin')\n",
    "pathlib aliased": "from pathlib import Path as _P\nTEXT = _P('config.json')\n",
    "os.path": "import os.path\nFOUND = os.path.exists('weights.bin')\n",
    "io": "import io as _io\n",
    "read_text": "TEXT = CONFIG.read_text()\n",
    "/proc": "FLAGS = '/proc/cpuinfo'\n",
    "setattr": "setattr(torch, 'x', 1)\n",
}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_the_model_guard_reports_a_planted_violation(kind: str) -> None:
    """attention.py with one violation planted at its end: the guard names it there, and only there."""
    source = (MODEL_DIR / "attention.py").read_text()
    line = len(source.splitlines()) + 1
    found = purity_violations(source + PLANTED[kind], "attention.py")
    lines = {int(entry.split(":")[1]) for entry in found}
    assert found and min(lines) >= line, found


def test_the_model_guard_reads_code_not_text() -> None:
    """Names in comments and strings are not code; a module's own name shadows a builtin."""
    source = (
        "# torch.compiler and torch.autocast are the runtime's and the trainer's\n"
        "NOTE = 'no torch._dynamo here'\n"
        "def forward(open):\n    return open\n"
    )
    assert purity_violations(source) == []


def test_forward_signatures_are_short() -> None:
    offenders = []
    for path in model_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == "forward":
                args = node.args
                count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs) - 1  # minus self
                if count > 6 or args.vararg or args.kwarg:
                    offenders.append(f"{path.name}:{node.lineno} ({count} parameters)")
    assert offenders == []


def own_frames_to_attention(stack: list[inspect.FrameInfo]) -> list[str]:
    """aiayn's own frames from `Transformer.forward` down to the innermost aiayn frame."""
    names = [
        f"{Path(frame.filename).stem}.{frame.function}"
        for frame in reversed(stack)  # outermost first
        if Path(frame.filename).resolve().is_relative_to(PACKAGE_ROOT.resolve())
    ]
    return names[names.index("transformer.forward"):]


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "explicit"])
def test_call_stack_from_forward_to_attention_is_short(monkeypatch, packed: bool, need_weights: bool) -> None:
    model = Transformer(ModelConfig.tiny(vocab_size=30)).eval()
    src = pad_to_lengths(random_tokens(2, 6, seed=1), [6, 3])
    tgt_in = pad_to_lengths(random_tokens(2, 5, seed=2), [5, 2])
    stacks: list[list[str]] = []

    if need_weights:  # the explicit path computes the softmax itself: record from its matmul
        from aiayn.model import attention as attention_module

        original = attention_module.scaled_dot_product_attention

        def recording(*args, **kwargs):
            callers = own_frames_to_attention(inspect.stack()[1:])
            stacks.append([*callers, "attention.scaled_dot_product_attention"])
            return original(*args, **kwargs)

        for module in model.modules():
            if isinstance(module, MultiHeadAttention):
                monkeypatch.setattr(module, "attention", recording)
        monkeypatch.setattr("aiayn.model.context.AttentionContext.wants_weights", property(lambda self: True))
    else:
        original_sdpa = F.scaled_dot_product_attention

        def recording_sdpa(*args, **kwargs):
            stacks.append(own_frames_to_attention(inspect.stack()))
            return original_sdpa(*args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recording_sdpa)
    with torch.no_grad():
        model(src, tgt_in, output_mask=(tgt_in != 0) if packed else None)

    assert len(stacks) == 3 * 2  # 2 encoder self-, 2 decoder self-, 2 cross-attention calls
    deepest = max(stacks, key=len)
    assert deepest[0] == "transformer.forward"
    assert deepest[-1] == "attention.scaled_dot_product_attention"
    assert len(deepest) <= 6, deepest
