"""The notebook → library contract of CONTRIBUTING.md, checked on every chapter."""
from __future__ import annotations

import json
import re
import subprocess
import sys
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
    # every chapter draws (graphviz, matplotlib): the library with its `book` extra
    assert re.search(r'"transformer_lib\[book(,onnx)?\] @ git\+', text), f"{path.name}: install transformer_lib[book]"
    if path.stem == "09a_deploy":  # it imports onnx and onnxruntime
        assert '"transformer_lib[book,onnx] @ git+' in text, f"{path.name}: install the onnx extra too"


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


GLUE_MIME = "application/papermill.record/text/plain"


def glued_floats(path: Path) -> dict[str, str]:
    """Every float a notebook's stored outputs glue: name -> the stored text."""
    found = {}
    for cell in code_cells(path):
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get(GLUE_MIME, ""))
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and re.fullmatch(r"-?(\d+\.\d*|\d*\.\d+)(e-?\d+)?|-?\d+e-?\d+", text):
                found[name] = text
    return found


def prose_formats(path: Path) -> dict[str, list[str]]:
    """name -> the format specs with which the chapter's Markdown shows a glued value."""
    uses: dict[str, list[str]] = {}
    for cell in cells(path):
        if cell["cell_type"] == "markdown":
            for m in re.finditer(r"\{glue:text\}`([\w.-]+)(?::([^`]*))?`", source(cell)):
                uses.setdefault(m.group(1), []).append(m.group(2) or "")
    return uses


