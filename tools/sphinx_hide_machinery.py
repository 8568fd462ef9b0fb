"""Sphinx extension: the rendered book shows a code cell without its build machinery.

A chapter's code cells carry lines that serve the build, not the reader: nbdev's `#| export`
directives, `glue(...)` calls that hand numbers to the prose, and linter pragmas (`# noqa`).
The notebook keeps them (Colab and nbval run the cell as written); the page drops them from
the cell's displayed source:

- a line that is an nbdev directive (`#| ...`);
- a statement, at any depth, that only records numbers for the prose: `glue(...)`,
  `_ = glue(...)` (or a tuple of such calls), or a `for`/`if`/`with` block whose body is only
  such statements (found with `ast`, so a call over several lines goes as a whole; a block
  never loses its last statement), and a comment line right above it that mentions glue or
  the prose;
- a trailing `# noqa...` or `# fmt: ...` comment (the line itself stays).

Blank lines left at the ends are trimmed, runs of blank lines become one, and a cell left
with no source shows no input box. `hide_machinery` is a pure function of the source, so
tests/test_hide_machinery.py checks it without building the book. Loaded from _config.yml
(sphinx.local_extensions).
"""
from __future__ import annotations

import ast
import re

DIRECTIVE = re.compile(r"^\s*#\|")
PRAGMA = re.compile(r"\s+#\s*(?:noqa\b[^#]*|fmt:\s*\w+)\s*$")
ABOUT_GLUE = re.compile(r"^\s*#.*\b(?:glue|glued|prose)\b", re.I)


def _is_glue_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "glue")


def _records_only(stmt: ast.stmt) -> bool:
    """A statement whose only effect is `glue(...)`: a call, `_ = glue(...)`, or a block of them."""
    if isinstance(stmt, ast.Expr):
        return _is_glue_call(stmt.value)
    if isinstance(stmt, ast.Assign):
        underscore = all(isinstance(t, ast.Name) and t.id == "_" for t in stmt.targets)
        value = stmt.value
        calls = value.elts if isinstance(value, ast.Tuple) else [value]
        return underscore and all(map(_is_glue_call, calls))
    if isinstance(stmt, (ast.For, ast.If, ast.With)):
        orelse = getattr(stmt, "orelse", [])
        return bool(stmt.body) and not orelse and all(map(_records_only, stmt.body))
    return False


def _recorders(body: list[ast.stmt], may_empty: bool = False) -> list[ast.stmt]:
    """The statements of `body`, at any depth, that only record numbers. A nested block
    keeps at least one statement (a block of recorders only is itself one of them)."""
    found = []
    recording = [stmt for stmt in body if _records_only(stmt)]
    if may_empty or len(recording) < len(body):
        found += recording
    for stmt in body:
        if stmt in recording:
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                found += _recorders(inner)
        for handler in getattr(stmt, "handlers", []):
            found += _recorders(handler.body)
    return found


def hide_machinery(source: str) -> str:
    """The source of a code cell as the page shows it (see the module docstring)."""
    lines = source.split("\n")
    drop = {i for i, line in enumerate(lines) if DIRECTIVE.match(line)}
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax: leave the statements alone
        tree = None
    for stmt in _recorders(tree.body, may_empty=True) if tree is not None else []:
        first, last = stmt.lineno - 1, stmt.end_lineno - 1
        drop.update(range(first, last + 1))
        above = first - 1
        while above >= 0 and above not in drop and ABOUT_GLUE.match(lines[above]):
            drop.add(above)
            above -= 1
    kept = [PRAGMA.sub("", line) for i, line in enumerate(lines) if i not in drop]
    text = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", "\n".join(kept))
    return text.strip("\n")


def _strip(app, doctree) -> None:
    from docutils import nodes

    for cell_input in list(doctree.findall(nodes.container)):
        if cell_input.get("nb_element") != "cell_code_source":
            continue
        for block in list(cell_input.findall(nodes.literal_block)):
            shown = hide_machinery(block.astext())
            if shown == block.astext():
                continue
            if not shown:
                cell_input.parent.remove(cell_input)
                break
            block.rawsource = shown
            block.children = [nodes.Text(shown)]


def setup(app):
    app.connect("doctree-read", _strip)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
