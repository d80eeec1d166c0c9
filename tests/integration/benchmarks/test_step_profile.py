"""benchmarks/step_profile.py: perf's report read whole (DSO names with spaces included) and each
symbol put into its kind of work, the same rules for both engines."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def load_script():
    sys.path.insert(0, str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("step_profile", REPO / "benchmarks" / "step_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


step_profile = load_script()

REPORT = """# Samples: 1K of event 'cpu-clock'
#
 40.50%  \t[JIT] tid 22696                     \t[.] 0x00007f948c7d247a
 12.25%  \tlibpython3.11.so.1.0\t[.] _PyEval_EvalFrameDefault
  9.00%  \tlibctranslate2.so.4\t[.] ctranslate2::cpu::softmax<(ctranslate2::cpu::CpuIsa)2>(float const*)
  8.00%  \tlibtorch_cpu.so\t[.] at::native::AVX2::topk_impl_loop<float, float>
  6.00%  \tlibc.so.6\t[.] _int_malloc
  5.00%  \tlibtorch_cpu.so\t[.] mkl_blas_def_xsgemv
  4.00%  \tlibtorch_cpu.so\t[.] c10::impl::OperatorEntry::lookup
  3.00%  \t[kernel.kallsyms]\t[k] clear_page_erms
  2.00%  \tc5cr7o2fmbuauhrw.main.so\t[.] kernel
  1.00%  \tlibfoo.so\t[.] something_else
"""


def test_every_row_of_the_report_is_read_with_its_dso_and_symbol():
    rows = step_profile.parse_report(REPORT)
    assert len(rows) == 10
    assert rows[0] == (40.5, "[JIT] tid 22696", "[.] 0x00007f948c7d247a")
    assert sum(percent for percent, _, _ in rows) == 90.75


def test_symbols_fall_into_their_kinds_of_work():
    kinds = [step_profile.classify(dso, symbol) for _, dso, symbol in step_profile.parse_report(REPORT)]
    assert kinds == [
        "run-time generated code (JIT GEMM kernels)",
        "Python interpreter",
        "attention and softmax",
        "search (top-k, gather, sort)",
        "memory (alloc, copy, page faults)",
        "matrix products (named)",
        "framework (dispatch, tensor bookkeeping, bindings)",
        "OS kernel",
        "Inductor's generated loops",
        "other",
    ]
