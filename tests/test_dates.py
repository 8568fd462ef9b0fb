"""The date task of chapter 9: vocabulary, data generation, splits and bad input."""

import datetime
import re

import pytest
import torch

from transformer_lib.data import bucket_batches, collate
from transformer_lib.dates import (FORMATS, LOCALES, PRETRAINED_PATH, TARGET_VOCAB, YEARS, CharVocab, DatePair,
                                   DateTranslator, date_problem, encode_pairs, make_date_pairs, pretrained,
                                   render_date, source_vocab, translate)
from transformer_lib.generation import cross_attention_weights
from transformer_lib.model import Transformer, TransformerConfig


def test_vocab_round_trip_and_specials():
    vocab = CharVocab.from_texts(["15. Februar 2019", "2019年2月15日", "пятница"])
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id) == (0, 1, 2) and vocab.itos[:3] == list(CharVocab.specials)
    for text in ("15. Februar 2019", "2019年2月15日", "пятница", ""):
        ids = vocab.encode(text)
        assert ids[-1] == vocab.eos_id and len(ids) == len(text) + 1
        assert vocab.decode(ids) == text
        assert vocab.decode((vocab.bos_id,) + ids + (0, 0, 5)) == text     # BOS skipped, stops at EOS
    assert len(TARGET_VOCAB) == 14


def test_vocab_bad_input():
    vocab = CharVocab("abc")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        vocab.encode("abd")
    with pytest.raises(ValueError, match="outside the vocabulary of size"):
        vocab.decode([3, 99])
    with pytest.raises(ValueError, match="single characters"):
        CharVocab(["ab", "c"])


def test_determinism():
    assert make_date_pairs(300, seed=7) == make_date_pairs(300, seed=7)
    assert make_date_pairs(300, seed=7) != make_date_pairs(300, seed=8)
    assert source_vocab().itos == source_vocab().itos


def test_every_locale_and_format_writes_four_digit_years():
    for locale in LOCALES:
        for fmt in FORMATS:
            for date in (datetime.date(1950, 1, 1), datetime.date(2049, 12, 31), datetime.date(2007, 7, 7)):
                text = render_date(date, locale, fmt)
                assert str(date.year) in text, (locale, fmt, text)
    for locale in LOCALES:                                               # 'short' is forced to 4 digits
        assert "2007" in render_date(datetime.date(2007, 7, 7), locale, "short")
    pairs = make_date_pairs(2000, seed=0)
    assert {p.locale for p in pairs} == set(LOCALES) and {p.format for p in pairs} == set(FORMATS)
    assert all(p.target[:4] in p.source for p in pairs)


def test_targets_are_iso_dates_in_range():
    pairs = make_date_pairs(1000, seed=1, year_range=(1999, 2001))
    for p in pairs:
        assert isinstance(p, DatePair)
        date = datetime.date.fromisoformat(p.target)
        assert date.isoformat() == p.target and 1999 <= date.year <= 2001


def test_split_disjoint_and_no_ambiguous_source():
    test = make_date_pairs(500, seed=1)
    train = make_date_pairs(5000, seed=0, exclude={p.target for p in test})
    assert not {p.target for p in train} & {p.target for p in test}
    meaning = {}
    for p in train + test:
        assert meaning.setdefault(p.source, p.target) == p.target


def test_encode_and_bucket_batches():
    vocab = source_vocab()
    ids = encode_pairs(make_date_pairs(600, seed=2), vocab)
    assert all(t[-1] == 2 and len(t) == 11 for _, t in ids)
    batches = list(bucket_batches(ids, 64, generator=torch.Generator().manual_seed(0), bucket=4))
    assert sum(len(b.src) for b in batches) == 600
    rows = sorted(tuple(r[r != 0].tolist()) for b in batches for r in b.src)
    assert rows == sorted(s for s, _ in ids)


