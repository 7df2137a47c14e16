/* attnviz's interactive attention view: plain JavaScript, no library, no network.
 *
 * `attnvizMount(root, spec)` draws into the element `root` everything the page
 * shows; it defines no global name and touches nothing outside `root`, so that
 * several views can live in one notebook. `spec` is the JSON that attnviz writes:
 *
 *   layers, heads, T          the shape of the attention array [layers, heads, T, T]
 *   K, keyTokens, keyWords, keyWordLabels
 *                             a rectangle [layers, heads, T, K]: queries and keys from two
 *                             inputs (cross-attention); the keys' labels and words (null: the
 *                             keys are the queries, K = T)
 *   data                      base64 of the array, quantised to integers q = round(w * scale)
 *   dtype, scale, shuffled    "u16" (two bytes, low-byte plane then high-byte plane) or "u8"
 *   compression               "deflate" (zlib) or "none"
 *   masked                    null, or {data, compression}: one bit per layer, query and key
 *                             piece [L, T, K] (numpy packbits order), set where the model
 *                             could not see the key (a decoder's future, outside its window)
 *   tokens                    one label per piece; words: the pieces of each word (or null)
 *   wordLabels, pairStart, pairWordStart, title, view, layer, head, units, theme
 *   layerNames, headNames     how layers and heads are named (default: text.layer_n, text.head_n)
 *   lang, text                the language ("en", "pt") and every string the page shows, by
 *                             name, with {placeholders} this script fills (attnviz.lexicon)
 *   renormalise               true when some pieces were left out (--exclude): each row of a
 *                             matrix (after the head mean and the word merging) is divided
 *                             by its sum, so it sums to 1 over the keys left, as the views do
 *
 * Rows are queries (the token that attends), columns keys. Words merge pieces as the
 * command line does: attention TO a word is the sum over its pieces, FROM a word the
 * mean over its pieces, so rows still sum to 1. Masked cells are greyed (matrix, model
 * view) and their keys unlisted in the head view; a word pair is masked when every pair of
 * its pieces is.
 */
