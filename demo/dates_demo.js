// The live demo of chapter 9: the date model that ships with transformer_lib (`dates.pretrained()`),
// exported to ONNX by chapter 9a, runs in this page with onnxruntime-web (WebAssembly, one thread).
// Every file comes from the built site (tools/build_demo.py puts them next to this script), and
// nothing typed leaves the page: the only requests are for those files.
const HERE = new URL('./', import.meta.url);
const root = document.getElementById('dates-demo');
const input = document.getElementById('dates-demo-input');
const output = document.getElementById('dates-demo-output');
const message = document.getElementById('dates-demo-message');
const canvas = document.getElementById('dates-demo-heatmap');
const layerInputs = [...document.querySelectorAll('input[name="dates-demo-layer"]')];
const timings = (window.datesDemoTimings = {});    // ms since navigation start, read by the browser test

class Unavailable extends Error {}                 // the browser lacks what the demo needs: said plainly

function say(text, kind = 'info') {
  message.textContent = text;
  message.dataset.kind = kind;
}

function showAnswer(text, iso) {
  output.textContent = iso;
  output.dataset.for = text;
}

async function fetchOk(name) {
  const response = await fetch(new URL(name, HERE));
  if (!response.ok) throw new Error(`${name}: HTTP ${response.status}`);
  return response;
}

// The model's description and vocabularies (small JSON files): enough to check what is typed.
let metaPromise = null;
function meta() {
  metaPromise ??= Promise.all(['config.json', 'vocab.json'].map(async (n) => (await fetchOk(n)).json()))
    .then(([config, vocab]) => ({config, vocab, stoi: new Map(vocab.source.map((c, i) => [c, i]))}));
  return metaPromise;
}

async function gunzip(buffer) {
  const bytes = new Uint8Array(buffer);
  if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes;    // a server already decompressed it
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// onnxruntime-web and the two graphs, loaded once, when the demo comes into view or is used.
let runtimePromise = null;
function runtime() {
  runtimePromise ??= (async () => {
    if (typeof WebAssembly !== 'object' || typeof WebAssembly.instantiate !== 'function') {
      throw new Unavailable('This demo runs the model with WebAssembly, which this browser does not '
        + 'provide or has turned off. The rest of the chapter does not need it.');
    }
    if (typeof DecompressionStream !== 'function') {
      throw new Unavailable('This demo needs a newer browser (one with DecompressionStream: Chrome 80, '
        + 'Firefox 113, Safari 16.4 or later).');
    }
    root.dataset.state = 'loading';
    const t0 = performance.now();
    const ort = await import('./ort.wasm.bundle.min.js');
    ort.env.wasm.numThreads = 1;        // threads need cross-origin isolation, which GitHub Pages lacks
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmBinary = await gunzip(await (await fetchOk('ort-wasm-simd-threaded.wasm.gz')).arrayBuffer());
    const options = {executionProviders: ['wasm']};
    const encoder = await ort.InferenceSession.create(new URL('encoder.onnx', HERE).href, options);
    const step = await ort.InferenceSession.create(new URL('decoder_step.onnx', HERE).href, options);
    timings.runtimeLoadMs = performance.now() - t0;
    root.dataset.state = 'ready';
    return {ort, encoder, step};
  })();
  return runtimePromise;
}

// Greedy decoding with a batch of one: the loop of transformer_lib.deploy.OnnxGreedy.
async function translate({ort, encoder, step}, {config, vocab}, ids) {
  const S = ids.length;
  const src = new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, S]);
  const {cross_k, cross_v, memory_pad} = await encoder.run({src});
  const [L, H, dk] = [config.num_decoder_layers, config.nhead, config.d_model / config.nhead];
  let selfK = new ort.Tensor('float32', new Float32Array(0), [L, 1, H, 0, dk]);
  let selfV = selfK;
  let token = config.bos_id;
  const tokens = [], weights = [];                    // weights[i]: (L, S) of the query writing tokens[i]
  for (let i = 0; i < Math.min(vocab.max_new_tokens, config.max_len - 1); i++) {
    const out = await step.run({token: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]),
      self_k: selfK, self_v: selfV, cross_k, cross_v, memory_pad});
    token = Number(out.next_token.data[0]);
    [selfK, selfV] = [out.self_k_out, out.self_v_out];
    tokens.push(token);
    weights.push(Float32Array.from(out.cross_attention.data));
    if (token === config.eos_id) break;
  }
  const end = tokens.indexOf(config.eos_id);
  const written = end < 0 ? tokens : tokens.slice(0, end);            // up to EOS, as CharVocab.decode
  const iso = written.filter((t) => t !== config.pad_id && t !== config.bos_id).map((t) => vocab.target[t]).join('');
  return {iso, tokens, weights, S, L, H};
}

function shown(c) {                                   // a character as a tick label
  return c === ' ' ? '␣' : c === '\u202f' ? '⍽' : c;
}

