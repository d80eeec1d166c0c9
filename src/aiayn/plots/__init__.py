"""Pictures of the model and its training (Sec. 3.2 attention, Sec. 3.5 positions, Sec. 5.3 schedule).

Every function draws a `matplotlib.figure.Figure` without pyplot (no display needed) and
writes PNG or SVG by the output file's extension:

- `plot_attention`: attention heatmaps of a sentence, a grid of heads per layer and kind;
- `plot_positional`: the sinusoidal encoding table and a few of its dimensions;
- `plot_schedule`: the learning-rate schedule for several (d_model, warmup) pairs;
- `plot_curves`: training/validation loss and BLEU of one or more run directories.
"""

from aiayn.plots.attention import Panel, plot_attention, select_panels
from aiayn.plots.attention_data import AttentionExample, attention_example, attention_examples
from aiayn.plots.curves import plot_curves, read_run
from aiayn.plots.output import figure_format, save_figure
from aiayn.plots.positional import plot_positional
from aiayn.plots.schedule import plot_schedule, schedule_configs

__all__ = [
    "AttentionExample",
    "Panel",
    "attention_example",
    "attention_examples",
    "figure_format",
    "plot_attention",
    "plot_curves",
    "plot_positional",
    "plot_schedule",
    "read_run",
    "save_figure",
    "schedule_configs",
    "select_panels",
]
