"""`aiayn translate / evaluate --constraints / --glossary` end to end on a tiny model directory,
and the Python API's `include` / `exclude`."""

import json

import pytest

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from decoding.conftest import SOURCES, TARGETS

FAST = ["--beam", "3", "--max-len", "3", "--device", "cpu"]
LINES = ["ein hund läuft", "zwei katzen", "", "ja"]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write(path, lines) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.fixture
def source(tmp_path):
    return write(tmp_path / "in.txt", LINES)


def jsonl(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_included_phrases_appear_and_excluded_ones_do_not(model_dir, source, tmp_path, capsys):
    constraints = write(tmp_path / "c.jsonl", [
        '{"include": ["dog"]}', '{"include": ["two", "cats"], "exclude": ["e"]}', "{}", '{"exclude": ["y"]}',
    ])
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--input", source,
                         "--constraints", constraints, "--format", "jsonl", *FAST)
    assert code == 0, err
    rows = jsonl(out)
    assert [r["line"] for r in rows] == [0, 1, 2, 3]
    assert "dog" in rows[0]["text"] and rows[0]["constraints_met"] is True
    assert "two" in rows[1]["text"] and "cats" in rows[1]["text"] and "e" not in rows[1]["text"]
    assert rows[2]["text"] == "" and rows[2]["constraints_met"] is True
    assert "y" not in rows[3]["text"]
    assert "0 of 2 line(s)" in err


def test_no_constraints_change_nothing(model_dir, source, tmp_path, capsys):
    _, plain, _ = run(capsys, "translate", "--model", str(model_dir), "--input", source, "--format", "jsonl",
                      "--nbest", "2", *FAST)
    empty = write(tmp_path / "c.jsonl", ["{}"] * len(LINES))
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--input", source, "--format", "jsonl",
                       "--nbest", "2", "--constraints", empty, *FAST)
    assert code == 0
    rows = jsonl(out)
    assert all(r.pop("constraints_met") is True for r in rows)
    assert rows == jsonl(plain)


def test_a_limit_too_short_flags_the_line(model_dir, tmp_path, capsys):
    # 'ja': 3 source tokens, --max-len 0: a limit of 3 + 11 constraint tokens; two phrases of 11
    # characters the random model will not both produce in order... the flag and the count say so
    # whenever it happens, and a met line says true.
    constraints = write(tmp_path / "c.jsonl", ['{"include": ["the man reads a book"]}'])
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--text", "ja", "--format", "jsonl",
                         "--constraints", constraints, "--beam", "2", "--max-len", "0", "--device", "cpu")
    assert code == 0
    row = jsonl(out)[0]
    assert row["constraints_met"] == ("the man reads a book" in row["text"])
    assert f"{0 if row['constraints_met'] else 1} of 1 line(s)" in err


def test_glossary_applies_whole_words_and_lists_the_entries(model_dir, source, tmp_path, capsys):
    glossary = write(tmp_path / "g.tsv", ["hund\tdog", "katze\tcat", "Ja\tyes"])
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--input", source, "--format", "jsonl",
                       "--glossary", glossary, *FAST)
    assert code == 0
    rows = jsonl(out)
    assert rows[0]["glossary"] == [{"source": "hund", "target": "dog"}] and "dog" in rows[0]["text"]
    assert rows[1]["glossary"] == []  # 'katze' is not a whole word of 'katzen'
    assert rows[3]["glossary"] == []  # case-sensitive
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), "--input", source, "--format", "jsonl",
                       "--glossary", glossary, "--glossary-ignore-case", *FAST)
    rows = jsonl(out)
    assert rows[3]["glossary"] == [{"source": "Ja", "target": "yes"}] and "yes" in rows[3]["text"]


BAD = [
    (["{}"], "1 lines, but"),  # a line count that does not match
    ([], "the file is empty"),
    (["{}", "{not json", "{}", "{}"], "line 2 is not JSON"),
    (["{}", "{}", "[]", "{}"], "line 3 must be a JSON object"),
    (['{"incl": ["a"]}', "{}", "{}", "{}"], "line 1: unknown key"),
    (['{"include": "dog"}', "{}", "{}", "{}"], "line 1: 'include' must be a list of strings"),
    (["{}", '{"include": ["QQ"]}', "{}", "{}"], "line 2: the phrase 'QQ' is only unknown tokens"),
    (["{}", "{}", "{}", '{"include": ["' + "a b " * 30 + '"]}'], "line 4: the constraints (and prefix) have"),
]


@pytest.mark.parametrize(("lines", "message"), BAD)
def test_bad_constraint_files_stop_with_one_line_naming_file_and_line(
    model_dir, source, tmp_path, capsys, lines, message
):
    constraints = tmp_path / "c.jsonl"
    constraints.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    output = tmp_path / "out.txt"
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--input", source,
                         "--constraints", str(constraints), "--output", str(output), "--chunk-lines", "1",
                         *FAST)
    assert code == 2 and out == "" and not output.exists()
    assert err.count("\n") == 1 and str(constraints) in err and message in err


@pytest.mark.parametrize(("lines", "message"), [
    (["hund"], "line 1 must be 'source term<TAB>target term'"),
    (["hund\tdog", "\tcat"], "line 2 must be"),
    ([], "the file is empty"),
])
def test_bad_glossaries_stop_with_one_line(model_dir, source, tmp_path, capsys, lines, message):
    glossary = tmp_path / "g.tsv"
    glossary.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--input", source,
                         "--glossary", str(glossary), *FAST)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err and str(glossary) in err


