"""The command-line options and input/output helpers that several commands share: the model
and search options of translate, evaluate, score and serve, reading line-aligned files, and the
one decoding of a test set (`aiayn evaluate`, and the model a report compares with)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aiayn.cli.arguments import bounded_int, device_option, number_type
from aiayn.core.decoding_choices import COMPILE_CHOICES, DEFAULT_BATCH_TOKENS, LENGTH_PENALTY, QUANTIZATIONS
from aiayn.core.errors import DataError

if TYPE_CHECKING:
    from aiayn.inference import Translator
    from aiayn.translation.evaluate import TranslationEvaluation


AUTO_COMPILE_HELP = ("a kept compiled step when one exists, else eager, building one when the input is "
                     "long enough that it pays (needs a C++ compiler)")
"""What --compile auto does for translate and evaluate."""

MODEL_HELP = ("model directory (config.json, model.safetensors, tokenizer files), or a CTranslate2 "
              "export (aiayn export ctranslate2); repeat for an ensemble of aiayn translation models "
              "(one search over their mean probability; they must share vocabularies)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model (repeatable: an ensemble) and --device, shared by translate, evaluate and score."""
    parser.add_argument("--model", required=True, action="append", metavar="DIR", help=MODEL_HELP)
    parser.add_argument("--device", default="auto",
                        help="'cpu', 'cuda', 'cuda:1', ... or 'auto' (CUDA when available)")
    parser.add_argument("--batch-tokens", type=bounded_int(1), default=DEFAULT_BATCH_TOKENS, metavar="N",
                        help=f"padded source tokens per batch (default {DEFAULT_BATCH_TOKENS})")
    add_quantize_argument(parser)


def add_compile_argument(parser: argparse.ArgumentParser, auto_help: str = AUTO_COMPILE_HELP) -> None:
    """--compile [WHEN] and --no-compile (translate, evaluate, serve); `auto_help` says what
    'auto', the default, does for the command."""
    parser.add_argument("--compile", nargs="?", const="always", default="auto", choices=COMPILE_CHOICES,
                        metavar="WHEN",
                        help="compile the decoding step of an aiayn translation model: always (--compile "
                        "alone: built once per model, torch and CPU, and kept in the user's cache "
                        "directory for later runs; aiayn cache list), never (--no-compile), or "
                        f"auto (default): {auto_help}")
    parser.add_argument("--no-compile", dest="compile", action="store_const", const="never",
                        help="decode eagerly (--compile never)")


def add_quantize_argument(parser: argparse.ArgumentParser) -> None:
    """--quantize int8 (translate, evaluate, score, serve)."""
    parser.add_argument("--quantize", choices=QUANTIZATIONS, default=None,
                        help="run the linear layers in int8 (per-channel weight scales, the input "
                        "quantized on the fly; a CTranslate2 export: its int8 compute type)")


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """--beam, --alpha, --max-extra-len (the paper's decoding settings, Sec. 6.1; --max-len is the
    old spelling of --max-extra-len, still read)."""
    parser.add_argument("--beam", type=bounded_int(1), default=4, help="beam size; 1 = greedy (default 4)")
    parser.add_argument("--alpha", type=number_type(LENGTH_PENALTY), default=0.6,
                        help="length penalty alpha, 0..10 (default 0.6)")
    parser.add_argument("--max-extra-len", "--max-len", dest="max_len", type=bounded_int(0), default=50,
                        metavar="EXTRA", help="output tokens allowed beyond the source length (default 50; "
                        "--max-len: the old spelling)")


def add_progress_argument(parser: argparse.ArgumentParser, subject: str | None = None) -> None:
    """--progress (translate, evaluate, classify predict, prepare): progress on stderr for long
    work; `subject` says which (default: inputs of more than `LONG_INPUT_LINES` lines)."""
    from aiayn.core.progress_display import LONG_INPUT_LINES, PROGRESS_MODES

    subject = subject or f"inputs of more than {LONG_INPUT_LINES} lines"
    parser.add_argument("--progress", choices=PROGRESS_MODES, default="auto",
                        help=f"progress on stderr for {subject}: a bar "
                        "(redrawn in place), plain lines every 30 seconds (for log files), or none; "
                        "auto (default): a bar on a terminal, else plain lines")


