"""The rendered-book checker (tools/browser_test.py) catches what it claims to catch.

Two synthetic pages are checked in headless Chromium: a good one must pass, and a bad one
(JavaScript error, TeX error, broken image, a figure without alt text or caption, code that
scrolls sideways, wrong Colab link, request to another host) must
fail with a message for each fault. Skipped where Chromium is not installed.
"""
from __future__ import annotations

import base64
import json
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "browser_test.py"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
CHROMIUM = next((shutil.which(c) for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None)
MATHJAX = '<script async src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script>'
PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def load_module():
    spec = importlib.util.spec_from_file_location("browser_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def page(body: str) -> str:
    return f"<!DOCTYPE html><html><head><meta charset='utf-8'>{MATHJAX}</head><body><main><article>{body}</article></main></body></html>"


def test_expected_colab_url_comes_from_config():
    mod = load_module()
    org_repo = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    assert mod.expected_colab(CONFIG, "02_attention") == (
        f"https://colab.research.google.com/github/{org_repo}/blob/main/notebooks/02_attention.ipynb")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser-setup installs it)")
def test_checker_passes_a_good_page_and_names_every_fault_of_a_bad_one(tmp_path):
    mod = load_module()
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "notebooks" / "fig.png").write_bytes(PNG_1x1)
    good_colab = mod.expected_colab(CONFIG, "00_good")
    zoom = "<script src='figure-zoom.js'></script>"  # the book's script: figures link to full size
    (html / "notebooks" / "figure-zoom.js").write_text((ROOT / "book" / "_static" / "figure-zoom.js").read_text())
    (html / "notebooks" / "00_good.html").write_text(page(
        f'<p><span class="math">\\(\\frac{{a}}{{\\sqrt{{d_k}}}}\\)</span></p>'
        f'<figure><img src="fig.png" alt="a one-pixel test image"><figcaption>A caption.</figcaption></figure>'
        f'<div class="highlight"><pre>{"x = 1  # fits" * 3}</pre></div><a href="{good_colab}">Colab</a>{zoom}'))
    (html / "notebooks" / "01_bad.html").write_text(page(
        '<p><span class="math">\\(\\frac{a}{\\undefinedmacro}\\)</span></p>'
        '<p><span class="math">\\(a^\\)</span></p>'
        '<img src="missing.png" alt="missing">'
        '<figure><img src="fig.png" alt="fig.png"></figure>'
        f'<div class="highlight"><pre>{"y = 2 + " * 60}</pre></div>'
        '<img src="https://example.invalid/remote.png" alt="remote">'
        f'<a href="{mod.expected_colab(CONFIG, "00_good")}">Colab</a>'
        '<script>throw new Error("boom from the page")</script>'))
    # A page of the learner's path (named in _toc.yml) past both budgets: 170 code lines shown and
    # 13 screens tall; the same code inside a closed fold (<details>) does not count.
    long_code = "\n".join(f"x{i} = {i}" for i in range(170))
    (html / "notebooks" / "03_feedforward.html").write_text(page(
        f'<figure><img src="fig.png" alt="a test image"><figcaption>A caption.</figcaption></figure>'
        f'<div class="highlight"><pre>{long_code}</pre></div>'
        f'<details><summary>folded</summary><div class="highlight"><pre>{long_code}</pre></div></details>'
        f'<p>Five words of prose here.</p><div style="height: 13000px"></div>'
        f'<a href="{mod.expected_colab(CONFIG, "03_feedforward")}">Colab</a>{zoom}'))
    shots = tmp_path / "shots"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(html), "--screenshots", str(shots)],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ok   notebooks/00_good.html: 1 code lines shown, " in out, out
    assert "1 math typeset, 1 figures with alt text and caption" in out, out
    long_page = out.split("FAIL notebooks/03_feedforward.html", 1)[1].split("FAIL", 1)[0]
    assert "170 code lines shown before any fold is opened, the learner's path allows 160" in long_page, out
    assert "screens of 1000 px at 1280 px with every fold closed, the learner's path allows 12" in long_page, out
    measures = json.loads((shots / "measures.json").read_text())
    assert measures["notebooks/03_feedforward.html"]["visibleCode"] == 170
    assert measures["notebooks/03_feedforward.html"]["proseWords"] == 7  # the caption's two and these five
    bad = out.split("FAIL notebooks/01_bad.html", 1)[1]
    for fault in ("boom from the page",
                  "2 TeX errors",
                  'undefined macro \\undefinedmacro in "\\frac{a}{\\undefinedmacro}"',
                  'Missing superscript or subscript argument in "a^"',
                  "missing.png", "2 of 3 images did not load",
                  "1 of 3 figures have no alt text (or only a file name): fig.png",
                  "3 of 3 figures have no caption",
                  "3 of 3 figures do not link to their full-size image",
                  "1 shown code blocks scroll sideways at 1280 px",
                  "request left the book (external request): https://example.invalid/remote.png",
                  "Colab link is", "notebooks/01_bad.ipynb"):
        assert fault in bad, f"{fault!r} not reported:\n{out}"
    assert (shots / "00_good.png").stat().st_size > 0
    assert (shots / "00_good-figure.png").stat().st_size > 0


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser-setup installs it)")
def test_checker_fails_a_capstone_page_without_its_demo(tmp_path):
    """The capstone page must carry the live demo: a page without it fails, naming the missing elements."""
    mod = load_module()
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "notebooks" / "09_dates.html").write_text(page(
        f'<p>no demo here</p><figure><img src="fig.png" alt="a test image"><figcaption>A caption.'
        f'</figcaption></figure><a href="{mod.expected_colab(CONFIG, "09_dates")}">Colab</a>'
        "<script src='figure-zoom.js'></script>"))
    (html / "notebooks" / "figure-zoom.js").write_text((ROOT / "book" / "_static" / "figure-zoom.js").read_text())
    (html / "notebooks" / "fig.png").write_bytes(PNG_1x1)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(html), "--screenshots", str(tmp_path / "shots")],
                          capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ok   notebooks/09_dates.html" in out, out
    assert "FAIL demo on notebooks/09_dates.html" in out and "no #dates-demo-input and #dates-demo-output" in out, out