def test_translate_and_attention_shapes():
    vocab = source_vocab()
    config = TransformerConfig(src_vocab_size=len(vocab), tgt_vocab_size=len(TARGET_VOCAB), d_model=16, nhead=2, num_encoder_layers=1,
                               num_decoder_layers=2, dim_feedforward=32, dropout=0.0, max_len=64)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    out = translate(model, ["15. Februar 2019", "2019年2月15日"], vocab)
    assert len(out) == 2 and all(set(o) <= set("0123456789-") for o in out)
    batch = collate(encode_pairs(make_date_pairs(3, seed=0), vocab))
    maps = cross_attention_weights(model, batch.src, batch.tgt_in)
    assert len(maps) == 2
    for w in maps:
        assert w.shape == (3, batch.tgt_in.shape[1], batch.src.shape[1])
        assert torch.allclose(w.sum(-1), torch.ones(3, batch.tgt_in.shape[1]), atol=1e-5)
        assert torch.all(w[batch.src.eq(0)[:, None, :].expand_as(w)] == 0)    # no attention on padding


@pytest.mark.parametrize("kwargs, argument", [
    ({"locales": ("en", "xx_NOPE")}, "locales"),
    ({"locales": ()}, "locales"),
    ({"locales": "en"}, "locales"),
    ({"year_range": (50, 99)}, "year_range"),
    ({"year_range": (1999, 12345)}, "year_range"),
    ({"year_range": (2001, 1999)}, "year_range"),
    ({"year_range": (1999,)}, "year_range"),
    ({"formats": ()}, "formats"),
    ({"formats": ("dd.MM.yy",)}, "formats"),
    ({"num": 0}, "num"),
])
def test_bad_input_names_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        make_date_pairs(**{"num": 10, **kwargs})


def test_exclude_everything():
    with pytest.raises(ValueError, match="exclude"):
        make_date_pairs(5, year_range=(2000, 2000),
                        exclude={(datetime.date(2000, 1, 1) + datetime.timedelta(k)).isoformat() for k in range(366)})


def test_pretrained_ships_with_the_library_and_translates():
    translator = pretrained("cpu")
    assert isinstance(translator, DateTranslator)
    c = translator.model.config
    assert (c.d_model, c.num_encoder_layers, c.num_decoder_layers) == (64, 2, 2) and not translator.model.training
    assert translator.src_vocab.itos == source_vocab().itos
    assert translator("15. Februar 2019") == "2019-02-15"
    texts = ["2019年2月15日", "Feb 15, 2019", "sexta-feira, 15 de fevereiro de 2019"]
    assert translator(texts) == ["2019-02-15"] * 3
    assert translator([]) == []
    info = translator.info
    assert info["command"] == "OMP_NUM_THREADS=1 python tools/train_pretrained.py"
    assert info["recipe"]["seed"] == 0 and info["recipe"]["steps"] == 1000 and info["recipe"]["schedule"] == "linear"
    assert info["test_size"] == 2000 and info["test_correct"] >= 0.99 * 2000


def test_pretrained_bad_input_names_the_argument():
    translator = pretrained("cpu")
    with pytest.raises(TypeError, match="texts must be a str or a sequence of str"):
        translator(20190215)
    with pytest.raises(TypeError, match="texts"):
        translator(["15. Februar 2019", None])
    with pytest.raises(ValueError, match=r"texts\[1\] has 500 characters; the model reads at most 63"):
        translator(["15. Februar 2019", "1" * 500])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        translator("15. Februar 2019 ☃")


def test_the_checkpoint_is_package_data():
    """`pip install .` ships transformer_lib/pretrained/dates.pt: pyproject's package-data matches it."""
    import fnmatch
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")            # Python >= 3.11

    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert (root / "transformer_lib" / PRETRAINED_PATH).is_file()
    assert any(fnmatch.fnmatch(PRETRAINED_PATH, p) for p in patterns["transformer_lib"])


