"""`aiayn plot`: pictures of attention, positional encodings, schedules and training curves.

    aiayn plot attention --model runs/dates --text "13th of may 1974" --kind cross --layer all --out att.png
    aiayn plot positional --d-model 512 --max-len 100 --out pe.png
    aiayn plot schedule --d-model 512 --warmup 4000 --out schedule.svg
    aiayn plot curves runs/a runs/b --out curves.png

The format (PNG or SVG) follows the extension of --out.
"""

from __future__ import annotations

import argparse

from aiayn.cli.arguments import bounded_int, device_option, finite_float


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot",
        help="draw attention maps, positional encodings, schedules, training curves",
        description="Draw a figure to --out (PNG or SVG, by its extension).",
    )
    plots = parser.add_subparsers(dest="plot", metavar="WHAT", required=True)

    attention = plots.add_parser(
        "attention",
        help="attention heatmaps of one sentence (a grid of heads)",
        description="Heatmaps of encoder self-, decoder self- and encoder-decoder attention for one "
        "sentence, one panel per head. Without --target the model's own translation is used.",
    )
    attention.add_argument("--model", required=True, metavar="DIR", help="model directory")
    attention.add_argument("--text", required=True, help="the source sentence")
    attention.add_argument("--target", help="target sentence (default: the model's translation)")
    attention.add_argument(
        "--layer",
        default="last",
        metavar="N|all|last",
        help="layer number, 1 = first (bottom); 'all' or 'last' (default last)",
    )
    attention.add_argument(
        "--kind",
        default="all",
        choices=["encoder", "decoder", "cross", "all"],
        help="which attention (default all)",
    )
    attention.add_argument(
        "--beam", type=bounded_int(1), default=4, help="beam size for the translation (default 4)"
    )
    attention.add_argument(
        "--device", default="auto", help="'cpu', 'cuda', 'cuda:1', ... or 'auto' (CUDA when available)"
    )
    attention.add_argument("--out", required=True, metavar="FILE", help="output .png or .svg")
    attention.set_defaults(func=run_attention)

    positional = plots.add_parser(
        "positional",
        help="the sinusoidal positional encoding (Sec. 3.5)",
        description="The sinusoidal encoding table as a heatmap, and a few dimensions as curves.",
    )
    positional.add_argument(
        "--d-model", type=bounded_int(2), default=512, help="model dimension (default 512)"
    )
    positional.add_argument(
        "--max-len", type=bounded_int(1), default=100, help="positions to draw (default 100)"
    )
    positional.add_argument(
        "--dims",
        type=bounded_int(0),
        nargs="+",
        metavar="D",
        help="dimensions to draw as curves (default: a few, from fast to slow)",
    )
    positional.add_argument("--out", required=True, metavar="FILE", help="output .png or .svg")
    positional.set_defaults(func=run_positional)

    schedule = plots.add_parser(
        "schedule",
        help="the learning-rate schedule (Sec. 5.3)",
        description="lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) for several "
        "configurations. Repeat --d-model/--warmup to choose them; a single pair is drawn with "
        "two comparisons (twice the warmup, half the d_model).",
    )
    schedule.add_argument(
        "--d-model",
        type=bounded_int(1),
        action="append",
        default=[],
        metavar="D",
        help="model dimension (repeatable; default 512)",
    )
    schedule.add_argument(
        "--warmup",
        type=bounded_int(1),
        action="append",
        default=[],
        metavar="STEPS",
        help="warmup steps (repeatable; default 4000)",
    )
    schedule.add_argument(
        "--steps", type=bounded_int(2, 10_000_000), help="steps to draw (default 5 x the longest warmup)"
    )
    schedule.add_argument(
        "--scale", type=finite_float(0, low_open=True), default=1.0, help="factor on the rate (default 1)"
    )
    schedule.add_argument("--out", required=True, metavar="FILE", help="output .png or .svg")
    schedule.set_defaults(func=run_schedule)

    curves = plots.add_parser(
        "curves",
        help="training and validation loss (and BLEU) of run directories",
        description="Loss against steps (or minutes) from RUN_DIR/metrics.jsonl, several runs overlaid; "
        "validation BLEU beside it when logged.",
    )
    curves.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of `aiayn train`")
    curves.add_argument("--out", required=True, metavar="FILE", help="output .png or .svg")
    curves.add_argument(
        "--x", choices=("step", "minutes"), default="step",
        help="the horizontal axis: optimizer steps, or wall-clock minutes since each run started "
        "(runs of different speeds side by side, as a time budget sees them)",
    )
    curves.set_defaults(func=run_curves)


def check_out(path: str) -> None:
    """A one-line error for an --out that is not .png or .svg, before any work."""
    from aiayn.plots.output import figure_format

    figure_format(path)


def run_attention(args: argparse.Namespace) -> int:
    from aiayn.inference import load
    from aiayn.plots.attention import parse_layer, plot_attention
    from aiayn.plots.attention_data import attention_example

    check_out(args.out)
    layer = parse_layer(args.layer)
    translator = load(args.model, device_option(args.device), task="translation")
    example = attention_example(translator, args.text, args.target, beam=args.beam)
    panels = plot_attention(example, args.out, kind=args.kind, layer=layer)
    print(
        f"{args.out}: {len(panels)} heads; target {example.target!r}"
        f"{' (model translation)' if example.translated else ''}"
    )
    return 0


def run_positional(args: argparse.Namespace) -> int:
    from aiayn.plots.positional import plot_positional

    check_out(args.out)
    plot_positional(args.d_model, args.max_len, args.out, args.dims)
    print(args.out)
    return 0


def run_schedule(args: argparse.Namespace) -> int:
    from aiayn.plots.schedule import plot_schedule, schedule_configs

    check_out(args.out)
    configs = schedule_configs(args.d_model, args.warmup)
    plot_schedule(configs, args.out, steps=args.steps, scale=args.scale)
    print(args.out)
    return 0


def run_curves(args: argparse.Namespace) -> int:
    from aiayn.plots.curves import plot_curves

    check_out(args.out)
    plot_curves(args.run_dirs, args.out, args.x)
    print(args.out)
    return 0
