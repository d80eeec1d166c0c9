// Typesets the math that pymdownx.arithmatex marks (\( \) inline, \[ \] display) with the copy of
// KaTeX in assets/katex/, on every page Material shows (document$ also fires on instant loading).
document$.subscribe(() => {
  for (const element of document.querySelectorAll(".arithmatex")) {
    renderMathInElement(element, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  }
});
