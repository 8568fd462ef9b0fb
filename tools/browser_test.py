"""Rendered-book test: open every page of the built book in headless Chromium and check it.

    .venv/bin/python tools/browser_test.py [_build/html]

For every chapter page (``notebooks/*.html``) and every prose page (``book/*.html``):

* no JavaScript error (uncaught exception, ``console.error``, or a resource that failed to load);
* every math element was typeset by MathJax, without a TeX error;
* every figure (``<img>``) loaded (``naturalWidth > 0``);
* every figure in the page's content has alt text (not a file name) and a caption, and links to
  its full-size image (a tap on a phone); a chapter page has at least one;
* the learner's path (the first part of ``_toc.yml``): at most 160 code lines shown before any fold
  is opened, and a page at most 12 screens of 1,000 px tall at 1280 px; every page's shown code
  lines, words of prose and height are printed and written to ``measures.json`` beside the
  screenshots;
* no shown code block (a cell's input, or code in the prose) scrolls sideways at 1280 px;
* chapters only: the Colab launch link opens that chapter's notebook,
  ``https://colab.research.google.com/github/<org>/<repo>/blob/<branch>/notebooks/<name>.ipynb``,
  with org, repo and branch taken from ``_config.yml``.

A screenshot of each page (top, and the first figure when there is one) is written to
``_build/screenshots/``.

The live demo of chapter 9 (``notebooks/09_dates.html``) is driven as a reader would: twenty held-out
test dates, two from each of the ten locales, are typed into ``#dates-demo-input``, and each answer in
``#dates-demo-output`` must equal what the shipped model, ``transformer_lib.dates.pretrained()``,
answers in PyTorch for the same text; the cross-attention heatmap must be drawn for each (its size
matching the input and the answer). An empty box, characters outside the vocabulary and a 500-character
paste must get a message and no answer, quickly; so must texts that ``date_problem`` refuses, with its
reason word for word. Until the model is ready the box must say "Loading…". With WebAssembly removed
from the page, the demo must say so. The time from the page's load to the first answer is measured and printed, not asserted;
screenshots ``09_dates-demo.png`` and ``09_dates-demo-no-wasm.png``.

At 400 px (a phone), every page is loaded again: it must not scroll sideways; every figure's
smallest text, as shown, must be at least a caption's font size (an SVG's font sizes are read from
the file against its viewBox; a PNG's smallest text is ``FIGURE_MIN_PT`` at the dpi in its pHYs
chunk); on the learner's path and the front page every display formula fits its column; the demo
(after it has answered a date, with its heatmap) fits the window. Screenshots ``<page>-400.png``,
``<page>-figure-400.png`` (front page, chapters 2, 5c and 9) and ``09_dates-demo-400.png``.

The pages are served over HTTP from a local server. The browser has no network: the page's
MathJax script (``https://cdn.jsdelivr.net/npm/mathjax@3/...``) and the fonts it loads are
answered, through the DevTools protocol (``Fetch`` domain), from the local copy of MathJax 3
installed by the PyPI package ``django-static-mathjax`` (pinned in requirements.txt). The HTML
under test is therefore byte-for-byte the HTML that is published. Any other request that leaves
the local server is refused and reported as a failure.

Chromium is Debian's ``chromium`` (``make setup`` installs it), driven over the DevTools protocol
with ``websocket-client``; nothing is downloaded.
"""
from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import mimetypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

try:
    import websocket  # websocket-client
except ImportError:
    sys.exit("browser test: websocket-client is not installed; run `make setup` (requirements.txt pins it)")
import yaml

ROOT = Path(__file__).resolve().parents[1]
MATHJAX_CDN = re.compile(r"^https://cdn\.jsdelivr\.net/npm/mathjax@3(?:\.[0-9.]+)?/([^?#]*)")
PAGE_TIMEOUT_S = 30.0
WIDTH, HEIGHT = 1280, 1000
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    f"--window-size={WIDTH},{HEIGHT}", "--remote-debugging-port=0", "--remote-allow-origins=*",
]