// What transformer_lib.dates.date_problem says, word for word (tests/test_dates.py runs both on the same
// texts and answers with Node and compares them): every date the model learned holds one four-digit year
// within YEARS (dates.YEARS), and the answer must be a date of that year read from the text. The text's
// numbers are its maximal runs of the digits 0-9, as integers ('05' is 5, '25th' holds 25); besides the
// year's run, the answer's day must be one of them, and, where a third run is left (the month written as a
// number), its month another one. Null when the answer passes.
// date_problem: begin
const YEARS = [1950, 2049];
function digitRuns(text) {
  return text.match(/[0-9]+/g) ?? [];
}

function inputProblem(text) {
  const found = digitRuns(text).filter((run) => run.length === 4);
  if (found.length !== 1) {
    return `it holds ${found.length} four-digit years, and the dates the model learned hold one`;
  }
  const year = Number(found[0]);
  if (year < YEARS[0] || year > YEARS[1]) {
    return `its year ${found[0]} lies outside ${YEARS[0]}-${YEARS[1]}, the years the model learned`;
  }
  return null;
}

function dateProblem(text, iso) {
  const before = inputProblem(text);
  if (before) return before;
  const runs = digitRuns(text);
  const year = runs.find((run) => run.length === 4);
  const date = calendarDate(iso);
  if (!date || iso.slice(0, 4) !== year) {
    return `the model wrote '${iso}', which is no date of the year ${year}`;
  }
  const others = runs.filter((run) => run !== year).map(Number);    // a day, a month: < 1000
  const day = others.indexOf(date.day);
  if (day < 0) return `the day ${date.day} is not a number in the text`;
  others.splice(day, 1);                                // the month: another run, if there is a third
  if (others.length && !others.includes(date.month)) {
    return `the month ${date.month} is not a number in the text besides its year and day`;
  }
  return null;
}

function calendarDate(iso) {                          // {day, month} of a YYYY-MM-DD date, else null
  const m = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(iso);
  if (!m) return null;
  const [y, mo, d] = m.slice(1).map(Number);
  const date = new Date(Date.UTC(y, mo - 1, d));
  const ok = date.getUTCFullYear() === y && date.getUTCMonth() === mo - 1 && date.getUTCDate() === d;
  return ok ? {day: d, month: mo} : null;
}
// date_problem: end

// The heatmap: one row per output character (and EOS), one column per input character (and EOS);
// grey levels from white (0) to black (1), as the chapter's figure, readable without colour.
let last = null;
function draw() {
  if (!last) return;
  const {chars, result} = last;
  const layer = Math.max(0, layerInputs.findIndex((r) => r.checked));
  const cols = chars.length + 1, rows = result.tokens.length;
  const yLabels = result.tokens.map((t) => (t === 2 ? 'EOS' : result.target[t]));
  const xLabels = chars.map(shown).concat(['EOS']);
  const width = Math.max(320, Math.min(root.clientWidth || 720, 900));
  const left = 72, top = 52, bottom = 78, right = 16;
  const cell = Math.max(8, Math.min(30, Math.floor((width - left - right) / cols)));
  const height = top + rows * cell + bottom;
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, width, height);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const v = Math.min(1, Math.max(0, result.weights[r][layer * result.S + c]));
      const g = Math.round(255 * (1 - v));
      ctx.fillStyle = `rgb(${g},${g},${g})`;
      ctx.fillRect(left + c * cell, top + r * cell, cell, cell);
    }
  }
  ctx.strokeStyle = '#000';
  ctx.lineWidth = 1;
  ctx.strokeRect(left - 0.5, top - 0.5, cols * cell + 1, rows * cell + 1);
  ctx.fillStyle = '#000';
  ctx.textAlign = 'center';
  ctx.textBaseline = 'alphabetic';
  ctx.font = 'bold 14px sans-serif';
  ctx.fillText(`Cross-attention of decoder layer ${layer + 1} (mean of ${result.H} heads)`, width / 2, 18);
  ctx.font = '12px sans-serif';
  ctx.fillText('white: no attention, black: all of it', width / 2, 36);
  const tick = Math.max(8, Math.min(14, cell - 2));
  ctx.font = `${tick}px sans-serif`;
  ctx.textBaseline = 'middle';
  for (let c = 0; c < cols; c++) {
    const x = left + (c + 0.5) * cell, y = top + rows * cell + 6;
    if (c === cols - 1) {                            // EOS: written downwards
      ctx.save();
      ctx.translate(x, y);
      ctx.rotate(Math.PI / 2);
      ctx.textAlign = 'left';
      ctx.fillText('EOS', 0, 0);
      ctx.restore();
    } else {
      ctx.fillText(xLabels[c], x, y + tick / 2);
    }
  }
  ctx.textAlign = 'right';
  for (let r = 0; r < rows; r++) ctx.fillText(yLabels[r], left - 6, top + (r + 0.5) * cell);
  ctx.font = '13px sans-serif';
  ctx.textAlign = 'center';
  ctx.textBaseline = 'alphabetic';
  ctx.fillText('input character (key)', left + (cols * cell) / 2, height - 10);
  ctx.save();
  ctx.translate(16, top + (rows * cell) / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText('output character (query)', 0, 0);
  ctx.restore();
  canvas.hidden = false;
  canvas.dataset.rows = rows;
  canvas.dataset.cols = cols;
  canvas.dataset.layer = layer + 1;
  canvas.dataset.grid = JSON.stringify({left, top, cell, scale: dpr});   // where the cells are, for tests
  canvas.setAttribute('aria-label', `Cross-attention of decoder layer ${layer + 1}: ${rows} output characters `
    + `(${result.iso}) by ${cols} input characters`);
}

