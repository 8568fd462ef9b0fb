"""The notebook → library contract of CONTRIBUTING.md, checked on every chapter."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def code_cells(path: Path) -> list[dict]:
    return [c for c in cells(path) if c["cell_type"] == "code"]


def exported_modules(path: Path) -> set[str]:
    """Modules a notebook writes: its default_exp, plus any `#| export <module>` targets."""
    mods = set()
    for cell in code_cells(path):
        for m in re.finditer(r"^#\|\s*(default_exp|export)[ \t]+(\w+)", source(cell), re.M):
            mods.add(m.group(2))
    return mods


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_default_exp_and_colab_install(path):
    first = code_cells(path)[0]
    text = source(first)
    assert text.startswith("#| default_exp "), f"{path.name}: first code cell must start with #| default_exp"
    assert "remove-cell" in first["metadata"].get("tags", []), f"{path.name}: default_exp cell must be tagged remove-cell"
    assert '"google.colab" in sys.modules' in text, f"{path.name}: Colab install must be guarded"
    urls = re.findall(r"git\+(https://[^\s\"']+)", text)
    assert urls == [CONFIG["repository"]["url"]], (
        f"{path.name}: installs from {urls}, but _config.yml names {CONFIG['repository']['url']}")


def test_config_has_colab_button():
    assert CONFIG["launch_buttons"]["colab_url"].startswith("https://colab.research.google.com")
    assert CONFIG["repository"]["url"].startswith("https://github.com/")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_title_cell_has_summary(path):
    md = [c for c in cells(path) if c["cell_type"] == "markdown"]
    assert md and source(md[0]).startswith("# "), f"{path.name}: first markdown cell must be the title"
    assert "\n> " in source(md[0]), f"{path.name}: title cell needs a '> summary' line (module docstring)"


def test_notebooks_import_only_earlier_chapters():
    owner = {}
    for path in NOTEBOOKS:
        for mod in exported_modules(path):
            owner.setdefault(mod, path.name)
    for path in NOTEBOOKS:
        for cell in code_cells(path):
            for mod in re.findall(r"(?:from|import)\s+transformer_lib\.(\w+)", source(cell)):
                assert mod in owner, f"{path.name} imports transformer_lib.{mod}, which no notebook exports"
                assert owner[mod] < path.name, (
                    f"{path.name} imports transformer_lib.{mod} from {owner[mod]}, a later chapter")


def test_toc_lists_exactly_existing_pages():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())

    def entries(items):
        for item in items:
            yield item["file"]
            yield from entries(item.get("sections", []))

    files = [toc["root"]] + [f for part in toc["parts"] for f in entries(part["chapters"])]
    for f in files:
        assert any((ROOT / f).with_suffix(ext).exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {f}"
    for path in NOTEBOOKS:
        assert f"notebooks/{path.stem}" in files, f"{path.name} is not in _toc.yml"


def test_init_is_committed_and_library_imports():
    import transformer_lib  # noqa: F401

    assert (ROOT / "transformer_lib" / "__init__.py").exists()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_named_after_its_module(path):
    """`NN_<module>.ipynb` writes `transformer_lib/<module>.py`: the stem after the number names the module."""
    module = re.match(r"#\|\s*default_exp[ \t]+(\w+)", source(code_cells(path)[0])).group(1)
    assert path.stem.split("_", 1)[1] == module, f"{path.name} writes {module}.py; call it NN_{module}.ipynb"
    assert exported_modules(path) == {module}, f"{path.name} writes {sorted(exported_modules(path))}"


def test_the_capstone_demo_is_wired_to_the_build():
    """Chapter 9's live demo: the page's elements and script, the built files' folder, onnxruntime-web pinned."""
    page = "".join(source(c) for c in cells(ROOT / "notebooks" / "09_dates.ipynb") if c["cell_type"] == "markdown")
    for needle in ('id="dates-demo-input"', 'id="dates-demo-output"', 'id="dates-demo-heatmap"',
                   '<script type="module" src="../_static/dates-demo/dates_demo.js"></script>'):
        assert needle in page, f"09_dates.ipynb lacks {needle}"
    assert "_build/demo" in CONFIG["sphinx"]["config"]["html_static_path"]
    assert 'NAME = "dates-demo"' in (ROOT / "tools" / "build_demo.py").read_text()
    pins = json.loads((ROOT / "package.json").read_text())["dependencies"]
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins["onnxruntime-web"]), "pin onnxruntime-web to one version"
    assert lock["node_modules/onnxruntime-web"]["version"] == pins["onnxruntime-web"]
    assert lock["node_modules/onnxruntime-web"]["integrity"].startswith("sha512-")
    script = (ROOT / "demo" / "dates_demo.js").read_text()
    assert not re.search(r"https?://|//cdn|wss?://", script), "the demo loads only files of the built site"


PAGE_WIDTH = 126   # characters of code the book shows without scrolling (book/_static/wide-code.css)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_shown_in_the_book_fits_the_page(path):
    """Every line of a code cell the book shows is at most PAGE_WIDTH characters."""
    assert f"{PAGE_WIDTH} characters" in (ROOT / "book" / "_static" / "wide-code.css").read_text()
    shown = [c for c in code_cells(path) if "remove-cell" not in c["metadata"].get("tags", [])]
    long = [line for cell in shown for line in source(cell).splitlines() if len(line) > PAGE_WIDTH]
    assert not long, f"{path.name}: {len(long)} code line(s) over {PAGE_WIDTH} characters, e.g. {long[0]!r}"
