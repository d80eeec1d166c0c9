"""The evaluation report on a Multi30k model: build time, size, and the paired bootstrap
against sacreBLEU's own command line.

    python benchmarks/report_multi30k.py --model RUN --compare RUN/checkpoints/step_N \
        --out benchmarks/results/report_multi30k.json [--screenshot docs/report_multi30k.png]

1. `aiayn evaluate --model RUN --input test_2016_flickr.de --ref ... --report OUT.html`, timed
   as a whole process (load, beam search, attention, flags, page), with the page's and
   `OUT.json`'s sizes;
2. `aiayn evaluate ... --report CMP.html --compare OTHER` (two checkpoints of one run), and the
   same two hypothesis files through `sacrebleu REF -i OTHER_HYP MODEL_HYP --paired-bs -m bleu
   chrf`; the p-values of both are recorded side by side (the report makes the other system the
   baseline, as sacreBLEU makes its first `-i` file);
3. with `--screenshot`, the page opened in headless Chromium (Playwright), one sentence clicked,
   a full-page PNG for the README.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AIAYN = [sys.executable, "-m", "aiayn"]




def unpack(path: Path, out: Path) -> Path:
    with gzip.open(path, "rt", encoding="utf-8") as source:
        out.write_text(source.read(), encoding="utf-8")
    return out


def run(command: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of a command that must succeed."""
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout + done.stderr


def sacrebleu_p_values(reference: Path, baseline: Path, system: Path) -> dict[str, float]:
    """p-values of `system` against `baseline` from sacreBLEU's command line (text table)."""
    command = [sys.executable, "-m", "sacrebleu", str(reference), "-i", str(baseline), str(system),
               "--paired-bs", "-m", "bleu", "chrf", "-f", "text"]
    _, printed = run(command)
    values = re.findall(r"\(p = ([0-9.]+)\)", printed)
    if len(values) != 2:
        raise SystemExit(f"cannot read two p-values from sacrebleu's output:\n{printed}")
    return {"bleu": float(values[0]), "chrf": float(values[1])}


def screenshot(page_path: Path, png: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1400, "height": 1500})
        page.goto(page_path.resolve().as_uri())
        page.click("#sentences-body tr[data-id='0']")
        page.wait_for_selector("#attention-card[data-state='shown']")
        page.evaluate("window.scrollTo(0, 0)")  # the summary, the plots and the first sentences
        page.screenshot(path=str(png), full_page=False)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--compare", type=Path, required=True, help="another model of the same run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--screenshot", type=Path)
    parser.add_argument("--data", type=Path, default=None, help="data root (default: aiayn's)")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    from aiayn.data.paths import data_root
    from aiayn.runtime.cpu import cpu_model

    multi30k = (options.data or data_root()) / "multi30k"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = unpack(multi30k / "test_2016_flickr.de.gz", work / "test.de")
        reference = unpack(multi30k / "test_2016_flickr.en.gz", work / "test.en")
        page = work / "report.html"
        common = ["evaluate", "--input", str(source), "--ref", str(reference), "--device", "cpu"]
        seconds, printed = run([*AIAYN, *common, "--model", str(options.model),
                                "--output", str(work / "model.hyp"), "--report", str(page)])
        json_file = page.with_suffix(".json")
        sizes = {"html_mb": page.stat().st_size / 1e6, "json_mb": json_file.stat().st_size / 1e6}
        data = json.loads(page.with_suffix(".json").read_text(encoding="utf-8"))
        run([*AIAYN, *common, "--model", str(options.compare), "--output", str(work / "other.hyp")])
        _, compared = run([*AIAYN, *common, "--model", str(options.model), "--report", str(work / "cmp.html"),
                           "--compare-hyp", str(work / "other.hyp")])
        ours = json.loads((work / "cmp.json").read_text(encoding="utf-8"))["compare"]
        theirs = sacrebleu_p_values(reference, work / "other.hyp", work / "model.hyp")
        if options.screenshot:
            screenshot(page, options.screenshot)
    result = {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "command": " ".join(sys.argv),
        "model": str(options.model),
        "compare": str(options.compare),
        "sentences": len(data["sentences"]),
        "build_seconds": round(seconds, 1),
        **{key: round(value, 2) for key, value in sizes.items()},
        "corpus": data["corpus"],
        "flag_counts": data.get("flag_counts"),
        "paired_bootstrap_p": {
            "report": {"bleu": ours["significance"]["BLEU"]["p_value"],
                       "chrf": ours["significance"]["chrF"]["p_value"]},
            "sacrebleu_command_line": theirs,
        },
        "comparison": {key: ours[key] for key in ("name", "bleu", "chrf")},
        "evaluate_output": printed.strip().splitlines()[-3:],
        "compare_output": compared.strip().splitlines()[-3:],
    }
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
