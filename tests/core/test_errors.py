"""`aiayn.core.errors`: `first_line` cuts a third-party error's message to one line inside ours."""

from aiayn.core.errors import first_line


def test_first_line_keeps_the_first_line_or_the_type_name():
    assert first_line(OSError("no route to host\nTraceback details\nmore")) == "no route to host"
    assert first_line(RuntimeError("  padded  ")) == "padded"
    assert first_line(ValueError("")) == "ValueError"
    assert first_line(KeyError()) == "KeyError"