def test_greedy_and_sampling_refuse_phrases_to_include(model_dir, tmp_path, capsys):
    constraints = write(tmp_path / "c.jsonl", ['{"include": ["dog"]}'])
    for extra in (["--beam", "1"], ["--sample", "--seed", "1"]):
        code, out, err = run(capsys, "translate", "--model", str(model_dir), "--text", "ja",
                             "--constraints", constraints, "--device", "cpu", *extra)
        assert code == 2 and out == "" and err.count("\n") == 1
    assert "greedy search cannot" in run(capsys, "translate", "--model", str(model_dir), "--text", "ja",
                                          "--constraints", constraints, "--beam", "1")[2]


def test_greedy_blocks_excluded_phrases(model_dir, capsys, tmp_path):
    greedy = ["--text", "ein hund läuft", "--beam", "1", "--max-len", "4", "--device", "cpu"]
    _, plain, _ = run(capsys, "translate", "--model", str(model_dir), *greedy)
    word = plain.split()[0] if plain.split() else "x"
    constraints = write(tmp_path / "c.jsonl", [json.dumps({"exclude": [word]})])
    code, out, _ = run(capsys, "translate", "--model", str(model_dir), *greedy, "--constraints", constraints)
    assert code == 0 and word not in out.split()


def test_evaluate_reports_the_keep_rate(model_dir, tmp_path, capsys):
    source = write(tmp_path / "src.txt", SOURCES)
    ref = write(tmp_path / "ref.txt", TARGETS)
    constraints = write(tmp_path / "c.jsonl", ['{"include": ["dog"]}', '{"exclude": ["two"]}', *["{}"] * 3])
    figures, report = tmp_path / "eval.json", tmp_path / "report.html"
    code, out, _ = run(capsys, "evaluate", "--model", str(model_dir), "--input", source, "--ref", ref,
                       "--constraints", constraints, "--json", str(figures), "--report", str(report), *FAST)
    assert code == 0 and "constraints: 1/1 phrases to include kept" in out
    rates = json.loads(figures.read_text())["constraints"]
    assert rates["keep_rate"] == 1.0 and rates["include_phrases"] == 1
    assert rates["exclude_phrases"] == 1 and rates["exclude_appeared"] == 0
    shown = json.loads(report.with_suffix(".json").read_text())["corpus"]["constraints"]  # the report's data
    assert shown == rates


def test_python_api_include_and_exclude(model_dir):
    import aiayn

    translator = aiayn.load(model_dir, device="cpu")
    out = translator.translate(["ja", "zwei katzen"], beam=3, max_len_extra=3, include=[["yes"], None],
                               exclude=[None, ["c"]])
    assert "yes" in out[0] and "c" not in out[1]
    with pytest.raises(ConfigError, match="one list of phrases per text"):
        translator.translate(["ja"], include=[["yes"], ["no"]])
    with pytest.raises(ConfigError, match="has no tokens"):
        translator.translate(["ja"], include=[[" "]])


INTERACTIONS = [
    ["--nbest", "2"],
    ["--quantize", "int8"],  # (--compile: the same search around a compiled step; compiling costs minutes)
    ["--prefix", "t"],
    ["--no-repeat-ngram-size", "2", "--repetition-penalty", "1.5"],
    ["--scores", "--alignments"],
    ["--model", "ENSEMBLE"],
]


@pytest.mark.parametrize("extra", INTERACTIONS, ids=lambda e: e[0])
def test_constraints_with_the_other_options(model_dir, source, tmp_path, capsys, extra):
    extra = [str(model_dir) if e == "ENSEMBLE" else e for e in extra]  # the same model twice
    constraints = write(tmp_path / "c.jsonl", ['{"include": ["dog"]}', '{"exclude": ["o"]}', "{}", "{}"])
    code, out, err = run(capsys, "translate", "--model", str(model_dir), "--input", source,
                         "--format", "jsonl", "--constraints", constraints, *FAST, *extra)
    assert code == 0, err
    rows = jsonl(out)
    assert all("dog" in r["text"] for r in rows if r["line"] == 0)
    assert all("o" not in r["text"] for r in rows if r["line"] == 1)
    if "--prefix" in extra:
        assert all(r["text"].startswith("t") for r in rows if r["line"] != 2)
    if "--scores" in extra:
        assert all(len(r["token_scores"]) == len(r["text"]) + 1 for r in rows if r["text"])


def test_a_ctranslate2_model_takes_exclude_and_refuses_include(model_dir, source, tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
    from aiayn.export import export_ctranslate2

    exported = str(export_ctranslate2(model_dir, tmp_path / "ct2"))
    _, plain, _ = run(capsys, "translate", "--model", exported, "--input", source, *FAST)
    banned = sorted({c for line in plain.split("\n") for c in line if c.isalpha()})[:2]
    excluded = write(tmp_path / "x.jsonl", [json.dumps({"exclude": banned})] * len(LINES))
    code, out, err = run(capsys, "translate", "--model", exported, "--input", source,
                         "--constraints", excluded, *FAST)
    assert code == 0, err
    assert not set(banned) & set(out)
    included = write(tmp_path / "i.jsonl", ['{"include": ["dog"]}', "{}", "{}", "{}"])
    code, out, err = run(capsys, "translate", "--model", exported, "--input", source,
                         "--constraints", included, *FAST)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "not available with a CTranslate2 model" in err
