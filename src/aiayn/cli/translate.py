"""`aiayn translate`: translate text with a trained model, one output line per input line.

    aiayn translate --model runs/multi30k --text "Ein Hund läuft."
    aiayn translate --model runs/multi30k --input test.de --output test.hyp
    cat test.de | aiayn translate --model runs/multi30k --nbest 4

Input is read and translated in chunks of lines (so a long stdin stream starts producing
output at once), each chunk sorted into token-budget batches, and written in input order.
Blank input lines (empty or whitespace only) give empty output lines, not decoded; their score
(`--nbest`, jsonl) is that of the empty output with its `<eos>`, as `aiayn score` of the line and
an empty reference gives it (jsonl: `token_scores` is that one `<eos>` value). With `--nbest K`
each input gives up to K lines `index<TAB>score<TAB>log_prob<TAB>hypothesis` (0-based input line
index, best first). A line longer than the model's max_len is truncated with a warning
(`--on-long-line error`: stop with an error naming the line instead).

`--format jsonl` prints one JSON object per output instead: `line` (0-based input line),
`rank` (0 = best), `text`, `score`, `log_prob`; with `--scores` also `token_scores` (the model's plain
log-probability of each output token, `<eos>` last: their sum is `aiayn score` of the pair),
`words` (the output's whitespace words) and `word_scores` (each word's tokens summed); with
`--alignments` also `alignment`, source-output word links in the Pharaoh format (`0-0 1-2`,
see `aiayn.inference.words`). `--scores` and `--alignments` need `--format jsonl`.

Two figures, two names: `score` is what ranks the hypotheses, log P(output | input) divided by
the length penalty lp = ((5 + |output|) / 6) ** alpha (GNMT, the paper's alpha 0.6; with beam 1,
log P itself); `log_prob` is log P(output | input) itself, the sum of the output's token
log-probabilities, `<eos>` included: the figure `aiayn score` prints for the pair (computed by a
forced decoding of each output, as `--scores` does; an output cut at the length limit has no
`<eos>` step, and `aiayn score` of its text adds one).

`--constraints FILE` / `--glossary FILE`: phrases each translation must contain or avoid
(`aiayn.cli.constraint_files`, docs/constraints.md); the whole input is read first, and the
output is written once every line is translated. jsonl objects then carry `constraints_met`
(false: the length limit came before every phrase was in) and, with a glossary, `glossary`
(the entries applied); stderr gets the count of lines whose phrases are not all in.

`--report OUT.html` also writes the evaluation report of the translations printed (flags,
attention; no scores without a reference: `aiayn evaluate --report` has them): the same
decoding, whose lines and outputs are kept for the report.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
import zlib
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING

from aiayn.cli.arguments import bounded_int, number_type
from aiayn.cli.options import (
    add_compile_argument,
    add_model_arguments,
    add_progress_argument,
    add_search_arguments,
    count_lines,
    load_translator,
    model_names,
    one_line,
    search_settings,
)
from aiayn.core.decoding_choices import (
    LONG_LINE_ACTIONS,
    MAX_OUTPUT_RATIO,
    NO_REPEAT_NGRAM_SIZE,
    REPETITION_PENALTY,
    SEED,
    TEMPERATURE,
    TOP_K,
    TOP_P,
)
from aiayn.core.errors import ConfigError, DataError, DecodingError
from aiayn.core.files import atomic_path

if TYPE_CHECKING:
    from aiayn.cli.constraint_files import LineConstraints
    from aiayn.inference import Translation, Translator

GZIP_MAGIC = b"\x1f\x8b"
OUTPUT_FORMATS = ("text", "jsonl")


def add_control_arguments(parser: argparse.ArgumentParser) -> None:
    """The decoding controls (`aiayn.decoding.controls`): prefix, sampling, repetition limits."""
    group = parser.add_argument_group("decoding controls")
    group.add_argument("--prefix", metavar="TEXT",
                       help="target prefix of every output: forced, then continued")
    group.add_argument("--sample", action="store_true",
                       help="draw each token (--top-k, --top-p, --temperature) instead of searching")
    group.add_argument("--top-k", type=number_type(TOP_K), default=None, metavar="K",
                       help="--sample: from the K most probable tokens (0: all)")
    group.add_argument("--top-p", type=number_type(TOP_P), default=None, metavar="P",
                       help="--sample: from the nucleus of probability mass P, 0 < P <= 1")
    group.add_argument("--temperature", type=number_type(TEMPERATURE), default=1.0, metavar="T",
                       help="--sample: divide the logits by T (0: arg-max; default 1)")
    group.add_argument("--seed", type=number_type(SEED), default=None, metavar="N",
                       help="--sample: random seed (the same seed gives the same outputs)")
    group.add_argument("--no-repeat-ngram-size", type=number_type(NO_REPEAT_NGRAM_SIZE), default=0,
                       metavar="N",
                       help="never repeat an n-gram of N tokens in an output (0: off)")
    group.add_argument("--repetition-penalty", type=number_type(REPETITION_PENALTY), default=1.0, metavar="P",
                       help="penalise the logits of tokens already generated (CTRL; 1: off; a positive "
                       "float32 number)")
    group.add_argument("--max-output-ratio", type=number_type(MAX_OUTPUT_RATIO), default=None, metavar="R",
                       help="outputs have at most ceil(R x source tokens) tokens, <eos> included "
                       "(0 < R <= 1000)")


def control_settings(args: argparse.Namespace) -> dict:
    """The keyword arguments of `Translator.translate` that `add_control_arguments` sets."""
    return dict(
        prefix=args.prefix, sample=args.sample, top_k=args.top_k, top_p=args.top_p,
        temperature=args.temperature, seed=args.seed, no_repeat_ngram_size=args.no_repeat_ngram_size,
        repetition_penalty=args.repetition_penalty, max_output_ratio=args.max_output_ratio,
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "translate", help="translate text with a trained model",
        description="Translate stdin, --input FILE or --text; one output line per input line.",
    )
    add_model_arguments(parser)
    add_compile_argument(parser)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="FILE", help="file of sentences, one per line (.gz ok)")
    source.add_argument("--text", help="one sentence to translate")
    parser.add_argument("--output", metavar="FILE", help="write here (atomically) instead of stdout")
    add_search_arguments(parser)
    add_control_arguments(parser)
    from aiayn.cli.constraint_files import add_constraint_arguments

    add_constraint_arguments(parser)
    parser.add_argument("--nbest", type=bounded_int(1), default=1, metavar="K",
                        help="print K hypotheses per input as index<TAB>score<TAB>log_prob<TAB>text "
                        "(score: log P over the length penalty, which ranks; log_prob: log P, as "
                        "aiayn score)")
    parser.add_argument("--format", choices=OUTPUT_FORMATS, default="text",
                        help="text: one line per input (--nbest: index<TAB>score<TAB>log_prob<TAB>text); "
                        "jsonl: one JSON object per output with line, rank, text, score, log_prob "
                        "(+ token_scores, words, "
                        "word_scores with --scores; + alignment with --alignments)")
    parser.add_argument("--scores", action="store_true",
                        help="with --format jsonl: per-token and per-word log-probabilities")
    parser.add_argument("--alignments", action="store_true",
                        help="with --format jsonl: source-output word alignment, Pharaoh format "
                        "(src-tgt: indices of the whitespace-separated words of the input line and of "
                        "the output; not available with a CTranslate2 model)")
    parser.add_argument("--chunk-lines", type=bounded_int(1), default=500, metavar="N",
                        help="lines read and translated at a time (1 when stdin is a terminal)")
    parser.add_argument("--on-long-line", choices=LONG_LINE_ACTIONS, default="truncate",
                        help="a line longer than the model's max_len: truncate it with a warning "
                        "(default) or stop with an error")
    add_progress_argument(parser)
    from aiayn.cli.report_arguments import add_report_arguments

    add_report_arguments(parser, with_reference=False)
    parser.set_defaults(func=run)


# ------------------------------------------------------------------ line I/O
def read_lines(handle: IO[bytes], name: str) -> Iterator[str]:
    """Lines of a binary stream, decoded as UTF-8, without their `\\n` / `\\r\\n`.

    Only `\\n` ends a line (as in `aiayn.data.corpus`), so line alignment with other tools
    is kept; invalid UTF-8 (or a corrupt gzip stream) raises `DataError` naming the file and line.
    """
    from aiayn.data.corpus import decode_utf8  # not at the top: `aiayn.data` imports torch

    raw_lines = enumerate(handle, start=1)
    while True:
        try:
            number, raw = next(raw_lines)
        except StopIteration:
            return
        except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError
            raise DataError(f"{name}: cannot read input ({error})") from None
        line = decode_utf8(raw, name, number)
        if number == 1 and raw == b"\xef\xbb\xbf":  # the whole input is a byte order mark: no lines
            return
        yield line.removesuffix("\n").removesuffix("\r")


def open_input(path: str, stack: ExitStack) -> IO[bytes]:
    """Open a text file for `read_lines` (gzip by suffix or magic bytes), closed by `stack`."""
    file = Path(path)
    if not file.is_file():
        raise DataError(f"input file not found: {path}")
    handle = stack.enter_context(open(file, "rb"))  # noqa: SIM115 (closed by `stack`)
    if file.suffix == ".gz" or handle.peek(2)[:2] == GZIP_MAGIC:
        return stack.enter_context(gzip.open(handle, "rb"))  # type: ignore[return-value]
    return handle


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """Consecutive lists of `size` lines (the last may be shorter)."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def log_prob(entry: Translation) -> float:
    """log P(output | input) of an n-best entry: the sum of its token scores (`<eos>` included;
    `aiayn score` of the pair), or its score when nothing was decoded (an empty input line)."""
    return float(sum(entry.token_scores)) if entry.token_scores else entry.score