def count_lines(path: str) -> int | None:
    """The lines of an input file (gzip read as text), for a progress total; None if unreadable
    (the reading itself then reports the error)."""
    import gzip
    import zlib

    try:
        with open(path, "rb") as handle:
            gzipped = handle.read(2) == b"\x1f\x8b"
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as handle:
            return sum(1 for _ in handle)
    except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError
        return None


def model_source(models: str | list[str]) -> str | list[str]:
    """What `aiayn.load` takes for --model given once (that directory) or repeated (the list:
    an ensemble)."""
    return models[0] if isinstance(models, list) and len(models) == 1 else models


def model_names(models: str | list[str]) -> str:
    """--model as messages and titles name it: the directory, or the ensemble's joined by ' + '."""
    return models if isinstance(models, str) else " + ".join(models)


def load_translator(
    model_dir: str | list[str], args: argparse.Namespace, sentences: int | None = None
) -> Translator:
    """The translator of `model_dir` (one directory, or a list: an ensemble) as --device,
    --quantize and --compile ask (translate, evaluate, and the model compared with in a report);
    `sentences`: how many it will decode, for --compile auto (None: unknown)."""
    from aiayn.inference import load

    return load(model_source(model_dir), device_option(args.device), task="translation",
                quantize=args.quantize, compile=args.compile, sentences=sentences)


def search_settings(args: argparse.Namespace) -> dict:
    """The keyword arguments of `Translator.translate_nbest` that `add_search_arguments` and
    --batch-tokens set."""
    return dict(beam=args.beam, alpha=args.alpha, max_len_extra=args.max_len, batch_tokens=args.batch_tokens)


def one_line(text: str) -> str:
    """A hypothesis as one output line: newlines (which a byte-level tokenizer can
    produce) become spaces, so output lines stay aligned with input lines."""
    return text.replace("\r", " ").replace("\n", " ")


def read_parallel_files(input_path: str, ref_path: str) -> tuple[list[str], list[str]]:
    """Read two line-aligned files; differing line counts raise `DataError` naming both."""
    from aiayn.data.corpus import read_lines

    sources, references = read_lines(input_path), read_lines(ref_path)
    if len(sources) != len(references):
        raise DataError(
            f"{input_path} has {len(sources)} lines but {ref_path} has {len(references)}; "
            "they must be line-aligned"
        )
    return sources, references


def evaluate(
    model_dir: str | list[str], args: argparse.Namespace, sources: list[str], references: list[str]
) -> tuple[Translator, TranslationEvaluation]:
    """The model of `model_dir` (loaded as the options ask) and its `TranslationEvaluation` on
    the test set: the one decoding of `aiayn evaluate`, with or without --report."""
    from aiayn.core.progress_display import LineProgress
    from aiayn.translation.evaluate import evaluate_translation

    translator = load_translator(model_dir, args, sentences=len(sources))
    with LineProgress(len(sources), "evaluate", getattr(args, "progress", "auto")) as progress:
        result = evaluate_translation(
            translator, sources, references, **search_settings(args), lowercase=args.lowercase,
            token_scores=getattr(args, "report", None) is not None,  # the report shows per-word scores
            on_progress=progress.advance if progress.display is not None else None,
            **getattr(args, "phrases", {}),  # --constraints / --glossary (`aiayn.cli.evaluate`)
        )
    return translator, result


def add_set_option(parser: argparse.ArgumentParser, example: str) -> None:
    """The one `--set SECTION.KEY=VALUE` option (repeatable; into `args.overrides`), with
    `example` (e.g. 'train.max_steps=200') in its help."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=f"override a config field, e.g. --set {example} (repeatable)",
    )
