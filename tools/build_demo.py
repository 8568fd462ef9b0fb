"""Build the live demo of chapter 9 into _build/demo/dates-demo/, which the book serves as _static/dates-demo/.

    .venv/bin/python tools/build_demo.py [--out _build/demo]

`make book` runs it (after `npm ci`) before `jupyter-book build`; `_config.yml` names `_build/demo` in
`html_static_path`, so Sphinx copies the folder into the site. It writes:

1. the model: `transformer_lib.deploy.export_demo(transformer_lib.dates.pretrained())`, the two ONNX graphs
   (encoder, decoder step), `config.json` and `vocab.json`;
2. the runtime: onnxruntime-web's WebAssembly-only ES-module bundle (as `ort.wasm.bundle.min.js`: a `.js` name
   gets a JavaScript MIME type from any server) and its `.wasm`, gzip-compressed (the page decompresses it),
   from `node_modules/` as `npm ci` installed it from `package-lock.json` (MIT licence, in the bundle's header);
3. the page's script and style sheet, `demo/dates_demo.js` and `demo/dates_demo.css`.

It fails if `node_modules` does not hold the onnxruntime-web version that package.json pins, or if the files
add more than 15 MB to the site; it prints each file's size.
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT_BYTES = 15_000_000
NAME = "dates-demo"
RUNTIME = {"ort.wasm.bundle.min.mjs": "ort.wasm.bundle.min.js", "ort-wasm-simd-threaded.wasm": None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "demo")
    args = parser.parse_args(argv)
    package = ROOT / "node_modules" / "onnxruntime-web"
    pinned = json.loads((ROOT / "package.json").read_text())["dependencies"]["onnxruntime-web"]
    installed = json.loads((package / "package.json").read_text())["version"] if package.is_dir() else None
    if installed != pinned:
        print(f"build_demo: node_modules holds onnxruntime-web {installed}, package.json pins {pinned}: "
              "run `npm ci` (make book does)", file=sys.stderr)
        return 1
    folder = args.out / NAME
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)

    from transformer_lib.dates import pretrained
    from transformer_lib.deploy import export_demo

    export_demo(pretrained("cpu"), folder)
    for source, target in RUNTIME.items():
        if target is None:                                   # the .wasm, compressed (14 MB -> under 4 MB)
            data = gzip.compress((package / "dist" / source).read_bytes(), compresslevel=9, mtime=0)
            (folder / f"{source}.gz").write_bytes(data)
        else:
            shutil.copyfile(package / "dist" / source, folder / target)
    for name in ("dates_demo.js", "dates_demo.css"):
        shutil.copyfile(ROOT / "demo" / name, folder / name)

    # Sphinx copies html_static_path only when a page changed; a site built before gets the new files here.
    built = ROOT / "_build" / "html" / "_static" / NAME
    if args.out == ROOT / "_build" / "demo" and built.is_dir():
        shutil.rmtree(built)
        shutil.copytree(folder, built)

    sizes = {p.name: p.stat().st_size for p in sorted(folder.iterdir())}
    total = sum(sizes.values())
    for name, size in sizes.items():
        print(f"  {size:>12,}  {name}")
    print(f"build_demo: {total:,} bytes in {folder} (onnxruntime-web {installed}; limit {LIMIT_BYTES:,})")
    if total > LIMIT_BYTES:
        print(f"build_demo: the demo adds {total:,} bytes to the site, more than {LIMIT_BYTES:,}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
