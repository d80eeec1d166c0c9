"""The small helpers every package may use, knowing no other package of aiayn: the error types
(errors), atomic writes (files), ranges and settings of config fields (ranges, settings), optional
dependencies (optional), lazily imported public names (lazy_names), `eval_mode`, the progress
display, the decoding and quantization choices (decoding_choices), and old module paths kept
for one release (moved).

Importing it imports nothing: `import aiayn.core.errors` loads no torch.
"""