def test_the_front_page_shows_the_models_answers(tmp_path):
    """tools/draw_front_page.py writes the front page's dates and install example from what
    `pretrained()` answers; book/intro.md includes what it writes."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("yaml")  # the script reads _config.yml; the torch-floor venv has no PyYAML
    pytest.importorskip("graphviz")  # and draws the architecture (the book's extra)
    root = Path(__file__).resolve().parents[1]
    script = root / "tools" / "draw_front_page.py"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True)
    dates = (tmp_path / "dates.md").read_text(encoding="utf-8")
    table = dates.split("|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    assert len(rows) == 3 and all(len(r) == 2 for r in rows), rows
    translator = pretrained("cpu")
    info = translator.info
    pairs = make_date_pairs(info["test_size"], seed=info["test_seed"])  # chapter 9 test set
    truth = {p.source: p.target for p in pairs}
    assert [truth[t] for t, _ in rows] == [a for _, a in rows]  # the true dates, not just answers
    assert translator([t for t, _ in rows]) == [a for _, a in rows]
    install = (tmp_path / "install.md").read_text(encoding="utf-8")
    assert f"translate(\"{rows[1][0]}\")  # '{rows[1][1]}'" in install
    intro = (root / "book" / "intro.md").read_text(encoding="utf-8")
    for name in ("dates.md", "architecture.md", "install.md"):
        assert f"```{{include}} ../_build/demo/figures/{name}\n```" in intro


# Issue 23's list: what the library answered before it checked its answers.
OUTSIDE = {"": "is empty", "hello": "holds 0 four-digit years", "tomorrow": "holds 0 four-digit years",
           "32 February 2019": "no date of the year 2019", "31 April 2019": "no date of the year 2019",
           "15/02/2019": "no date of the year 2019", "15/08/2024": "no date of the year 2024",
           "2025-03-04": "no date of the year 2025", "le 14 juillet 1789": "its year 1789 lies outside 1950-2049",
           "1 January 1850": "its year 1850 lies outside 1950-2049"}


@pytest.mark.parametrize("text", list(OUTSIDE))
def test_the_translator_refuses_what_it_cannot_have_read(text):
    translator = pretrained("cpu")
    with pytest.raises(ValueError, match=re.escape(OUTSIDE[text])):
        translator(text)
    if text:
        assert translator([text, "9. November 1989"], errors="none") == [None, "1989-11-09"]


def test_date_problem_checks_the_year_at_both_ends():
    assert date_problem("9. November 1989", "1989-11-09") is None
    assert "no date of the year 1989" in date_problem("9. November 1989", "1998-11-09")    # copied wrong
    assert "no date of the year 2019" in date_problem("29 February 2019", "2019-02-29")   # not a leap year
    assert date_problem("29 February 2020", "2020-02-29") is None
    assert "holds 2 four-digit years" in date_problem("1989 or 1990", "1989-01-01")
    assert YEARS == (1950, 2049) and "outside 1950-2049" in date_problem("1 May 2050", "2050-05-01")
    with pytest.raises(ValueError, match="errors must be 'raise' or 'none'"):
        pretrained("cpu")("9. November 1989", errors="ignore")


# (text, answer) pairs on which demo/dates_demo.js and date_problem must agree, word for word: issue 23's
# refusals, the confident wrong dates of issue 32 (a day or month that the text does not hold), numbers
# with leading zeros and ordinals, a day equal to the month, and answers that are no ISO date.
CHECKED = [("February 2019", "2019-02-02"), ("July 1969", "1969-07-01"), ("Dec 25 2020", "2020-12-02"),
           ("Dec 25 2020", "2020-12-25"), ("25 December 2020", "2020-12-25"), ("2020-12-25", "2025-12-20"),
           ("2020-12-25", "2020-12-25"), ("29 February 2020", "2020-02-29"), ("29 February 2019", "2019-02-29"),
           ("15.02.2019", "2019-02-15"), ("15.02.2019", "2019-02-02"), ("15.02.2019", "2019-15-02"),
           ("05.05.2019", "2019-05-05"), ("05.06.2019", "2019-05-05"), ("25th December 2020", "2020-12-25"),
           ("2019年2月15日", "2019-02-15"), ("2019年2月15日", "2019-12-15"), ("月, 9 11月 2020", "2020-01-09"),
           ("月, 9 11月 2020", "2020-11-09"), ("15 十二月 2019", "2019-12-15"), ("15 十二月 2019", "2019-12-05"),
           ("9. November 1989", "1998-11-09"), ("9. November 1989", "1989-11-9"), ("9. November 1989", "19891109"),
           ("9. November 1989", ""), ("9. November 1989", "1989-11-09-"), ("1 May 2050", "2050-05-01"),
           ("1989 or 1990", "1989-01-01"), ("hello", "2019-01-01"), ("", "2019-01-01"), ("15/08/2024", "2018-02-24"),
           ("１５. Februar ２０１９", "2019-02-15"), ("31 April 2019", "2019-04-31"), ("Feb 30, 2019", "2019-02-30")]


def test_date_problem_reads_the_answer_from_the_text():
    """The day, and the month written as a number, must be numbers of the text (issue 32)."""
    assert date_problem("February 2019", "2019-02-02") == "the day 2 is not a number in the text"
    assert date_problem("Dec 25 2020", "2020-12-02") == "the day 2 is not a number in the text"
    assert date_problem("25th December 2020", "2020-12-25") is None
    assert date_problem("05.06.2019", "2019-06-05") is None
    assert date_problem("05.05.2019", "2019-05-05") is None                          # one run each
    why = "the month 2 is not a number in the text besides its year and day"
    assert date_problem("15.02.2019", "2019-02-02") == why                             # 02 is the day's
    assert date_problem("月, 9 11月 2020", "2020-01-09").startswith("the month 1 is not")
    assert date_problem("15 十二月 2019", "2019-12-15") is None                           # month in words
    assert "holds 0 four-digit years" in date_problem("１５. Februar ２０１９", "2019-02-15")   # digits 0-9 only
    for locale in LOCALES:                                  # every true date of two years, all formats
        for fmt in FORMATS:
            for k in range(366 + 365):
                date = datetime.date(2000, 1, 1) + datetime.timedelta(k)
                assert date_problem(render_date(date, locale, fmt), date.isoformat()) is None


def test_the_translator_gives_none_item_by_item():
    translator = pretrained("cpu")
    texts = ["15. Februar 2019", "", "1 January 1850", "1" * 500, "15. Februar 2019 ☃", "February 2019"]
    assert translator(texts, errors="none") == ["2019-02-15"] + [None] * 5
    assert translator("", errors="none") is None
    with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
        translator(texts)
    with pytest.raises(TypeError, match="texts"):
        translator(["15. Februar 2019", None], errors="none")


def test_the_demo_checks_as_the_library_does():
    """demo/dates_demo.js's check (between its `date_problem: begin` and `end` lines), run by Node, gives
    date_problem's answer, word for word, on CHECKED and on true dates in every locale and format."""
    import json
    import shutil
    import subprocess
    from pathlib import Path

    script = (Path(__file__).resolve().parents[1] / "demo" / "dates_demo.js").read_text(encoding="utf-8")
    assert f"const YEARS = [{YEARS[0]}, {YEARS[1]}];" in script
    check = script.split("// date_problem: begin\n", 1)[1].split("// date_problem: end\n", 1)[0]
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node is not installed (make test installs it for the demo)")
    cases = CHECKED + [(p.source, p.target) for p in make_date_pairs(400, seed=5)]
    program = check + "\nconst cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n" \
        "process.stdout.write(JSON.stringify(cases.map(([t, a]) => dateProblem(t, a))));\n"
    run = subprocess.run([node, "-e", program], input=json.dumps(cases), capture_output=True, text=True,
                         encoding="utf-8", check=True, timeout=60)
    assert json.loads(run.stdout) == [date_problem(t, a) for t, a in cases]