def format_nbest(first_index: int, nbest: list[list[Translation]]) -> list[str]:
    """`index<TAB>score<TAB>log_prob<TAB>hypothesis` lines for the n-best lists of consecutive inputs."""
    return [
        f"{first_index + i}\t{entry.score:.4f}\t{log_prob(entry):.4f}\t{one_line(entry.text)}"
        for i, entries in enumerate(nbest)
        for entry in entries
    ]


def format_jsonl(
    first_index: int, nbest: list[list[Translation]], translator: Translator, scores: bool = True,
    constraints: LineConstraints | None = None,
) -> list[str]:
    """One JSON object per output of consecutive inputs (see the module docstring); `scores`:
    with the per-token and per-word scores (`--scores`); `constraints`: with the constraint fields."""
    import json

    from aiayn.inference.words import translation_details

    tokenizer = translator.tokenizers.target
    lines = []
    for i, entries in enumerate(nbest):
        for rank, entry in enumerate(entries):
            details = translation_details(entry if scores else entry._replace(token_scores=None), tokenizer)
            record = {"line": first_index + i, "rank": rank, "text": entry.text, "score": entry.score,
                      "log_prob": log_prob(entry), **details,
                      **constraint_fields(entry, constraints, first_index + i)}
            try:  # strict JSON: NaN and Infinity are not JSON numbers
                lines.append(json.dumps(record, ensure_ascii=False, allow_nan=False))
            except ValueError:
                raise DecodingError(f"line {first_index + i + 1}: a score of the output is not a finite "
                                    "number; nothing was output for it") from None
    return lines