function attnvizMount(root, spec) {
  "use strict";

  // Okabe-Ito and Paul Tol colours: distinguishable with the common colour-vision deficiencies.
  const PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
    "#F0E442", "#332288", "#44AA99", "#882255", "#999933", "#888888",
  ];
  const LINE_MIN = 0.02; // lines fainter than this are left out when no token is picked
  const ROW_PX = 21; // height of a token row in the head view (1.5em at 14px)

  const L = spec.layers, H = spec.heads, T = spec.T;
  const square = spec.keyTokens == null; // the keys are the queries
  const K = square ? T : spec.K; // keys (columns)
  const keyWords = square ? spec.words : spec.keyWords;
  const hasWords = Array.isArray(spec.words) && spec.words.length > 0 &&
    Array.isArray(keyWords) && keyWords.length > 0;
  const TEXT = spec.text || {};
  // The page's string `key` in its language, with {name} filled from `values`.
  const t = (key, values) => fill(TEXT, key, values);
  const layerName = (l) => (spec.layerNames ? spec.layerNames[l] : t("layer_n", { layer: l }));
  const headName = (h) => (spec.headNames ? spec.headNames[h] : t("head_n", { head: h }));
  const state = {
    view: spec.view || "heads",
    layer: clamp(spec.layer == null ? L - 1 : spec.layer, 0, L - 1),
    head: spec.head == null ? null : clamp(spec.head, 0, H - 1), // matrix view: null = mean
    selected: new Set(range(H)), // head view: the heads drawn
    units: hasWords && spec.units !== "tokens" ? "words" : "tokens",
    pick: null, // {side: "from" | "to", index}: the token whose attention is isolated
  };
  if (spec.selected) state.selected = new Set(spec.selected);
  let weights = null; // Float32Array [L, H, T, K] once decoded
  let hiddenBits = null; // Uint8Array [L, T, K] once decoded (1: masked), or null: none
  const cache = new Map();

  // 16-bit storage is within 1e-5 of each weight: 4 decimals (the last may differ by one
  // where a word sums several pieces); 8-bit storage only within 0.002: 2 decimals, marked ≈.
  const exact = spec.dtype === "u16";
  function fmt(w) { return exact ? w.toFixed(4) : "≈" + w.toFixed(2); }
  // A label set beside other text is wrapped in a first-strong isolate (U+2068 … U+2069), so a
  // bidi override inside a stranger's token cannot reorder the rest of the line.
  function isolated(name) { return "\u2068" + name + "\u2069"; }
  const precision = exact ? "" : t("precision");

  // ------------------------------------------------------------------ data

  async function inflate(data, compression) {
    const text = atob(data);
    let bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    if (compression === "deflate") {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      bytes = new Uint8Array(await new Response(stream).arrayBuffer());
    }
    return bytes;
  }

  async function decodeMask() {
    if (!spec.masked) return null;
    const packed = await inflate(spec.masked.data, spec.masked.compression);
    const n = L * T * K, out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = (packed[i >> 3] >> (7 - (i & 7))) & 1;
    return out;
  }

  async function decode() {
    const bytes = await inflate(spec.data, spec.compression);
    const n = L * H * T * K;
    const out = new Float32Array(n);
    if (spec.dtype === "u16") {
      for (let i = 0; i < n; i++) out[i] = (bytes[i] | (bytes[n + i] << 8)) / spec.scale;
    } else {
      for (let i = 0; i < n; i++) out[i] = bytes[i] / spec.scale;
    }
    return out;
  }

  function labels() {
    const words = state.units === "words";
    const names = (words ? spec.wordLabels : spec.tokens).slice();
    const start = words ? spec.pairWordStart : spec.pairStart;
    if (start != null) names[start] = "B:" + names[start];
    return names;
  }

  // The columns' labels: the keys' own in a rectangle, else the rows'.
  function keyLabels() {
    if (square) return labels();
    return (state.units === "words" ? spec.keyWordLabels : spec.keyTokens).slice();
  }

  // The mean over `heads` of one layer, in the current units: a Float32Array [N * M]
  // (N queries, M keys).
  function matrix(layer, heads) {
    const key = state.units + "|" + layer + "|" + heads.join(",");
    if (cache.has(key)) return cache.get(key);
    const mean = new Float32Array(T * K);
    for (const h of heads) {
      const base = (layer * H + h) * T * K;
      for (let i = 0; i < T * K; i++) mean[i] += weights[base + i];
    }
    if (heads.length > 1) for (let i = 0; i < T * K; i++) mean[i] /= heads.length;
    const result = state.units === "words" ? mergeWords(mean) : mean;
    if (spec.renormalise) renormaliseRows(result);
    if (cache.size > 400) cache.clear();
    cache.set(key, result);
    return result;
  }

  // The cells `layer` masks, in the current units: a Uint8Array [N * M] (1: masked), or null.
  function hidden(layer) {
    if (!hiddenBits) return null;
    const key = "hidden|" + state.units + "|" + layer;
    if (cache.has(key)) return cache.get(key);
    const base = layer * T * K;
    let result;
    if (state.units !== "words") {
      result = hiddenBits.subarray(base, base + T * K);
    } else {
      const groups = spec.words, W = groups.length, V = keyWords.length;
      result = new Uint8Array(W * V);
      for (let a = 0; a < W; a++) {
        for (let b = 0; b < V; b++) {
          let all = 1;
          for (const q of groups[a]) {
            for (const k of keyWords[b]) if (!hiddenBits[base + q * K + k]) { all = 0; break; }
            if (!all) break;
          }
          result[a * V + b] = all;
        }
      }
    }
    if (cache.size > 400) cache.clear();
    cache.set(key, result);
    return result;
  }

  // Each row of the square `m` divided by its sum (a row summing to 0 stays 0), in place.
  function renormaliseRows(m) {
    const N = Math.round(Math.sqrt(m.length));
    for (let i = 0; i < N; i++) {
      let sum = 0;
      for (let j = 0; j < N; j++) sum += m[i * N + j];
      if (sum > 0) for (let j = 0; j < N; j++) m[i * N + j] /= sum;
    }
  }

  function mergeWords(m) {
    const groups = spec.words, W = groups.length, V = keyWords.length;
    const wordOf = new Int32Array(K);
    keyWords.forEach((g, w) => g.forEach((p) => { wordOf[p] = w; }));
    const toWords = new Float32Array(T * V); // (T, V): sum over each key word's pieces
    for (let i = 0; i < T; i++) for (let j = 0; j < K; j++) toWords[i * V + wordOf[j]] += m[i * K + j];
    const out = new Float32Array(W * V); // (W, V): mean over each query word's pieces
    groups.forEach((g, w) => {
      for (const p of g) for (let k = 0; k < V; k++) out[w * V + k] += toWords[p * V + k] / g.length;
    });
    return out;
  }

  function headsLabel(heads) {
    if (heads.length === 1) return headName(heads[0]);
    if (heads.length === H) return t("mean_n", { n: H });
    return t("mean_listed", { heads: heads.join(",") });
  }

  // ------------------------------------------------------------------ the frame

  root.classList.add("attnviz");
  root.setAttribute("tabindex", "0");
  root.dataset.theme = spec.theme || "auto";
  root.textContent = "";
  const title = el("div", { class: "av-title", text: spec.title });
  const bar = el("div", { class: "av-bar" });
  const chips = el("div", { class: "av-group", role: "group", "aria-label": t("heads") });
  const main = el("div", { class: "av-main" });
  const status = el("div", { class: "av-status", "aria-live": "polite" });
  const tip = el("div", { class: "av-tip" });
  root.append(title, bar, chips, main, status);

  const viewButtons = {};
  const views = el("div", { class: "av-group", role: "group", "aria-label": t("views") });
  for (const [name, text] of [["heads", t("view_heads")], ["matrix", t("view_matrix")], ["model", t("view_model")]]) {
    viewButtons[name] = el("button", {
      type: "button", text, "data-view": name, onclick: () => { state.view = name; render(); },
    });
    views.appendChild(viewButtons[name]);
  }
  const layerSelect = el("select", { "aria-label": t("layer"), class: "av-layer" },
    range(L).map((l) => el("option", { value: String(l), text: layerName(l) })));
  layerSelect.addEventListener("change", () => { state.layer = Number(layerSelect.value); render(); });
  const headSelect = el("select", { "aria-label": t("head"), class: "av-head" }, [
    el("option", { value: "mean", text: t("mean_option") }),
    ...range(H).map((h) => el("option", { value: String(h), text: headName(h) })),
  ]);
  headSelect.addEventListener("change", () => {
    state.head = headSelect.value === "mean" ? null : Number(headSelect.value);
    render();
  });
  const unitButtons = {};
  const units = el("div", { class: "av-group", role: "group", "aria-label": t("units") });
  for (const name of hasWords ? ["words", "tokens"] : []) {
    unitButtons[name] = el("button", {
      type: "button", text: name === "words" ? t("words") : t("pieces"), "data-units": name,
      onclick: () => { state.units = name; state.pick = null; render(); },
    });
    units.appendChild(unitButtons[name]);
  }
  bar.append(views, layerSelect, headSelect, units);

  const headPrefix = t("head_n", { head: "" }); // a chip shows "3" for "head 3"
  const chipName = (h) => {
    const name = headName(h);
    return name.startsWith(headPrefix) ? name.slice(headPrefix.length) : name;
  };
  const chipButtons = range(H).map((h) => el("button", {
    type: "button", class: "av-chip", "data-head": String(h), title: t("toggle_head", { head: headName(h) }),
    onclick: (event) => {
      if (event.shiftKey || event.altKey) state.selected = new Set([h]);
      else if (state.selected.has(h) && state.selected.size > 1) state.selected.delete(h);
      else state.selected.add(h);
      render();
    },
  }, [el("span", { class: "av-swatch", style: "background:" + PALETTE[h % PALETTE.length] }),
    document.createTextNode(chipName(h))]));
  chips.append(
    el("span", { class: "av-legend", text: t("heads_legend") }),
    ...chipButtons,
    el("button", { type: "button", text: t("all"), onclick: () => { state.selected = new Set(range(H)); render(); } }),
  );

  root.addEventListener("keydown", (event) => {
    if (event.target.tagName === "SELECT" || state.view === "model") return;
    const step = { ArrowUp: -1, ArrowDown: 1, ArrowLeft: -1, ArrowRight: 1 }[event.key];
    if (step == null) return;
    event.preventDefault();
    if (event.key === "ArrowUp" || event.key === "ArrowDown") {
      state.layer = clamp(state.layer + step, 0, L - 1);
    } else if (state.view === "heads") {
      const now = state.selected.size === 1 ? [...state.selected][0] : (step > 0 ? -1 : H);
      state.selected = new Set([clamp(now + step, 0, H - 1)]);
    } else {
      state.head = state.head == null ? (step > 0 ? 0 : H - 1) : clamp(state.head + step, 0, H - 1);
    }
    render();
  });

  // ------------------------------------------------------------------ views

  function render() {
    if (!weights) return;
    for (const [name, button] of Object.entries(viewButtons)) {
      button.setAttribute("aria-pressed", String(state.view === name));
    }
    for (const [name, button] of Object.entries(unitButtons)) {
      button.setAttribute("aria-pressed", String(state.units === name));
    }
    chipButtons.forEach((b, h) => b.setAttribute("aria-pressed", String(state.selected.has(h))));
    layerSelect.value = String(state.layer);
    headSelect.value = state.head == null ? "mean" : String(state.head);
    layerSelect.style.display = state.view === "model" ? "none" : "";
    headSelect.style.display = state.view === "matrix" ? "" : "none";
    chips.style.display = state.view === "heads" ? "" : "none";
    root.dataset.view = state.view;
    main.textContent = "";
    main.appendChild(tip);
    tip.style.display = "none";
    if (state.view === "heads") headView();
    else if (state.view === "matrix") matrixView();
    else modelView();
  }

  function headView() {
    const names = labels(), N = names.length;
    const keyNames = keyLabels(), M = keyNames.length;
    const heads = [...state.selected].sort((a, b) => a - b);
    const grid = el("div", { class: "av-heads" });
    const left = el("div", { class: "av-col av-left" });
    const right = el("div", { class: "av-col av-right" });
    const canvas = el("canvas", { class: "av-lines" });
    const middle = el("div", {}, [canvas]);
    const rows = { from: [], to: [] };
    const tokenRows = [];
    names.forEach((name, i) => tokenRows.push(["from", left, name, i]));
    keyNames.forEach((name, i) => tokenRows.push(["to", right, name, i]));
    tokenRows.forEach(([side, column, name, i]) => {
      {
        const weight = el("span", { class: "av-w" });
        const token = el("div", { class: "av-tok", "data-side": side, "data-index": String(i) },
          side === "from" ? [weight, document.createTextNode(name)] : [document.createTextNode(name), weight]);
        token.weight = weight;
        token.setAttribute("tabindex", "0");
        const toggle = () => {
          pinned = !(pinned && state.pick && state.pick.side === side && state.pick.index === i);
          pick(pinned ? side : null, pinned ? i : null);
        };
        token.addEventListener("mouseenter", () => { if (!pinned) pick(side, i); });
        token.addEventListener("mouseleave", () => { if (!pinned) pick(null, null); });
        token.addEventListener("focus", () => { if (!pinned) pick(side, i); });
        token.addEventListener("click", toggle);
        token.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(); }
        });
        rows[side].push(token);
        column.appendChild(token);
      }
    });
    grid.append(left, middle, right);
    main.appendChild(grid);
    const width = Math.max(120, middle.getBoundingClientRect().width || 250);
    const height = Math.max(N, M) * ROW_PX;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = height * ratio;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    const mats = heads.map((h) => matrix(state.layer, [h]));
    const mean = matrix(state.layer, heads);
    const masked = hidden(state.layer); // [N * M], 1 where the query cannot see the key
    const y = (i) => i * ROW_PX + ROW_PX / 2;
    let pinned = false;

    function draw() {
      const started = performance.now();
      ctx.clearRect(0, 0, width, height);
      ctx.lineWidth = 1.5;
      const p = state.pick;
      // One path per head and opacity level (16 levels): a few strokes instead of one per line.
      const LEVELS = 16;
      const lineMin = Math.max(N, M) > 128 ? 4 * LINE_MIN : LINE_MIN; // long texts: lighter
      heads.forEach((h, k) => {
        const m = mats[k];
        const paths = Array.from({ length: LEVELS }, () => new Path2D());
        for (let i = 0; i < N; i++) {
          if (p && p.side === "from" && p.index !== i) continue;
          for (let j = 0; j < M; j++) {
            if (p && p.side === "to" && p.index !== j) continue;
            const w = m[i * M + j];
            if (w < (p ? 0.005 : lineMin)) continue;
            const path = paths[Math.min(LEVELS - 1, Math.floor(w * LEVELS))];
            path.moveTo(0, y(i));
            path.lineTo(width, y(j));
          }
        }
        ctx.strokeStyle = PALETTE[h % PALETTE.length];
        paths.forEach((path, level) => {
          ctx.globalAlpha = (level + 0.5) / LEVELS;
          ctx.stroke(path);
        });
      });
      ctx.globalAlpha = 1;
      for (const side of ["from", "to"]) {
        rows[side].forEach((token, i) => {
          const on = p && p.side === side && p.index === i;
          token.classList.toggle("av-on", Boolean(on));
          let w = "";
          const cell = p && p.side !== side ? (p.side === "from" ? p.index * M + i : i * M + p.index) : -1;
          const off = cell >= 0 && masked !== null && masked[cell] === 1; // it cannot see / be seen
          token.classList.toggle("av-masked", off);
          if (off) {
            token.dataset.masked = "true";
            token.title = t("masked");
            delete token.dataset.weight;
          } else if (cell >= 0) {
            delete token.dataset.masked;
            token.removeAttribute("title");
            const value = mean[cell];
            w = fmt(value);
            token.dataset.weight = String(value);
          } else {
            delete token.dataset.masked;
            token.removeAttribute("title");
            delete token.dataset.weight;
          }
          token.weight.textContent = w;
        });
      }
      root.dataset.drawMs = String(performance.now() - started);
    }

    function pick(side, index) {
      state.pick = side == null ? null : { side, index };
      draw();
      if (!state.pick) {
        status.textContent = t("heads_status", { heads: headsLabel(heads), layer: layerName(state.layer) });
      } else {
        const name = isolated((state.pick.side === "from" ? names : keyNames)[state.pick.index]);
        status.textContent = t(state.pick.side === "from" ? "from" : "to",
          { token: name, heads: headsLabel(heads) });
      }
    }
    pick(state.pick ? state.pick.side : null, state.pick ? state.pick.index : null);
  }

  // `m` [N * M] as N·cell pixels high, M·cell wide; cells where `masked` [N * M] is 1 in the
  // masked grey.
  function paint(ctx, m, N, M, x0, y0, cell, vmax, masked) {
    const image = ctx.createImageData(M * cell, N * cell);
    const grey = masked ? maskedColour(root) : null;
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < M; j++) {
        const [r, g, b] = masked && masked[i * M + j] ? grey : colour(vmax > 0 ? m[i * M + j] / vmax : 0);
        for (let dy = 0; dy < cell; dy++) {
          let o = ((i * cell + dy) * M * cell + j * cell) * 4;
          for (let dx = 0; dx < cell; dx++, o += 4) {
            image.data[o] = r; image.data[o + 1] = g; image.data[o + 2] = b; image.data[o + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(image, x0, y0);
  }

  function matrixView() {
    const names = labels(), N = names.length;
    const keyNames = keyLabels(), M = keyNames.length;
    const heads = state.head == null ? range(H) : [state.head];
    const m = matrix(state.layer, heads);
    const masked = hidden(state.layer);
    let vmax = 0;
    for (let i = 0; i < m.length; i++) if (m[i] > vmax) vmax = m[i];
    const cell = clamp(Math.floor(640 / Math.max(N, M)), 1, 28);
    const everyOf = (n) => Math.max(1, Math.ceil(n / Math.floor((n * cell) / 12)));
    const every = everyOf(N), keyEvery = everyOf(M); // a label every 12 pixels at most
    const font = "12px system-ui, sans-serif";
    const probe = document.createElement("canvas").getContext("2d");
    probe.font = font;
    const widest = Math.max(...names.concat(keyNames).map((n) => probe.measureText(n).width));
    const margin = Math.ceil(Math.min(160, widest)) + 8;
    const canvas = el("canvas", {
      class: "av-heat", role: "img",
      "aria-label": t("matrix_label", { layer: layerName(state.layer), heads: headsLabel(heads) }),
    });
    canvas.width = margin + M * cell + 4;
    canvas.height = margin + N * cell + 4;
    const ctx = canvas.getContext("2d");
    const fg = getComputedStyle(root).color;
    paint(ctx, m, N, M, margin, margin, cell, vmax, masked);
    ctx.font = font;
    ctx.fillStyle = fg;
    ctx.textBaseline = "middle";
    const cut = (name) => (name.length > 20 ? name.slice(0, 19) + "…" : name);
    for (let i = 0; i < N; i += every) { // the queries, left of their rows
      ctx.textAlign = "right";
      ctx.fillText(cut(names[i]), margin - 4, margin + i * cell + cell / 2);
    }
    for (let j = 0; j < M; j += keyEvery) { // the keys, over their columns
      ctx.save();
      ctx.translate(margin + j * cell + cell / 2, margin - 4);
      ctx.rotate(-Math.PI / 3);
      ctx.textAlign = "left";
      ctx.fillText(cut(keyNames[j]), 0, 0);
      ctx.restore();
    }
    main.appendChild(canvas);
    const describe = t("matrix_status",
      { layer: layerName(state.layer), heads: headsLabel(heads), vmax: fmt(vmax) }) + precision;
    status.textContent = describe;
    canvas.addEventListener("mousemove", (event) => {
      const box = canvas.getBoundingClientRect();
      const x = (event.clientX - box.left) * (canvas.width / box.width) - margin;
      const yy = (event.clientY - box.top) * (canvas.height / box.height) - margin;
      const i = Math.floor(yy / cell), j = Math.floor(x / cell);
      if (i < 0 || j < 0 || i >= N || j >= M) { tip.style.display = "none"; return; }
      const w = m[i * M + j];
      if (masked && masked[i * M + j]) {
        tip.textContent = t("masked_cell", { query: isolated(names[i]), key: isolated(keyNames[j]) });
        tip.dataset.masked = "true";
        delete tip.dataset.weight;
      } else {
        tip.textContent = `${isolated(names[i])} → ${isolated(keyNames[j])}: ${fmt(w)}`;
        delete tip.dataset.masked;
        tip.dataset.weight = String(w);
      }
      tip.style.display = "block";
      tip.style.left = (event.clientX - main.getBoundingClientRect().left + main.scrollLeft + 14) + "px";
      tip.style.top = (event.clientY - main.getBoundingClientRect().top + main.scrollTop + 14) + "px";
    });
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  }

  function modelView() {
    const N = labels().length, M = keyLabels().length;
    const shown = [...state.selected].sort((a, b) => a - b);
    const side = clamp(Math.floor(880 / shown.length) - 6, 36, 96);
    const grid = el("div", { class: "av-model" });
    grid.style.gridTemplateColumns = `max-content repeat(${shown.length}, ${side + 2}px)`;
    grid.appendChild(el("span"));
    for (const h of shown) grid.appendChild(el("span", { class: "av-colname", text: t("col_head", { head: h }) }));
    for (let l = 0; l < L; l++) {
      grid.appendChild(el("span", { class: "av-rowname", text: t("row_layer", { layer: l }) }));
      for (const h of shown) {
        const m = matrix(l, [h]);
        const px = Math.min(side, N), pw = Math.min(side, M); // pixels high and wide
        const canvas = el("canvas", {
          class: "av-thumb", width: String(pw), height: String(px), "data-layer": String(l),
          "data-head": String(h), title: t("thumb", { layer: l, head: h }),
        });
        canvas.style.width = side + "px";
        canvas.style.height = side + "px";
        const small = new Float32Array(px * pw); // block maximum: thin patterns stay visible
        const masked = hidden(l);
        const seen = masked ? new Uint8Array(px * pw) : null; // 1: some cell of the block visible
        let vmax = 0;
        for (let i = 0; i < N; i++) {
          const si = Math.floor((i * px) / N);
          for (let j = 0; j < M; j++) {
            const k = si * pw + Math.floor((j * pw) / M), w = m[i * M + j];
            if (w > small[k]) small[k] = w;
            if (w > vmax) vmax = w;
            if (seen && !masked[i * M + j]) seen[k] = 1;
          }
        }
        const blocks = seen ? seen.map((v) => 1 - v) : null; // a block is masked when all of it is
        paint(canvas.getContext("2d"), small, px, pw, 0, 0, 1, vmax, blocks);
        const open = () => { state.layer = l; state.head = h; state.view = "matrix"; render(); };
        canvas.setAttribute("tabindex", "0");
        canvas.addEventListener("click", open);
        canvas.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") { event.preventDefault(); open(); }
        });
        grid.appendChild(canvas);
      }
    }
    main.appendChild(grid);
    status.textContent = t("model_status", { layers: L, heads: shown.length }) + precision;
  }

  status.textContent = t("decoding");
  if (typeof DecompressionStream === "undefined" && spec.compression === "deflate") {
    status.textContent = t("no_stream");
    return;
  }
  Promise.all([decode(), decodeMask()]).then(([values, bits]) => {
    weights = values;
    hiddenBits = bits;
    root.dataset.ready = "true";
    render();
  }).catch((error) => { status.textContent = t("unreadable", { error: String(error) }); });
}