function clearAnswer() {
  output.textContent = '';
  delete output.dataset.for;
  canvas.hidden = true;
  last = null;
}

let latest = 0;          // the newest input; older answers are dropped
let queue = Promise.resolve();   // one run at a time on the sessions
async function update() {
  const id = ++latest;
  const text = input.value.trim();
  const chars = Array.from(text);                   // code points, as Python's str
  if (!chars.length) {
    clearAnswer();
    const state = root.dataset.state;                 // after a failed load, its message stays
    if (state === 'ready') say('Type a date, or pick one of the examples.');
    else if (state === 'idle' || state === 'loading') say('Loading the model…');
    return;
  }
  let m;
  try {
    m = await meta();
  } catch (err) {
    clearAnswer();
    say(`The demo's files could not be loaded (${err.message}).`, 'error');
    root.dataset.state = 'error';
    return;
  }
  if (id !== latest) return;
  const most = m.config.max_len - 1;                 // one position for EOS
  if (chars.length > most) {
    clearAnswer();
    say(`That is ${chars.length} characters; the model reads at most ${most}. Nothing was translated.`, 'error');
    return;
  }
  const unknown = [...new Set(chars.filter((c) => !m.stoi.has(c)))];
  if (unknown.length) {
    clearAnswer();
    const code = (c) => c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0');
    const list = unknown.slice(0, 8).map((c) => `“${c}” (U+${code(c)})`);
    say(`The model cannot read ${list.join(', ')}${unknown.length > 8 ? ' and more' : ''}: it knows only the `
      + 'characters of dates in its ten languages (digits, month and weekday names, spaces and . , - /). '
      + 'Nothing was translated.', 'error');
    return;
  }
  const before = inputProblem(text);                  // refused before the model runs
  if (before) {
    clearAnswer();
    say(`No answer: ${before}.`, 'error');
    return;
  }
  let rt;
  try {
    if (!runtimePromise) say('Loading the model (once)…');
    rt = await runtime();
  } catch (err) {
    clearAnswer();
    root.dataset.state = err instanceof Unavailable ? 'unavailable' : 'error';
    say(err instanceof Unavailable ? err.message : `The model could not be loaded: ${err.message}`, 'error');
    return;
  }
  if (id !== latest) return;
  const ids = chars.map((c) => m.stoi.get(c)).concat([m.config.eos_id]);
  const job = queue.then(async () => {
    if (id !== latest) return null;
    const t0 = performance.now();
    const result = await translate(rt, m, ids);
    return {...result, ms: performance.now() - t0, target: m.vocab.target};
  });
  queue = job.catch(() => null);
  let result;
  try {
    result = await job;
  } catch (err) {
    clearAnswer();
    say(`The model failed on this input: ${err.message}`, 'error');
    return;
  }
  if (!result || id !== latest) return;
  const problem = dateProblem(text, result.iso);
  if (problem) {                                   // a confident wrong date would be worse
    clearAnswer();
    say(`No answer: ${problem}.`, 'error');
    return;
  }
  last = {chars, result};
  showAnswer(text, result.iso);
  draw();
  timings.firstAnswerMs ??= performance.now();
  say(`Translated in this page in ${result.ms.toFixed(0)} ms; nothing was sent anywhere.`);
}

let timer = null;
input.addEventListener('input', () => {
  clearTimeout(timer);
  timer = setTimeout(update, 100);
});
const EXAMPLE = input.dataset.placeholder;                 // the box says Loading… until the model is ready
input.placeholder = 'Loading…';
function preload() {                                  // start loading; say so at once if it cannot work
  meta().catch(() => null);
  runtime().then(() => {
    input.placeholder = EXAMPLE;
    if (!input.value.trim()) say('Type a date, or pick one of the examples.');
  }, (err) => {
    input.placeholder = 'Not available';
    root.dataset.state = err instanceof Unavailable ? 'unavailable' : 'error';
    say(err instanceof Unavailable ? err.message : `The model could not be loaded: ${err.message}`, 'error');
  });
}
input.addEventListener('focus', preload, {once: true});
for (const radio of layerInputs) radio.addEventListener('change', draw);
for (const button of document.querySelectorAll('#dates-demo [data-example]')) {
  button.addEventListener('click', () => {
    input.value = button.dataset.example;
    update();
  });
}
root.dataset.state = 'idle';
say('Loading the model…');
if ('IntersectionObserver' in window) {               // start loading when the demo comes near the screen
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) {
      seen.disconnect();
      preload();
    }
  }, {rootMargin: '600px'});
  seen.observe(root);
} else {
  preload();
}