def constraint_fields(entry: Translation, constraints: LineConstraints | None, line: int) -> dict:
    """`constraints_met` and `glossary` (the entries applied) of one output, when constrained."""
    if constraints is None:
        return {}
    fields: dict = {"constraints_met": entry.constraints_met}
    if constraints.glossary is not None:
        fields["glossary"] = [{"source": e.source, "target": e.target} for e in constraints.glossary[line]]
    return fields


# ------------------------------------------------------------------ command
def open_source(args: argparse.Namespace, stack: ExitStack) -> tuple[Iterable[str], int, str]:
    """The input lines (--text, --input or stdin), the lines to translate at a time, and the
    input's name for messages."""
    if args.text is not None:
        return [args.text], 1, "--text"
    if args.input is not None:
        return read_lines(open_input(args.input, stack), args.input), args.chunk_lines, args.input
    stdin = sys.stdin
    buffer = getattr(stdin, "buffer", None)
    lines = read_lines(buffer, "<stdin>") if buffer is not None else (
        line.removesuffix("\n").removesuffix("\r") for line in stdin
    )
    return lines, 1 if stdin.isatty() else args.chunk_lines, "<stdin>"


def open_output(args: argparse.Namespace, stack: ExitStack) -> IO[str]:
    """--output (written atomically when the command ends) or stdout."""
    if args.output is None:
        return sys.stdout
    try:
        tmp = stack.enter_context(atomic_path(args.output))
        return stack.enter_context(open(tmp, "w", encoding="utf-8", newline="\n"))
    except OSError as error:
        raise DataError(f"cannot write --output {args.output}: {error}") from None


def check_report(args: argparse.Namespace) -> None:
    """One-line errors for --report options that cannot work, before the model is loaded."""
    from aiayn.cli.report_arguments import check_report_arguments

    if args.nbest != 1:
        raise DataError("--report shows the best translation of each line; leave out --nbest")
    check_report_arguments(args)


