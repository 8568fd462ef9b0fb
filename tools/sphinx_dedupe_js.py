"""Sphinx extension: drop duplicate inline <script> blocks from every HTML page.

Sphinx 7.4 registers an inline script added by an extension after the builder started
(`app.add_js_file(None, body=...)`) twice: once with filename None and once with filename ''.
sphinx-thebe's `const THEBE_JS_URL = ...` then appears twice on every page and the browser
reports "SyntaxError: Identifier 'THEBE_JS_URL' has already been declared".
Fixed upstream in Sphinx 8.2 (sphinx-doc/sphinx#13402); jupyter-book 1.x pins Sphinx < 8.
Loaded from _config.yml (sphinx.local_extensions); tools/browser_test.py checks the result.
"""
from __future__ import annotations


def _dedupe(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        filename = getattr(js, "filename", js) or ""
        key = (str(filename), getattr(js, "priority", None),
               tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