def matplotlib_png(width_in: float) -> bytes:
    """A PNG as the book's figures are written: matplotlib at 100 dpi (the dpi is in its pHYs chunk)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width_in, 1.5), dpi=100)
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser-setup installs it)")
def test_checker_measures_figure_text_and_formulas_at_400_px(tmp_path):
    """At 400 px: a figure shrunk until its text is smaller than a caption fails (PNG and SVG alike),
    a page that scrolls sideways fails, and on the learner's path a display formula wider than its
    column fails; a figure shown at natural size in a narrow column passes."""
    mod = load_module()
    html = tmp_path / "html"
    (html / "notebooks").mkdir(parents=True)
    (html / "notebooks" / "small.png").write_bytes(matplotlib_png(3.0))   # 300 px: shown whole
    (html / "notebooks" / "wide.png").write_bytes(matplotlib_png(9.0))    # 900 px: shrunk to ~370
    (html / "notebooks" / "tiny.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" width="800pt" height="100pt" viewBox="0 0 800 100">'
        '<text x="10" y="50" font-size="8">tiny</text></svg>')
    (html / "notebooks" / "figure-zoom.js").write_text((ROOT / "book" / "_static" / "figure-zoom.js").read_text())
    style = "<style>figcaption { font-size: 13px } img { max-width: 100% }</style>"

    def chapter(name: str, body: str) -> str:  # a phone's viewport, as the book's pages declare it
        return page(f"{style}{body}<a href=\"{mod.expected_colab(CONFIG, name)}\">Colab</a>"
                    "<script src='figure-zoom.js'></script>").replace(
            "<head>", '<head><meta name="viewport" content="width=device-width, initial-scale=1">')

    (html / "notebooks" / "00_good.html").write_text(chapter("00_good", (
        '<figure><img src="small.png" alt="a small test plot"><figcaption>A caption.</figcaption></figure>')))
    formula = "$$" + " + ".join(f"x_{{{i}}}" for i in range(40)) + "$$"
    (html / "notebooks" / "03_feedforward.html").write_text(chapter("03_feedforward", (
        '<figure><img src="wide.png" alt="a wide test plot"><figcaption>A caption.</figcaption></figure>'
        '<figure><img src="tiny.svg" alt="a test diagram"><figcaption>A caption.</figcaption></figure>'
        f'<div class="math notranslate nohighlight">{formula}</div>'
        '<div style="width: 900px">a wide block</div>')))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(html), "--screenshots", str(tmp_path / "shots")],
                          capture_output=True, text=True, timeout=180)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    narrow = out.split("pages at 400 px", 1)[1]
    assert "notebooks/00_good.html" not in narrow, out
    for fault in ("figure wide.png: smallest text", "smaller than a caption (13.0 px)",
                  "figure tiny.svg: smallest text",
                  "a display formula is", "scrolls sideways"):
        assert fault in narrow, f"{fault!r} not reported:\n{out}"
    wide_px = float(narrow.split("figure wide.png: smallest text ", 1)[1].split(" px", 1)[0])
    assert 3 < wide_px < 7, out    # 10 pt at 100 dpi is 13.9 px at natural size; 900 px shrunk to ~300