def run(args: argparse.Namespace) -> int:
    """Translate chunk by chunk; with --report the chunks' lines and best translations are
    kept, and the report is written of exactly what was printed."""
    if args.nbest > args.beam:  # each is >= 1 (checked as parsed)
        raise DataError(f"--nbest must be between 1 and --beam ({args.beam}), got {args.nbest}")
    if (args.scores or args.alignments) and args.format != "jsonl":
        raise DataError("--scores and --alignments print JSON lines: add --format jsonl")
    if args.report is not None:
        check_report(args)
    total = count_lines(args.input) if args.input is not None else None
    translator = load_translator(args.model, args, sentences=total)  # --compile auto weighs them
    sources: list[str] = []
    best: list[Translation] = []
    from aiayn.core.progress_display import LineProgress

    with ExitStack() as stack:
        lines, chunk_lines, source_name = open_source(args, stack)
        constraints, held = read_line_constraints(args, translator, lines, source_name)
        if constraints is not None:
            lines = held
        out = open_output(args, stack)
        progress = stack.enter_context(LineProgress(total, "translate", args.progress))
        pending: list[str] | None = None if constraints is None else []  # written once all succeed
        done, seconds, unmet = 0, 0.0, 0
        for chunk in chunks(lines, chunk_lines):
            start = time.perf_counter()
            phrases = {} if constraints is None else constraints.chunk(done, done + len(chunk))
            try:
                nbest = translator.translate_nbest(
                    chunk, args.nbest, line_offset=done, on_long_line=args.on_long_line,
                    token_scores=args.scores or args.report is not None or args.format == "jsonl"
                    or args.nbest > 1,  # log_prob is their sum
                    alignments=args.alignments,
                    **search_settings(args), **control_settings(args), **phrases,
                )
            except DataError as error:  # a line too long, with --on-long-line error
                raise DataError(f"{source_name}: {error} (--on-long-line truncate cuts it)") from None
            except ConfigError as error:  # "line N: ..." from the constraints' checks
                if constraints is None or not str(error).startswith("line "):
                    raise
                raise DataError(f"{constraint_source(args)}: {error}") from None
            seconds += time.perf_counter() - start
            unmet += sum(not entries[0].constraints_met for entries in nbest)
            if args.format == "jsonl":
                output = format_jsonl(done, nbest, translator, scores=args.scores, constraints=constraints)
            elif args.nbest == 1:
                output = [one_line(entries[0].text) for entries in nbest]
            else:
                output = format_nbest(done, nbest)
            if pending is not None:
                pending.extend(output)
            else:
                out.write("".join(line + "\n" for line in output))
                out.flush()
            if args.report is not None:
                sources.extend(chunk)
                best.extend(entries[0] for entries in nbest)
            done += len(chunk)
            progress.advance(done)
        if pending is not None:
            out.write("".join(line + "\n" for line in pending))
            out.flush()
    if constraints is not None and any(constraints.include):
        with_phrases = sum(bool(phrases) for phrases in constraints.include)
        print(f"constraints: {unmet} of {with_phrases} line(s) with phrases to include reached the length "
              "limit before holding them all (constraints_met: false)", file=sys.stderr)
    if args.report is not None:
        write_translate_report(args, translator, sources, best, seconds, source_name)
    return 0


def constraint_source(args: argparse.Namespace) -> str:
    """The constraint file(s) named in messages."""
    return " / ".join(name for name in (args.constraints, args.glossary) if name is not None)


def read_line_constraints(
    args: argparse.Namespace, translator: Translator, lines: Iterable[str], source_name: str
) -> tuple[LineConstraints | None, list[str]]:
    """With --constraints or --glossary: the whole input (read now) and its constraints, every
    phrase tokenized, so that a bad file stops the command before anything is written."""
    from aiayn.cli.constraint_files import check_phrases, line_constraints

    if args.constraints is None and args.glossary is None:
        return None, []
    held = list(lines)
    constraints = line_constraints(args, held, source_name)
    assert constraints is not None
    check_phrases(translator, constraints, constraint_source(args))
    return constraints, held


def write_translate_report(
    args: argparse.Namespace, translator: Translator, sources: list[str], best: list[Translation],
    seconds: float, source_name: str,
) -> None:
    """The report of the translations printed (no reference: no scores)."""
    from aiayn.cli.report_arguments import write_report_files
    from aiayn.evaluation.report_inputs import report_outputs

    if not sources:
        raise DataError(f"{source_name}: no lines to translate")
    outputs = report_outputs(translator, sources, best, seconds)
    write_report_files(args, sources, None, outputs, f"{model_names(args.model)}: {source_name}")