# Runs in the page once it has loaded: waits for MathJax (typesetting) and every image, then reports.
CHECK_JS = r"""
(async () => {
  const timeout = (ms) => new Promise(r => setTimeout(() => r('timeout'), ms));
  const mathNodes = [...document.querySelectorAll('.math')];
  let mathjax = 'absent';
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    mathjax = await Promise.race([MathJax.startup.promise.then(() => 'ok', e => 'error: ' + e), timeout(%(ms)d)]);
  } else if (mathNodes.length) {
    // The script may still be loading: give it the same time.
    const t0 = Date.now();
    while (!(window.MathJax && MathJax.startup && MathJax.startup.promise) && Date.now() - t0 < %(ms)d)
      await new Promise(r => setTimeout(r, 100));
    if (window.MathJax && MathJax.startup && MathJax.startup.promise)
      mathjax = await Promise.race([MathJax.startup.promise.then(() => 'ok', e => 'error: ' + e), timeout(%(ms)d)]);
  }
  const imgs = [...document.images];
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.race([Promise.all(imgs.map(img => img.decode().catch(() => null))), timeout(%(ms)d)]);
  const untypeset = mathNodes.filter(n => !n.querySelector('mjx-container'))
                             .map(n => n.textContent.trim().slice(0, 80));
  // A TeX syntax error becomes <merror>; an undefined macro becomes red <mtext> (noundefined).
  const texErrors = [];
  try {
    for (const item of (MathJax.startup.document.math || [])) {
      let err = null;
      item.root.walkTree(node => {
        if (err) return;
        if (node.isKind('merror')) err = node.attributes.get('data-mjx-error') || 'TeX error';
        else if (node.isKind('mtext') && node.attributes.get('mathcolor') === 'red')
          err = 'undefined macro ' + (node.childNodes[0] && node.childNodes[0].text || '');
      });
      if (err) texErrors.push(`${err} in "${String(item.math).slice(0, 80)}"`);
    }
  } catch (e) {}
  if (!texErrors.length)  // the DOM, if MathJax's internals could not be read
    texErrors.push(...[...document.querySelectorAll('mjx-merror')].map(n => 'TeX error: ' + n.textContent.slice(0, 80)));
  const colab = [...document.querySelectorAll('a[href*="colab.research.google.com"]')].map(a => a.href);
  const badImgs = imgs.filter(img => !(img.complete && img.naturalWidth > 0))
                      .map(img => img.getAttribute('src') || img.currentSrc);
  // Figures of the page's content: alt text (not the file name myst-nb gives by default) and a caption.
  const article = document.querySelector('article') || document.body;
  const figures = [...article.querySelectorAll('img')].map(img => {
    const fig = img.closest('figure'), src = img.getAttribute('src') || '';
    const caption = fig && fig.querySelector('figcaption') ? fig.querySelector('figcaption').textContent.trim() : '';
    const link = img.closest('a');
    return {src: src.split('/').pop(), alt: (img.getAttribute('alt') || '').trim(), caption,
            fullSize: !!link && link.getAttribute('href') === src};
  });
  // Shown code (cell inputs and code blocks in the prose, not outputs, not folded cells) that scrolls sideways.
  const wideCode = [...article.querySelectorAll('div.highlight pre')]
    .filter(pre => !pre.closest('.cell_output') && pre.clientWidth > 0 && pre.scrollWidth > pre.clientWidth + 1)
    .map(pre => pre.innerText.split('\n').reduce((a, b) => b.length > a.length ? b : a, '').slice(0, 100));
  // What a reader meets before opening any fold: code lines shown, words of prose, the page's height.
  const shown = el => el.getClientRects().length > 0;
  const visibleCode = [...article.querySelectorAll('div.cell_input pre, div.highlight pre')]
    .filter(pre => !pre.closest('.cell_output') && shown(pre))
    .reduce((n, pre) => n + pre.innerText.split('\n').filter(l => l.trim()).length, 0);
  const proseWords = [...article.querySelectorAll('p, li, dt, dd, th, td, h1, h2, h3, h4, figcaption')]
    .filter(el => shown(el) && !el.closest('.cell_output') && !el.closest('pre')
                  && !el.parentElement.closest('p, li, dt, dd, th, td, figcaption'))
    .reduce((n, el) => n + el.innerText.split(/\s+/).filter(w => /\w/.test(w)).length, 0);
  const pageHeight = document.documentElement.scrollHeight;
  return {visibleCode, proseWords, pageHeight, figures, wideCode, mathjax, nMath: mathNodes.length, nTypeset: document.querySelectorAll('mjx-container').length,
          untypeset, texErrors, colab, nImgs: imgs.length, badImgs,
          title: document.title, codeCells: document.querySelectorAll('div.cell').length};
})()
"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output readable
        pass


def mathjax_root() -> Path:
    """The local MathJax 3 tree (the one the CDN's ``mathjax@3/`` prefix maps to)."""
    env = os.environ.get("MATHJAX_DIR")
    if env:
        root = Path(env)
    else:
        try:
            import mathjax  # django-static-mathjax
        except ImportError:
            sys.exit("browser test: MathJax is not installed locally; run `make setup` "
                     "(requirements.txt pins django-static-mathjax) or set MATHJAX_DIR")
        root = Path(mathjax.__file__).parent / "static" / "mathjax"
    if not (root / "es5" / "tex-mml-chtml.js").is_file():
        sys.exit(f"browser test: no es5/tex-mml-chtml.js under MathJax root {root}")
    return root


def find_chromium() -> str:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("browser test: no chromium on PATH; `make setup` installs Debian's chromium with apt-get")


def expected_colab(config: dict, name: str) -> str:
    url = config["repository"]["url"].rstrip("/")
    m = re.match(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?$", url)
    if not m:
        sys.exit(f"browser test: repository.url in _config.yml is not a GitHub URL: {url}")
    branch = config["repository"].get("branch", "main")
    book = (config["repository"].get("path_to_book") or "").strip("/")
    path = f"{book}/notebooks/{name}.ipynb" if book else f"notebooks/{name}.ipynb"
    colab = config.get("launch_buttons", {}).get("colab_url", "https://colab.research.google.com").rstrip("/")
    return f"{colab}/github/{m.group(1)}/{m.group(2)}/blob/{branch}/{path}"


class Browser:
    """Headless Chromium over the DevTools protocol: one tab, reused for every page."""

    def __init__(self, chromium: str, mj_root: Path, local_prefix: str):
        self.profile = tempfile.mkdtemp(prefix="tt-chromium-")
        self.proc = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.mj_root, self.local_prefix = mj_root, local_prefix
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited at start-up with code {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port within 30 s")
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        targets = self._http_json(f"http://127.0.0.1:{port}/json/list")
        page = next(t for t in targets if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=PAGE_TIMEOUT_S,
                                              suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        for method, params in [("Page.enable", {}), ("Runtime.enable", {}), ("Log.enable", {}),
                               ("Network.setCacheDisabled", {"cacheDisabled": False}),
                               ("Emulation.setDeviceMetricsOverride",
                                {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}),
                               ("Fetch.enable", {"patterns": [{"urlPattern": "*", "requestStage": "Request"}]})]:
            self.call(method, params)

    @staticmethod
    def _http_json(url: str):
        import urllib.request
        for _ in range(50):
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    return json.load(r)
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"cannot reach chromium's DevTools endpoint {url}")

    def send(self, method: str, params: dict | None = None) -> int:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params or {}}))
        return self.next_id

    def _dispatch(self, msg: dict) -> None:
        if msg.get("method") == "Fetch.requestPaused":
            self._answer_request(msg["params"])
        elif "method" in msg:
            self.events.append(msg)

    def _answer_request(self, p: dict) -> None:
        url, rid = p["request"]["url"], p["requestId"]
        if url.startswith(self.local_prefix) or url.startswith("data:"):
            self.send("Fetch.continueRequest", {"requestId": rid})
            return
        m = MATHJAX_CDN.match(url)
        if m:
            path = (self.mj_root / m.group(1)).resolve()
            if path.is_file() and self.mj_root.resolve() in path.parents:
                ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
                if path.suffix == ".js":
                    ctype = "application/javascript"
                self.send("Fetch.fulfillRequest", {
                    "requestId": rid, "responseCode": 200,
                    "responseHeaders": [{"name": "Content-Type", "value": ctype},
                                        {"name": "Access-Control-Allow-Origin", "value": "*"}],
                    "body": base64.b64encode(path.read_bytes()).decode()})
                return
            self.events.append({"method": "tt.blocked", "params": {"url": url, "why": "not in the local MathJax copy"}})
        else:
            self.events.append({"method": "tt.blocked", "params": {"url": url, "why": "external request"}})
        self.send("Fetch.failRequest", {"requestId": rid, "errorReason": "BlockedByClient"})

    def call(self, method: str, params: dict | None = None, timeout: float = PAGE_TIMEOUT_S) -> dict:
        cid = self.send(method, params)
        deadline = time.monotonic() + timeout
        while True:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                raise TimeoutError(f"{method} got no answer within {timeout:.0f} s") from None
            if msg.get("id") == cid:
                if "error" in msg:
                    raise RuntimeError(f"{method} failed: {msg['error']}")
                return msg.get("result", {})
            self._dispatch(msg)

    def wait_event(self, method: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {method} within {timeout:.0f} s")
            self.ws.settimeout(left)
            try:
                self._dispatch(json.loads(self.ws.recv()))
            except websocket.WebSocketTimeoutException:
                raise TimeoutError(f"no {method} within {timeout:.0f} s") from None

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            shutil.rmtree(self.profile, ignore_errors=True)


def js_errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            text = (d.get("exception") or {}).get("description") or d.get("text", "")
            line = d["lineNumber"] + 1 if "lineNumber" in d else "?"
            out.append(f"uncaught exception: {text.splitlines()[0] if text else d} ({d.get('url', '')}:{line})")
        elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.error: {args[:200]}")
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            entry = p["entry"]
            if entry.get("url", "").endswith("/favicon.ico"):  # the theme has no favicon; browsers ask anyway
                continue
            if "ERR_BLOCKED_BY_CLIENT" in entry.get("text", ""):  # our own refusal, reported as tt.blocked
                continue
            out.append(f"{entry.get('source', 'log')} error: {entry.get('text', '')[:200]} {entry.get('url', '')}".rstrip())
        elif m == "tt.blocked":
            out.append(f"request left the book ({p['why']}): {p['url']}")
    return out


HASH_NAME = re.compile(r"^[0-9a-f]{32,}\.\w+$")


def figure_failures(rel: str, figures: list[dict]) -> list[str]:
    """A chapter page has at least one figure; every figure has real alt text and a caption."""
    fails = []
    if rel.startswith("notebooks/") and not figures:
        fails.append("no figure on this chapter page")
    no_alt = [f["src"] for f in figures if not f["alt"] or f["alt"] == f["src"] or HASH_NAME.match(f["alt"])]
    no_caption = [f["src"] for f in figures if not f["caption"]]
    no_link = [f["src"] for f in figures if not f["fullSize"]]
    if no_link:
        fails.append(f"{len(no_link)} of {len(figures)} figures do not link to their full-size image "
                     f"(book/_static/figure-zoom.js): {', '.join(no_link[:3])}")
    if no_alt:
        fails.append(f"{len(no_alt)} of {len(figures)} figures have no alt text (or only a file name): "
                     f"{', '.join(no_alt[:3])}")
    if no_caption:
        fails.append(f"{len(no_caption)} of {len(figures)} figures have no caption: {', '.join(no_caption[:3])}")
    return fails


# The learner's path (the first part of _toc.yml): what a page shows before any fold is opened.
CODE_BUDGET = 160             # shown code lines, as tools/page_budget.py counts them from the notebook
HEIGHT_BUDGET_SCREENS = 12    # "about ten screens" of HEIGHT px at WIDTH px
# The one page assembles every chapter's short version: its code is what it shows (about 150 lines
# of model, then the training), so the code budget does not apply to it; the height budget does.
CODE_BUDGET_EXEMPT = {"notebooks/one_page.html"}


@functools.lru_cache(maxsize=None)
def learners_path() -> frozenset[str]:
    """The pages of the table of contents' part "The learner's path"."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    path = next(p for p in toc["parts"] if p["caption"] == "The learner's path")
    return frozenset(f"{c['file']}.html" for c in path["chapters"])


def check_page(browser: Browser, base_url: str, rel: str, config: dict, shots: Path) -> tuple[list[str], dict]:
    browser.events.clear()
    browser.call("Page.navigate", {"url": f"{base_url}/{rel}"})
    browser.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S)
    res = browser.call("Runtime.evaluate", {"expression": CHECK_JS % {"ms": 15000}, "awaitPromise": True,
                                            "returnByValue": True}, timeout=PAGE_TIMEOUT_S)
    if "exceptionDetails" in res:
        return [f"the check script failed: {res['exceptionDetails'].get('text')}"], {}
    r = res["result"]["value"]
    # Let late console errors (e.g. from MathJax's font loads) arrive before judging.
    try:
        browser.call("Runtime.evaluate", {"expression": "new Promise(r => setTimeout(r, 200))", "awaitPromise": True})
    except TimeoutError:
        pass
    fails = js_errors(browser.events)
    if r["nMath"]:
        if r["mathjax"] != "ok":
            fails.append(f"MathJax did not finish ({r['mathjax']}) with {r['nMath']} math elements on the page")
        if r["untypeset"]:
            fails.append(f"{len(r['untypeset'])} of {r['nMath']} math elements not typeset, first: {r['untypeset'][0]}")
    if r["texErrors"]:
        fails.append(f"{len(r['texErrors'])} TeX errors: " + "; ".join(r["texErrors"][:3]))
    if r["badImgs"]:
        fails.append(f"{len(r['badImgs'])} of {r['nImgs']} images did not load: {', '.join(r['badImgs'][:5])}")
    name = Path(rel).stem
    fails += figure_failures(rel, r["figures"])
    if r["wideCode"]:
        fails.append(f"{len(r['wideCode'])} shown code blocks scroll sideways at {WIDTH} px, widest line: "
                     f"{max(r['wideCode'], key=len)!r}")
    if rel in learners_path():
        if r["visibleCode"] > CODE_BUDGET and rel not in CODE_BUDGET_EXEMPT:
            fails.append(f"{r['visibleCode']} code lines shown before any fold is opened, the learner's path "
                         f"allows {CODE_BUDGET}: fold the engineering under 'Under the hood'")
        if r["pageHeight"] > HEIGHT_BUDGET_SCREENS * HEIGHT:
            fails.append(f"the page is {r['pageHeight'] / HEIGHT:.1f} screens of {HEIGHT} px at {WIDTH} px with every "
                         f"fold closed, the learner's path allows {HEIGHT_BUDGET_SCREENS}")
    if rel.startswith("notebooks/"):
        want = expected_colab(config, name)
        if not r["colab"]:
            fails.append(f"no Colab link (want {want})")
        elif any(h != want for h in r["colab"]):
            fails.append(f"Colab link is {sorted(set(r['colab']))}, want {want}")
    if name == "08_cost":                # the benchmark records, displayed as Markdown: real tables
        tables = browser.call("Runtime.evaluate", {"expression": """(() => {
            const outs = [...document.querySelectorAll('.cell_output')];
            return [outs.reduce((n, o) => n + o.querySelectorAll('table').length, 0),
                    outs.some(o => o.innerText.includes('|---|'))]; })()""", "returnByValue": True})
        n_tables, raw = tables["result"]["value"]
        if n_tables < 2 or raw:
            fails.append(f"chapter 8's benchmark tables: {n_tables} <table> in the outputs (want 2), "
                         f"raw Markdown table text shown: {raw}")
    shot = shots / f"{name}.png"
    browser.call("Runtime.evaluate", {"expression": "window.scrollTo(0, 0)"})
    browser.screenshot(shot)
    fig = browser.call("Runtime.evaluate", {"expression": """(() => {
        const img = document.querySelector('article img');
        if (!img) return false; img.scrollIntoView({block: 'center'}); return true; })()""",
                                            "returnByValue": True})
    if fig["result"].get("value"):
        browser.screenshot(shots / f"{name}-figure.png")
    return fails, r


DEMO_PAGE = "notebooks/09_dates.html"

# Waits until the demo has answered `text` (or says why not), then reports the answer and the heatmap.
DEMO_WAIT_JS = r"""
(async () => {
  const text = %(text)s, needle = %(needle)s, ms = %(ms)d, t0 = performance.now();
  const out = document.getElementById('dates-demo-output'), msg = document.getElementById('dates-demo-message');
  while (performance.now() - t0 < ms) {
    const answered = text !== null && out.dataset.for === text;
    const refused = text === null && out.textContent === '' && msg.dataset.kind === %(kind)s
      && msg.textContent.includes(needle);
    if (answered || refused || (text !== null && msg.dataset.kind === 'error' && out.textContent === '')) break;
    await new Promise(r => setTimeout(r, 20));
  }
  const c = document.getElementById('dates-demo-heatmap');
  const cells = [];                                    // the grey level at the centre of every cell
  if (!c.hidden && c.width && c.dataset.grid) {
    const g = JSON.parse(c.dataset.grid), ctx = c.getContext('2d');
    for (let r = 0; r < +c.dataset.rows; r++) {
      const row = [];
      for (let k = 0; k < +c.dataset.cols; k++) {
        const x = Math.floor((g.left + (k + 0.5) * g.cell) * g.scale);
        const y = Math.floor((g.top + (r + 0.5) * g.cell) * g.scale);
        row.push(ctx.getImageData(x, y, 1, 1).data[0]);
      }
      cells.push(row);
    }
  }
  return {answer: out.textContent, for: out.dataset.for ?? null, message: msg.textContent, kind: msg.dataset.kind,
          waited: performance.now() - t0, state: document.getElementById('dates-demo').dataset.state,
          heatmap: {hidden: c.hidden, layer: +c.dataset.layer || 0, cells},
          timings: window.datesDemoTimings || {},
          loadEnd: performance.getEntriesByType('navigation')[0].loadEventEnd};
})()
"""


def demo_dates(per_locale: int = 2) -> tuple[list[str], list[str], list[str], list]:
    """`per_locale` held-out test dates of chapter 9 per locale (distinct formats), the shipped model's
    answers in PyTorch, the true ISO dates, and the last decoder layer's cross-attention of each answer
    (rows: the characters written and EOS; columns: the characters read and EOS)."""
    from transformer_lib.data import collate
    from transformer_lib.dates import LOCALES, TARGET_VOCAB, make_date_pairs, pretrained
    from transformer_lib.generation import cross_attention_weights

    chosen = []
    for locale in LOCALES:
        pairs = [p for p in make_date_pairs(2_000, seed=1) if p.locale == locale]   # chapter 9's test set
        formats = []
        for p in pairs:
            if p.format not in formats:
                formats.append(p.format)
                chosen.append(p)
            if len(formats) == per_locale:
                break
    texts = [p.source for p in chosen]
    translator = pretrained("cpu")
    answers = translator(texts)
    weights = []
    for text, answer in zip(texts, answers):
        batch = collate([(translator.src_vocab.encode(text), TARGET_VOCAB.encode(answer))])
        weights.append(cross_attention_weights(translator.model, batch.src, batch.tgt_in)[-1][0].tolist())
    return texts, answers, [p.target for p in chosen], weights


# Inputs outside what the model learned (issue 23's list, and issue 32's dates without a day, or with
# a day the model misreads): the library refuses each, and the page must show no answer and the
# library's reason (`dates.date_problem`), word for word.
OUTSIDE = ["hello", "tomorrow", "32 February 2019", "31 April 2019", "15/02/2019", "15/08/2024",
           "2025-03-04", "le 14 juillet 1789", "1 January 1850", "February 2019", "July 1969", "Dec 25 2020",
           "2020-12-25"]


def library_reasons(texts: list[str]) -> dict[str, str | None]:
    """Why `pretrained()` refuses each text (None: it answers)."""
    from transformer_lib.dates import date_problem, pretrained, translate

    translator = pretrained("cpu")
    answers = translate(translator.model, texts, translator.src_vocab)
    return {t: date_problem(t, a) for t, a in zip(texts, answers)}


def check_dates_demo(browser: Browser, base_url: str, shots: Path) -> tuple[list[str], list[str]]:
    """Drive the live demo of chapter 9; returns (failures, lines to print)."""
    def evaluate(expression: str, timeout: float = PAGE_TIMEOUT_S):
        res = browser.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout)
        if "exceptionDetails" in res:
            raise RuntimeError(f"script failed in the page: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def type_text(text: str, wait_ms: int = 15000, kind: str = "answer", needle: str = "") -> dict:
        evaluate("(() => { const i = document.getElementById('dates-demo-input'); i.focus(); i.select(); })()")
        if text:
            browser.call("Input.insertText", {"text": text})          # as typing or pasting it
        else:                                                         # empty the box: Backspace
            for kind_ in ("keyDown", "keyUp"):
                browser.call("Input.dispatchKeyEvent", {"type": kind_, "key": "Backspace", "code": "Backspace",
                                                        "windowsVirtualKeyCode": 8})
        wanted = text if kind == "answer" else None                 # else: wait for the message with `needle`
        return evaluate(DEMO_WAIT_JS % {"text": json.dumps(wanted), "needle": json.dumps(needle), "ms": wait_ms,
                                        "kind": json.dumps(kind)}, timeout=wait_ms / 1000 + 10)

    fails, lines = [], []
    try:
        texts, expected, truth, weights = demo_dates()
    except Exception as exc:  # noqa: BLE001 - reported as a failure of the test
        return [f"cannot compute the PyTorch answers with transformer_lib: {type(exc).__name__}: {exc}"], []
    browser.events.clear()
    browser.call("Page.navigate", {"url": f"{base_url}/{DEMO_PAGE}"})
    browser.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S)
    if not evaluate("!!document.getElementById('dates-demo-input') && !!document.getElementById('dates-demo-output')"):
        return ["the page has no #dates-demo-input and #dates-demo-output"], []
    # until the model is ready, the box and the message say it is loading
    r = evaluate("(() => { const i = document.getElementById('dates-demo-input'); return {state: "
                 "document.getElementById('dates-demo').dataset.state, box: i.placeholder, "
                 "message: document.getElementById('dates-demo-message').textContent}; })()")
    if r["state"] != "ready" and (r["box"] != "Loading…" or r["message"] != "Loading the model…"):
        fails.append(f"before the model is ready the box must say 'Loading…' and the message 'Loading the "
                     f"model…', got {r!r}")
    first, later, drawn = None, [], 0
    for i, (text, want, w) in enumerate(zip(texts, expected, weights)):
        r = type_text(text, wait_ms=60000 if i == 0 else 15000)
        if r["for"] != text:
            fails.append(f"no answer for {text!r} within {r['waited'] / 1000:.0f} s: message {r['message']!r}")
            break
        if r["answer"] != want:
            fails.append(f"{text!r}: the page answered {r['answer']!r}, PyTorch's pretrained() {want!r}")
        h, grey = r["heatmap"], [[round(255 * (1 - v)) for v in row] for row in w]   # white 0, black 1
        shape = (len(h["cells"]), len(h["cells"][0]) if h["cells"] else 0)
        off = max((abs(a - b) for ra, rb in zip(h["cells"], grey) for a, b in zip(ra, rb)), default=0)
        if h["hidden"] or h["layer"] != 2 or shape != (len(grey), len(grey[0])) or off > 2:   # layer 2 by default
            fails.append(f"{text!r}: the heatmap is not layer 2's cross-attention as {len(grey)} x {len(grey[0])} "
                         f"cells (PyTorch's weights as greys): layer {h['layer']}, {shape[0]} x {shape[1]} cells, "
                         f"grey levels off by up to {off}")
        else:
            drawn += 1
        if i == 0:
            first = r
            box = evaluate("document.getElementById('dates-demo-input').placeholder")
            if box == "Loading…":
                fails.append("the box still says 'Loading…' after the model answered")
        else:
            later.append(r["waited"])
    evaluate("document.getElementById('dates-demo').scrollIntoView()")
    browser.screenshot(shots / "09_dates-demo.png")
    bad = {"empty": ("", "info", "Type a date"), "outside the vocabulary": ("15. Februar 2019 ☃", "error", "U+2603"),
           "500-character paste": (("15. Februar 2019, " * 30)[:500], "error", "500 characters")}
    for name, (text, kind, needle) in bad.items():
        r = type_text(text, wait_ms=5000, kind=kind, needle=needle)
        if r["answer"] or r["kind"] != kind or needle not in r["message"] or r["waited"] > 4000:
            fails.append(f"{name} input: want no answer and a message with {needle!r} within 4 s, got answer "
                         f"{r['answer']!r}, message {r['message']!r} after {r['waited'] / 1000:.1f} s")
    years = evaluate("document.querySelector('#dates-demo .dates-demo-range')?.textContent ?? ''")
    if "1950 to 2049" not in years:
        fails.append(f"the demo does not state the years it learned next to the box: {years!r}")
    for text, reason in library_reasons(OUTSIDE).items():
        if reason is None:
            fails.append(f"{text!r}: pretrained() answers it; the list holds inputs it must refuse")
            continue
        r = type_text(text, wait_ms=15000, kind="error", needle=reason)
        if r["answer"] or r["kind"] != "error" or reason not in r["message"]:
            fails.append(f"{text!r}: want no answer and the library's reason {reason!r}, got answer "
                         f"{r['answer']!r}, message {r['message']!r}")
    lines.append(f"{len(OUTSIDE)} inputs outside what the model learned: refused by the page as by the library")
    if evaluate("1 + 1", timeout=5) != 2:
        fails.append("the page does not answer after the bad input")
    fails += js_errors(browser.events)

    # Without WebAssembly the demo must say so (the rest of the page works).
    script = browser.call("Page.addScriptToEvaluateOnNewDocument", {"source": "delete globalThis.WebAssembly;"})
    try:
        browser.events.clear()
        browser.call("Page.navigate", {"url": f"{base_url}/{DEMO_PAGE}"})
        browser.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S)
        r = type_text(texts[0], wait_ms=10000, kind="error", needle="WebAssembly")
        if r["answer"] or "WebAssembly" not in r["message"] or r["state"] != "unavailable":
            fails.append(f"without WebAssembly: want a message naming it, got answer {r['answer']!r}, "
                         f"message {r['message']!r}, state {r['state']!r}")
        evaluate("document.getElementById('dates-demo').scrollIntoView()")
        browser.screenshot(shots / "09_dates-demo-no-wasm.png")
        fails += js_errors(browser.events)
    finally:
        browser.call("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})
    if first is not None:
        t = first["timings"]
        lines.append(f"{len(texts)} held-out dates from {len(set(texts))} sources in all ten locales typed: "
                     f"{sum(a == b for a, b in zip(expected, truth))}/{len(texts)} correct ISO dates in PyTorch, "
                     f"heatmap drawn for {drawn}")
        lines.append(f"time from page load to the first answer: {(t['firstAnswerMs'] - first['loadEnd']) / 1000:.2f} s "
                     f"(runtime and model loaded in {t['runtimeLoadMs'] / 1000:.2f} s); later answers within "
                     f"{min(later) / 1000:.2f}-{max(later) / 1000:.2f} s of typing (0.1 s of it the page's debounce)")
    return fails, lines


NARROW = 400
NARROW_SHOTS = ["book/intro.html", "notebooks/02_attention.html", "notebooks/05c_model.html", DEMO_PAGE]
# The smallest text a figure may have: every matplotlib text of the book is at least this size
# (BOOK_RC's smallest is 11 pt; tests/test_contract.py fails on a smaller `fontsize=` in a
# notebook), so a PNG figure's smallest text is at least FIGURE_MIN_PT * dpi / 72 px at natural size.
FIGURE_MIN_PT = 10

# At a phone's width: the page never scrolls sideways; each figure is reported with its shown and
# natural widths (its smallest text is computed from its file), each display formula with its width
# against the column's, and the caption's font size.
NARROW_JS = r"""
(() => {
  const w = document.documentElement.clientWidth, article = document.querySelector('article') || document.body;
  const over = el => el.getBoundingClientRect().right > w + 1 || el.getBoundingClientRect().left < -1;
  const figures = [...article.querySelectorAll('img')].map(img => ({
    src: new URL(img.currentSrc || img.src).pathname, shown: img.getBoundingClientRect().width,
    natural: img.naturalWidth}));
  const formulas = [...article.querySelectorAll('mjx-container[display="true"]')].map(m => ({
    width: (m.firstElementChild || m).getBoundingClientRect().width,
    column: m.parentElement.getBoundingClientRect().width,
    text: (m.getAttribute('aria-label') || m.textContent).slice(0, 60)})).filter(f => f.width > f.column + 1);
  const caption = article.querySelector('figcaption');
  const demo = ['dates-demo', 'dates-demo-input', 'dates-demo-output', 'dates-demo-heatmap']
    .map(id => document.getElementById(id)).filter(el => el && !el.hidden);
  return {width: w, figures, formulas, pageWidth: document.documentElement.scrollWidth,
          captionPx: caption ? parseFloat(getComputedStyle(caption).fontSize) : null,
          overflowing: demo.filter(over).map(el => el.id)};
})()
"""

SVG_FONT = re.compile(r'font-size(?:="|:\s*)([0-9.]+)')
SVG_VIEWBOX = re.compile(r'viewBox="[-0-9.]+[ ,]+[-0-9.]+[ ,]+([0-9.]+)')


def smallest_text_px(path: Path, shown: float, natural: float) -> float | None:
    """A figure's smallest text, in CSS px, as shown `shown` px wide (None: not a book figure).

    An SVG (Graphviz) states its font sizes in the units of its viewBox; a PNG (matplotlib) states
    its dpi in its pHYs chunk, and its smallest text is FIGURE_MIN_PT at that dpi."""
    data = path.read_bytes()
    if path.suffix == ".svg":
        text = data.decode("utf-8", "replace")
        sizes, box = [float(x) for x in SVG_FONT.findall(text)], SVG_VIEWBOX.search(text)
        return min(sizes) * shown / float(box.group(1)) if sizes and box else None
    at = data.find(b"pHYs")
    if path.suffix != ".png" or at < 0 or natural <= 0:
        return None
    per_metre, unit = int.from_bytes(data[at + 4:at + 8], "big"), data[at + 12]
    if unit != 1:
        return None
    return FIGURE_MIN_PT * (per_metre * 0.0254) / 72 * shown / natural


def narrow_failures(rel: str, r: dict, html: Path) -> tuple[list[str], float]:
    """What a phone shows wrong on one page; and the page's smallest figure text (px)."""
    fails, smallest = [], float("inf")
    if r["pageWidth"] > r["width"] + 1:
        fails.append(f"the page is {r['pageWidth']} px wide in a {r['width']} px window (it scrolls sideways)")
    if r["overflowing"]:
        fails.append(f"wider than the window: {', '.join(r['overflowing'])}")
    caption = r["captionPx"] or 16.0
    for f in r["figures"]:
        path = html / f["src"].lstrip("/")
        if not f["natural"] or not path.is_file():
            continue                     # an image that did not load: the page's check reports it
        px = smallest_text_px(path, f["shown"], f["natural"])
        if px is None:
            fails.append(f"figure {Path(f['src']).name}: its text size cannot be read (not a book SVG or PNG)")
            continue
        smallest = min(smallest, px)
        if px < caption - 0.5:
            fails.append(f"figure {Path(f['src']).name}: smallest text {px:.1f} px, smaller than a caption "
                         f"({caption:.1f} px), shown {f['shown']:.0f} of {f['natural']} px")
    if rel in learners_path() | {"book/intro.html"}:
        for f in r["formulas"]:
            fails.append(f"a display formula is {f['width']:.0f} px wide in a {f['column']:.0f} px column: "
                         f"{f['text']!r}")
    return fails, smallest


def check_narrow(browser: Browser, base_url: str, shots: Path, pages: list[str],
                 html: Path) -> tuple[list[str], list[str]]:
    """Every page at 400 px: no sideways scroll; every figure's text at least a caption's size; the
    learner's path's display formulas fit; the demo (after one answer) fits. Screenshots
    `<page>-400.png` of a few pages."""
    def evaluate(expression: str, timeout: float = PAGE_TIMEOUT_S):
        res = browser.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, timeout=timeout)
        return res["result"].get("value")

    fails, lines, n_figures, smallest = [], [], 0, float("inf")
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": NARROW, "height": 860, "deviceScaleFactor": 1, "mobile": True})
    try:
        for rel in pages:
            browser.events.clear()
            browser.call("Page.navigate", {"url": f"{base_url}/{rel}"})
            browser.wait_event("Page.loadEventFired", PAGE_TIMEOUT_S)
            evaluate(CHECK_JS % {"ms": 15000})                 # wait for MathJax and the images
            name = Path(rel).stem
            if rel in NARROW_SHOTS:
                browser.screenshot(shots / f"{name}-{NARROW}.png")
                if evaluate("(() => { const i = document.querySelector('article img'); if (!i) return false;"
                            " i.scrollIntoView({block: 'center'}); return true; })()"):
                    browser.screenshot(shots / f"{name}-figure-{NARROW}.png")
            if rel == DEMO_PAGE and not evaluate("!!document.getElementById('dates-demo-input')"):
                fails.append(f"{rel} at {NARROW} px: no demo")
            elif rel == DEMO_PAGE:
                evaluate("(() => { const i = document.getElementById('dates-demo-input'); "
                         "i.scrollIntoView({block: 'start'}); i.focus(); i.select(); })()")
                browser.call("Input.insertText", {"text": "Sunday, July 20, 1969"})
                answered = evaluate(DEMO_WAIT_JS % {"text": json.dumps("Sunday, July 20, 1969"),
                                                    "needle": '""', "ms": 60000, "kind": '"answer"'},
                                    timeout=70)
                if answered["answer"] != "1969-07-20" or answered["heatmap"]["hidden"]:
                    fails.append(f"at {NARROW} px the demo answered {answered['answer']!r}, heatmap hidden: "
                                 f"{answered['heatmap']['hidden']}")
                evaluate("document.getElementById('dates-demo').scrollIntoView({block: 'start'})")
                browser.screenshot(shots / f"{name}-demo-{NARROW}.png")
            r = evaluate(NARROW_JS)
            page_fails, page_smallest = narrow_failures(rel, r, html)
            fails += [f"{rel} at {r['width']} px: {f}" for f in page_fails]
            fails += [f"{rel} at {NARROW} px: {e}" for e in js_errors(browser.events)]
            n_figures += len(r["figures"])
            smallest = min(smallest, page_smallest)
    finally:
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
    lines.append(f"{n_figures} figures on {len(pages)} pages: smallest figure text {smallest:.1f} px")
    return fails, lines