def test_the_front_pages_notation_table_states_the_drawn_models_sizes():
    """book/intro.md's notation table and the sentence under it give the base model's sizes: the
    library's defaults, and the 32,000-token vocabularies of the figure's model."""
    import re
    import sys
    from pathlib import Path

    from transformer_lib.config import TransformerConfig

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "tools"))
    pytest.importorskip("yaml")
    pytest.importorskip("graphviz")
    from draw_front_page import base_model

    config = base_model().config
    assert config.d_model == TransformerConfig.d_model and config.nhead == TransformerConfig.nhead
    intro = (root / "book" / "intro.md").read_text(encoding="utf-8")
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\| \$([^$]+)\$ \|[^|]*\| ([^|]*) \|$", intro, re.M)}
    assert table["d"] == str(config.d_model) and table["H"] == str(config.nhead)
    assert table["d_k"] == str(config.d_model // config.nhead)
    assert table["d_{ff}"] == str(config.dim_feedforward)
    assert table["V"] == f"{config.src_vocab_size} each" and config.src_vocab_size == config.tgt_vocab_size
    assert table["N"] == f"{config.num_encoder_layers} each" == f"{config.num_decoder_layers} each"
    assert (f"has {config.src_vocab_size} tokens in each vocabulary" in intro
            and f"and {config.num_encoder_layers} layers in each stack" in intro.replace("\n", " "))