def significant_digits(text: str) -> int:
    return len(text.lstrip("-").split("e")[0].replace(".", "").lstrip("0").rstrip("0"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_glued_floats_carry_no_more_digits_than_the_prose_shows(path):
    """A glued float is a stored output compared on every machine: its full repr differs from one
    CPU's kernels to another's. So it is stored rounded: at most 4 significant digits, and no more
    decimals than the widest format the prose shows it with (`.2f`: 2, `.1%`: 3, `.1e`: 2
    significant digits)."""
    uses = prose_formats(path)
    for name, text in glued_floats(path).items():
        assert significant_digits(text) <= 4, f"{path.name}: {name} is glued as {text}, a float's full repr"
        value = float(text)
        shown = [re.search(r"\.(\d+)([fe%])$", spec) for spec in uses.get(name, [])]
        shown = [(int(m.group(1)), m.group(2)) for m in shown if m]
        if not shown:
            continue
        if all(kind == "e" for _, kind in shown):
            widest = max(n for n, _ in shown)
            assert significant_digits(text) <= widest + 1, f"{path.name}: {name} = {text}, shown as :.{widest}e"
        else:
            decimals = max(n + 2 if kind == "%" else n for n, kind in shown if kind != "e")
            assert round(value, decimals) == value, (
                f"{path.name}: {name} is glued as {text} but the prose shows at most {decimals} decimals; "
                f"glue round(value, {decimals})")


CLOCKS = re.compile(r"\b(perf_counter|perf_counter_ns|monotonic|process_time|time\.time|timeit|benchmark|"
                    r"median_time|matmul_peak)\s*\(")


def _timed_names(statements, timed: set[str], asserts: list) -> None:
    """Walk `statements` in execution order (not into functions or classes): a name assigned from an
    expression that calls a clock or uses a timed name becomes timed, one assigned from anything
    else stops being timed. Collects (assert, timed names it uses)."""
    import ast

    def is_timed(expr) -> bool:
        return expr is not None and bool(CLOCKS.search(ast.unparse(expr)) or names(expr) & timed)

    def names(node) -> set[str]:
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}

    def assign(target, value) -> None:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and isinstance(target, (ast.Tuple, ast.List)):    # for a, b in zip(x, y) / enumerate(x)
            if value.func.id == "zip" and len(value.args) == len(target.elts):
                for t, v in zip(target.elts, value.args):
                    assign(t, ast.Subscript(v, ast.Constant(0)))
                return
            if value.func.id == "enumerate" and len(target.elts) == 2 and value.args:
                assign(target.elts[0], ast.Constant(0))
                assign(target.elts[1], ast.Subscript(value.args[0], ast.Constant(0)))
                return
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                assign(t, v)
        elif isinstance(target, ast.Name):
            (timed.add if is_timed(value) and target.id != "_" else timed.discard)(target.id)
        else:                                     # attribute, subscript, starred: taint the base names
            if is_timed(value):
                timed.update(names(target))

    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                assign(target, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            if is_timed(node.value):
                timed.update(names(node.target))
        elif isinstance(node, ast.For):
            assign(node.target, node.iter)
        elif isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None:
                    assign(item.optional_vars, item.context_expr)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute):       # x.append(t), d.update(...)
            if any(is_timed(a) for a in [*node.value.args, *(k.value for k in node.value.keywords)]):
                timed.update(names(node.value.func.value))
        elif isinstance(node, ast.Assert):
            asserts.append((node, (names(node.test) & timed) | ({"clock"} if CLOCKS.search(ast.unparse(node.test)) else set())))
        for field in ("body", "orelse", "finalbody", "handlers"):
            _timed_names(getattr(node, field, []) or [], timed, asserts)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_assert_depends_on_a_clock(path):
    """No assert in a chapter reads a wall-clock measurement: timing claims come from bench/results.
    A name is timed when it is assigned from an expression that calls a clock (or a timing helper:
    benchmark, median_time, matmul_peak) or that uses a timed name, in this or an earlier cell; an
    assert that uses a timed name fails this test."""
    import ast

    timed: set[str] = set()
    asserts: list = []
    for cell in code_cells(path):
        text = "\n".join(line for line in source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        _timed_names(tree.body, timed, asserts)
    bad = [f"`{ast.unparse(node)[:100]}` ({', '.join(sorted(used))})" for node, used in asserts if used]
    assert not bad, f"{path.name}: {len(bad)} assert(s) on clock readings: " + "; ".join(bad)


MODULE_LINES = 300      # a module past about 300 lines is split by concept (the developers' guide)
SUMMARY_CHARS = 114     # CONTRIBUTING: the title cell's summary, the module docstring's first line


@pytest.mark.parametrize("path", sorted((ROOT / "transformer_lib").glob("*.py")), ids=lambda p: p.name)
def test_no_module_is_longer_than_300_lines(path):
    """One concept per module, short enough to read; nbdev's generated index (_modidx.py) is not one."""
    if path.name == "_modidx.py":
        return
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MODULE_LINES, (f"transformer_lib/{path.name} has {lines} lines, more than "
                                   f"{MODULE_LINES}: split it by concept (a new chapter writes the new module)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_summary_fits_the_docstring_line(path):
    """The `> summary` of the title cell becomes the module docstring: at most 114 characters."""
    title = source(next(c for c in cells(path) if c["cell_type"] == "markdown"))
    summary = next(line[2:] for line in title.splitlines() if line.startswith("> "))
    assert len(summary) <= SUMMARY_CHARS, f"{path.name}: the summary has {len(summary)} characters: {summary!r}"


# What a reader sees (issue 24): figures with captions and alt text, short shown cells, code that
# fits the page. The browser test checks the same on the rendered pages.
FOLDED = {"hide-input", "hide-cell", "remove-input", "remove-cell"}
MAX_SHOWN_LINES, MAX_COLUMNS = 40, 88


def figure_cells(path: Path) -> list[dict]:
    return [c for c in code_cells(path)
            if any(k.startswith("image/") for o in c.get("outputs", []) for k in o.get("data", {}))]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_has_a_figure_and_each_has_a_caption_and_alt_text(path):
    figures = figure_cells(path)
    assert figures, f"{path.name} has no figure"
    for cell in figures:
        meta = cell["metadata"].get("mystnb", {})
        caption = meta.get("figure", {}).get("caption", "")
        alt = meta.get("image", {}).get("alt", "")
        assert len(caption) >= 20 and len(alt) >= 20, (
            f"{path.name}, cell {cell.get('id')}: a figure needs metadata mystnb.figure.caption and "
            f"mystnb.image.alt (got {caption!r}, {alt!r})")
        images = [k for o in cell["outputs"] for k in o.get("data", {}) if k.startswith("image/")]
        assert len(images) == 1, f"{path.name}, cell {cell.get('id')}: one image per figure cell, got {images}"


def test_the_book_has_at_least_45_figures():
    assert sum(len(figure_cells(p)) for p in NOTEBOOKS) >= 45


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_shown_cells_are_short_and_fit_88_columns(path):
    for cell in code_cells(path):
        tags = set(cell["metadata"].get("tags", []))
        if "remove-cell" in tags or "remove-input" in tags:
            continue
        lines = source(cell).splitlines()
        wide = [line for line in lines if len(line) > MAX_COLUMNS]
        assert not wide, f"{path.name}, cell {cell.get('id')}: {len(wide)} lines over {MAX_COLUMNS} columns: {wide[0]!r}"
        if not tags & FOLDED:
            assert len(lines) <= MAX_SHOWN_LINES, (
                f"{path.name}, cell {cell.get('id')}: {len(lines)} shown lines (fold it or split it)")


def exercise_cells(path: Path) -> list[dict] | None:
    """The cells after the Markdown cell with an "Exercises" heading; None without one."""
    all_cells = cells(path)
    for i, cell in enumerate(all_cells):
        headings = [line for line in source(cell).splitlines() if line.startswith("#")]
        if cell["cell_type"] == "markdown" and any("Exercises" in h for h in headings):
            return all_cells[i + 1:]
    return None


def has_assert(cell: dict) -> bool:
    """Whether the code cell holds an `assert` statement (not the word in a comment)."""
    import ast

    text = "\n".join(line for line in source(cell).splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_are_checked_by_an_executed_assert(path):
    """Every chapter with exercises computes and asserts at least one answer after them, in a
    cell that ran (issue 25: every exercise checked)."""
    after = exercise_cells(path)
    if after is None:
        return
    checked = [c for c in after if c["cell_type"] == "code" and c.get("execution_count") is not None
               and has_assert(c)]
    assert checked, (f"{path.name}: no executed code cell after the Exercises heading holds an "
                     "assert; add a folded (hide-input) solution cell that computes and asserts")


def test_the_gpu_workflow_runs_make_test_gpu_on_a_gpu_runner():
    """Issue 35: `.github/workflows/gpu.yml` runs `make test-gpu` on a self-hosted runner labelled
    `gpu`, on demand and on a schedule, and uploads the run's record whatever the outcome."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert "workflow_dispatch" in triggers, "gpu.yml: no workflow_dispatch (run on demand)"
    assert [t.get("cron") for t in triggers.get("schedule") or []], "gpu.yml: no schedule cron"
    assert not {"push", "pull_request"} & set(triggers), "gpu.yml: CI stays CPU-only (.ci/run)"
    jobs = [job for job in workflow["jobs"].values()
            if any(step.get("run", "").strip() == "make test-gpu" for step in job["steps"])]
    assert jobs, "gpu.yml: no step runs `make test-gpu`"
    for job in jobs:
        labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
        assert {"self-hosted", "gpu"} <= set(labels), f"gpu.yml: runs on {labels}, not [self-hosted, gpu]"
        assert job.get("timeout-minutes"), "gpu.yml: the job has no timeout"
        uploads = [step for step in job["steps"]
                   if step.get("uses", "").startswith("actions/upload-artifact@")]
        assert any(step["with"]["path"] == "bench/results/test_gpu-cuda.json"
                   and step.get("if") == "always()" for step in uploads), (
            "gpu.yml: bench/results/test_gpu-cuda.json is not uploaded with `if: always()`")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test\n" in ci and "test-gpu" not in ci, ".ci/run must stay CPU-only"


# Import names whose distribution on PyPI is named otherwise.
DISTRIBUTIONS = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn"}
# What a declared dependency needs at import time without declaring it: torch's wheels do not
# require NumPy, yet `import torch` without it warns "Failed to initialize NumPy" on stderr.
IMPORTED_WITH = {"torch": {"numpy"}}
BOOK_ONLY = {"figures"}  # modules of the book's extra (`pip install ".[book]"` in a clone)


def third_party_imports(path: Path) -> tuple[set[str], set[str]]:
    """The third-party packages a module imports: (at import time, in a function body). Imports
    in a `try` that catches ImportError are optional and left out."""
    import ast
    import sys

    top, inner = set(), set()

    def visit(nodes, in_function: bool) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(node.body, True)
            elif isinstance(node, ast.ClassDef):
                visit(node.body, in_function)
            elif isinstance(node, ast.Try) and any(
                    {"ImportError", "ModuleNotFoundError"} & {n.id for n in ast.walk(h.type or ast.Pass())
                                                             if isinstance(n, ast.Name)}
                    for h in node.handlers):
                visit([n for n in node.body if not isinstance(n, (ast.Import, ast.ImportFrom))], in_function)
                for part in (node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                    visit(part, in_function)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                for name in names:
                    root = name.split(".")[0]
                    if root not in sys.stdlib_module_names and root not in {"__future__", "transformer_lib"}:
                        (inner if in_function else top).add(DISTRIBUTIONS.get(root, root).lower().replace("_", "-"))
            else:
                visit([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)], in_function)

    visit(ast.parse(path.read_text(encoding="utf-8")).body, False)
    return top, inner


def test_the_library_declares_what_it_imports():
    """Issue 32: a clean `pip install` imports without a warning. Every third-party package a
    module of the library imports (and what those need at import time) is in pyproject.toml's
    `dependencies`, or for the book-only modules in the `book` extra; a package imported inside a
    function without a fallback is declared there or in an extra."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(specs: list[str]) -> set[str]:
        return {re.match(r"[A-Za-z0-9_.-]+", s).group(0).lower().replace("_", "-") for s in specs}

    required = names(project["dependencies"])
    extras = {extra: names(specs) for extra, specs in project["optional-dependencies"].items()}
    modules = sorted((ROOT / "transformer_lib").glob("*.py"))
    assert BOOK_ONLY <= {p.stem for p in modules}, f"book-only modules {BOOK_ONLY} not all found"
    missing: dict[str, list[str]] = {}  # package -> the modules that need it, and how
    for path in modules:
        top, inner = third_party_imports(path)
        implied = {need: dist for dist in top for need in IMPORTED_WITH.get(dist, ()) if need not in top}
        declared = required | extras["book"] if path.stem in BOOK_ONLY else required
        for dist in sorted((top | set(implied)) - declared):
            how = f"through {implied[dist]}" if dist in implied else "at import time"
            missing.setdefault(dist, []).append(f"{path.name} ({how})")
        for dist in sorted(inner - required.union(*extras.values())):
            missing.setdefault(dist, []).append(f"{path.name} (in a function)")
    assert not missing, "imported but not declared in pyproject.toml: " + "; ".join(
        f"{dist}, by {', '.join(where)}" for dist, where in missing.items())


FMT_MARK = re.compile(r"#\s*fmt:\s*(off|on|skip)")


def test_every_code_cell_is_ruff_format_output_without_exemptions():
    """Shown code is `ruff format` output at 88 columns (pyproject's [tool.ruff]): no cell and no
    module keeps hand-squeezed lines behind `# fmt: off` or `# fmt: skip`."""
    marked = [f"{p.name}: {line.strip()}" for p in NOTEBOOKS for c in code_cells(p)
              for line in source(c).splitlines() if FMT_MARK.search(line)]
    marked += [f"transformer_lib/{p.name}" for p in sorted((ROOT / "transformer_lib").glob("*.py"))
               if FMT_MARK.search(p.read_text(encoding="utf-8"))]
    assert not marked, "fmt marks: " + "; ".join(marked)
    check = subprocess.run([sys.executable, "-m", "ruff", "format", "--check", *map(str, NOTEBOOKS)],
                           cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, f"not ruff format output:\n{check.stdout}{check.stderr}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_has_its_own_executed_check(path):
    """Issue 34: by exercise, not by chapter. Each numbered exercise k is named in a comment
    (`# k.`, `# Exercise k`, `# Solutions k and m`) of an executed code cell after the
    Exercises heading that holds an assert."""
    cs = cells(path)
    heading = next((i for i, c in enumerate(cs) if c["cell_type"] == "markdown"
                    and re.search(r"^## Exercises", source(c), re.M)), None)
    if heading is None:
        return
    text = source(cs[heading])
    listed = text[text.index("## Exercises"):].split("```{dropdown}")[0]
    exercises = {int(n) for n in re.findall(r"^(\d+)\. ", listed, re.M)}
    checked = set()
    for c in cs[heading + 1:]:
        if c["cell_type"] != "code" or c.get("execution_count") is None or not has_assert(c):
            continue
        for line in source(c).splitlines():
            comment = line[line.index("#"):] if "#" in line else ""
            for first, last in re.findall(r"#\s*(?:(?:Exercises?|Solutions?)\s+)?(\d+)"
                                          r"(?:\s*(?:,|and|-|–)\s*(\d+))?\s*[.:,]", comment):
                checked.update(range(int(first), int(last or first) + 1))
    missing = sorted(exercises - checked)
    assert not missing, f"{path.name}: exercises {missing} have no executed check naming them"


def learners_path():
    """The notebooks of the table of contents' learner's path, chapters 1 to 7 and 9."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "The learner's path")
    files = [ROOT / f"{c['file']}.ipynb" for c in part["chapters"]]
    return [f for f in files if re.match(r"0[1-79]", f.name)]


@pytest.mark.parametrize("path", learners_path(), ids=lambda p: p.name)
def test_a_page_of_the_learners_path_shows_at_most_160_code_lines(path):
    sys.path.insert(0, str(ROOT / "tools"))
    from page_budget import BUDGET, visible_code_lines

    lines = visible_code_lines(path)
    assert lines <= BUDGET, (f"{path.name} shows {lines} code lines unfolded, more than {BUDGET}: fold "
                             "the engineering under the hood (tools/page_budget.py counts them)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_backtick_fence_has_a_backtick_in_its_title(path):
    """CommonMark ends a backtick fence's info string at a backtick: "```{dropdown} The `x`" is no
    fence, and its closing ``` opens a code block of the prose after it. Use :::{dropdown} there."""
    for cell in cells(path):
        if cell["cell_type"] == "markdown":
            bad = re.findall(r"^`{3,}\{\w+\}[^\n]*`[^\n]*$", source(cell), re.M)
            assert not bad, f"{path.name}: {bad[0]!r}: write it as a :::{{...}} colon fence"


FONT_SIZE = re.compile(r"""(?:fontsize|labelsize|["']fontsize["'])\s*[=:]\s*(["']?[\w.-]+["']?)""")
RELATIVE_SIZES = {"xx-small": 0.579, "x-small": 0.694, "small": 0.833, "smaller": 0.833}


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_figure_text_is_at_least_the_smallest_size_a_phone_can_read(path):
    """At 400 px a figure is shown at its natural size (book/_static/wide-code.css), where its text is
    (size in pt) x dpi / 72 px; tools/browser_test.py holds FIGURE_MIN_PT at 100 dpi to a caption's
    size. So no matplotlib text of a chapter is set below FIGURE_MIN_PT, and neither is BOOK_RC."""
    sys.path.insert(0, str(ROOT / "tools"))
    from browser_test import FIGURE_MIN_PT

    from transformer_lib.figures import BOOK_RC

    assert min(v for k, v in BOOK_RC.items() if "size" in k) >= FIGURE_MIN_PT
    for cell in code_cells(path):
        for m in FONT_SIZE.finditer(source(cell)):
            value = m.group(1).strip("\"'")
            if value in RELATIVE_SIZES:
                size = RELATIVE_SIZES[value] * BOOK_RC["font.size"]
            elif re.fullmatch(r"[0-9.]+", value):
                size = float(value)
            else:
                continue  # a name (a variable holding a size) or "large": checked where it is set
            assert size >= FIGURE_MIN_PT, (
                f"{path.name}: {m.group(0)!r} is {size:.1f} pt, below {FIGURE_MIN_PT} pt: at 400 px its "
                "text would be smaller than a caption")