def _timed(check, empty):
    """(check()'s (failures, result), seconds); a browser error becomes one failure."""
    t = time.monotonic()
    try:
        outcome = check()
    except (TimeoutError, RuntimeError, websocket.WebSocketException) as exc:
        outcome = [f"{type(exc).__name__}: {exc}"], empty
    return outcome, time.monotonic() - t


def _report(label: str, fails: list[str], seconds: float, summary) -> int:
    """Print one check's line (ok with `summary()`, or FAIL with its failures); 1 if it failed."""
    if fails:
        print(f"FAIL {label} ({seconds:.1f} s)")
        for f in fails:
            print(f"     - {f}")
        return 1
    print(f"ok   {label}: {summary()} ({seconds:.1f} s)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("html", nargs="?", default=str(ROOT / "_build" / "html"), help="built book (default _build/html)")
    ap.add_argument("--screenshots", default=str(ROOT / "_build" / "screenshots"))
    args = ap.parse_args()
    t0 = time.monotonic()
    html = Path(args.html).resolve()
    pages = sorted(str(p.relative_to(html)) for p in (html / "notebooks").glob("*.html"))
    if not pages:
        print(f"browser test: no chapter pages under {html}/notebooks; build the book first (make book-build)")
        return 1
    pages += sorted(str(p.relative_to(html)) for p in (html / "book").glob("*.html"))
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    shots = Path(args.screenshots)
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        browser = Browser(find_chromium(), mathjax_root(), base_url + "/")
    except (RuntimeError, OSError, StopIteration, websocket.WebSocketException) as exc:
        server.shutdown()
        print(f"browser test: cannot start or connect to chromium: {type(exc).__name__}: {exc}")
        return 1
    failed = 0
    measures: dict[str, dict] = {}
    try:
        for rel in pages:
            (fails, r), dt = _timed(lambda: check_page(browser, base_url, rel, config, shots), {})
            colab = ", Colab link ok" if rel.startswith("notebooks/") else ""
            if r:
                measures[rel] = {k: r[k] for k in ("visibleCode", "proseWords", "pageHeight")}
            failed += _report(rel, fails, dt, lambda: f"{r['visibleCode']} code lines shown, "
                              f"{r['proseWords']} words, {r['pageHeight'] / HEIGHT:.1f} screens, "
                              f"{r['nMath']} math typeset, "
                              f"{len(r['figures'])} figures with alt text and caption, "
                              f"{r['codeCells']} code cells{colab}")
        if DEMO_PAGE in pages:
            (fails, lines), dt = _timed(lambda: check_dates_demo(browser, base_url, shots), [])
            failed += _report(f"demo on {DEMO_PAGE}", fails, dt,
                              lambda: "answers equal PyTorch's, bad input refused, no-WebAssembly message shown")
            for line in lines:
                print(f"     {line}")
        (fails, lines), dt = _timed(lambda: check_narrow(browser, base_url, shots, pages, html), [])
        failed += _report(f"{len(pages)} pages at {NARROW} px", fails, dt,
                          lambda: "no page scrolls sideways, figure text at least a caption's size, "
                                  "the learner's path's formulas fit, the demo fits")
        for line in lines:
            print(f"     {line}")
    finally:
        browser.close()
        server.shutdown()
    path = [p for p in measures if p in learners_path()]
    if path:
        print(f"     the learner's path, {len(path)} pages with every fold closed: "
              f"{sum(measures[p]['proseWords'] for p in path)} words of prose, "
              f"at most {max(measures[p]['visibleCode'] for p in path)} code lines and "
              f"{max(measures[p]['pageHeight'] for p in path) / HEIGHT:.1f} screens a page")
    (shots / "measures.json").write_text(json.dumps(measures, indent=1) + "\n")
    print(f"browser test: {len(pages) - failed}/{len(pages)} pages passed in {time.monotonic() - t0:.1f} s; "
          f"screenshots in {shots}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
