/* attnviz's page for long inputs: pooled attention, plain JavaScript, no library, no network.
 *
 * `attnvizLong(root, spec)` draws into `root` (and touches nothing outside it) the pooled maps
 * `attnviz analyse_long` / `--pool N` computes: blocks of `pool` pieces are the units. `spec`:
 *
 *   layers, heads, n, T       the pooled array [layers, heads, n, n] over T pieces
 *   data, dtype, compression  base64 of the array, deflated; "u16" (two bytes, low-byte plane
 *                             then high-byte plane) or "u8"; each [n, n] matrix quantised
 *                             against its own largest block: w = q / qmax * scales[l * heads + h]
 *   scales                    the largest block of each matrix, layer by layer
 *   labels                    each block's pieces ("0–63"); pool, poolBy: its size, mean or max
 *   causal                    a decoder: a block of keys after the block of queries is masked
 *   windows                   null, or each layer's sliding window in pieces (null: none): a
 *                             block whose keys are all that far or farther behind all its
 *                             queries is masked too
 *   bins, shares, sink, kinds each head's share of weight per distance bin [L][H][bins], its
 *                             sink share [L][H] and its kind in one word [L][H]
 *   title, view, layer, head, theme   where the page opens ("matrix", "heads" or "model")
 *   lang, text                the page's language ("en", "pt") and its words, keyed as the
 *                             lexicon's long_ labels without the prefix; {name} is filled
 *                             here. kinds and poolBy stay English keys: text names them
 *
 * Rows are blocks of queries, columns blocks of keys. Hovering a block shows its weight and,
 * beside the map, that block of queries' row: its key blocks, largest first.
 */
function attnvizLong(root, spec) {
  "use strict";

  const L = spec.layers, H = spec.heads, N = spec.n;
  const TEXT = spec.text || {};
  // The page's string `key` in its language, with {name} filled from `values`.
  const t = (key, values) => fill(TEXT, key, values);
  const kindName = (kind) => t("kind_" + kind); // a head's kind (an English key), in the page's words
  const ROW_TOP = 12; // key blocks listed for the hovered row
  const state = {
    view: spec.view || "matrix",
    layer: clamp(spec.layer == null ? L - 1 : spec.layer, 0, L - 1),
    head: spec.head == null ? null : clamp(spec.head, 0, H - 1), // null: the head mean
  };
  let weights = null; // Float32Array [L, H, N, N] once decoded
  const means = new Map(); // layer -> its head mean [N * N]

  function fmt(w) { return w < 0.0001 && w > 0 ? w.toExponential(2) : w.toFixed(4); }
  // Why block (i, j) of `layer` is hidden from the model: "after" (its keys all come after
  // its queries), "window" (all at least the layer's window behind them), or "" (not hidden).
  function hiddenBy(i, j, layer) {
    if (spec.causal && j > i) return "after";
    const w = spec.windows ? spec.windows[layer] : null;
    const lastKey = Math.min(spec.T, (j + 1) * spec.pool) - 1;
    return w != null && i * spec.pool - lastKey >= w ? "window" : "";
  }
  function masked(i, j, layer) { return hiddenBy(i, j, layer) !== ""; }

  async function decode() {
    const text = atob(spec.data);
    let bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    if (spec.compression === "deflate") {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      bytes = new Uint8Array(await new Response(stream).arrayBuffer());
    }
    const cells = N * N, n = L * H * cells, out = new Float32Array(n);
    const wide = spec.dtype === "u16", top = wide ? 65535 : 255;
    for (let m = 0; m < L * H; m++) {
      const scale = spec.scales[m] / top;
      for (let c = 0, i = m * cells; c < cells; c++, i++) {
        out[i] = (wide ? bytes[i] | (bytes[n + i] << 8) : bytes[i]) * scale;
      }
    }
    return out;
  }

  // One head's pooled matrix [N * N] (a view into the array), or the layer's head mean.
  function matrix(layer, head) {
    if (head != null) {
      const base = (layer * H + head) * N * N;
      return weights.subarray(base, base + N * N);
    }
    if (!means.has(layer)) {
      const mean = new Float32Array(N * N);
      for (let h = 0; h < H; h++) {
        const base = (layer * H + h) * N * N;
        for (let i = 0; i < N * N; i++) mean[i] += weights[base + i] / H;
      }
      means.set(layer, mean);
    }
    return means.get(layer);
  }

  // `m` [N * N] of `layer` drawn with `cell` pixels a block, scaled to its largest visible block.
  function paint(canvas, m, cell, layer) {
    canvas.width = N * cell;
    canvas.height = N * cell;
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(N * cell, N * cell);
    const grey = maskedColour(root);
    let vmax = 0;
    for (let i = 0; i < N; i++) for (let j = 0; j < N; j++) if (!masked(i, j, layer)) vmax = Math.max(vmax, m[i * N + j]);
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < N; j++) {
        const rgb = masked(i, j, layer) ? grey : colour(vmax > 0 ? m[i * N + j] / vmax : 0);
        for (let y = i * cell; y < (i + 1) * cell; y++) {
          for (let x = j * cell; x < (j + 1) * cell; x++) {
            const p = (y * N * cell + x) * 4;
            image.data[p] = rgb[0]; image.data[p + 1] = rgb[1]; image.data[p + 2] = rgb[2]; image.data[p + 3] = 255;
          }
        }
      }
    }
    ctx.putImageData(image, 0, 0);
    return vmax;
  }

  // ------------------------------------------------------------------ the frame

  root.classList.add("attnviz", "av-long");
  root.setAttribute("tabindex", "0");
  root.dataset.theme = spec.theme || "auto";
  root.textContent = "";
  const title = el("div", { class: "av-title", text: spec.title });
  const bar = el("div", { class: "av-bar" });
  const main = el("div", { class: "av-main" });
  const status = el("div", { class: "av-status", "aria-live": "polite" });
  root.append(title, bar, main, status);
  const viewButtons = {};
  const views = el("div", { class: "av-group", role: "group", "aria-label": t("views") });
  for (const name of ["matrix", "heads", "model"]) {
    viewButtons[name] = el("button", {
      type: "button", text: t("view_" + name), "data-view": name, onclick: () => { state.view = name; render(); },
    });
    views.appendChild(viewButtons[name]);
  }
  const layerSelect = el("select", { "aria-label": t("layer"), class: "av-layer" },
    range(L).map((l) => el("option", { value: String(l), text: t("layer_n", { layer: l }) })));
  layerSelect.addEventListener("change", () => { state.layer = Number(layerSelect.value); render(); });
  const headSelect = el("select", { "aria-label": t("head"), class: "av-head" }, [
    el("option", { value: "mean", text: t("mean_n", { n: H }) }),
    ...range(H).map((h) => el("option", { value: String(h), text: t("head_n", { head: h }) })),
  ]);
  headSelect.addEventListener("change", () => {
    state.head = headSelect.value === "mean" ? null : Number(headSelect.value);
    render();
  });
  bar.append(views, layerSelect, headSelect);
  root.addEventListener("keydown", (event) => {
    if (event.target.tagName === "SELECT") return;
    const step = { ArrowUp: -1, ArrowDown: 1, ArrowLeft: -1, ArrowRight: 1 }[event.key];
    if (step == null) return;
    event.preventDefault();
    if (event.key === "ArrowUp" || event.key === "ArrowDown") state.layer = clamp(state.layer + step, 0, L - 1);
    else state.head = state.head == null ? (step > 0 ? 0 : H - 1) : clamp(state.head + step, 0, H - 1);
    render();
  });

  function render() {
    if (!weights) return;
    for (const [name, button] of Object.entries(viewButtons)) {
      button.setAttribute("aria-pressed", String(state.view === name));
    }
    layerSelect.value = String(state.layer);
    headSelect.value = state.head == null ? "mean" : String(state.head);
    layerSelect.style.display = state.view === "model" ? "none" : "";
    headSelect.style.display = state.view === "matrix" ? "" : "none";
    root.dataset.view = state.view;
    main.textContent = "";
    if (state.view === "matrix") matrixView();
    else grid(state.view === "heads" ? [state.layer] : range(L));
    if (state.view !== "model") main.appendChild(profileTable(state.layer));
  }

  // ------------------------------------------------------------------ views

  function matrixView() {
    const m = matrix(state.layer, state.head);
    const cell = clamp(Math.floor(640 / N), 1, 24);
    const canvas = el("canvas", { class: "av-heat", role: "img" });
    const layer = state.layer;
    const vmax = paint(canvas, m, cell, layer);
    const which = state.head == null ? t("mean_n", { n: H }) : t("head_n", { head: state.head });
    canvas.setAttribute("aria-label", t("heat_label", { layer: t("layer_n", { layer: state.layer }), which, n: N }));
    const tip = el("div", { class: "av-tip" });
    const row = el("ol", { class: "av-row" });
    const side = el("div", { class: "av-side" }, [el("div", { class: "av-legend", text: t("hover") }), row]);
    const where = el("div", { class: "av-heatwrap" }, [canvas, tip]);
    main.append(el("div", { class: "av-longmain" }, [where, side]),
      el("div", { class: "av-legend", text: t("legend", { how: t("by_" + spec.poolBy), pool: spec.pool, vmax: fmt(vmax) }) }));
    function showRow(i) {
      const order = range(N).filter((j) => !masked(i, j, layer)).sort((a, b) => m[i * N + b] - m[i * N + a]);
      row.textContent = "";
      row.dataset.block = String(i);
      row.setAttribute("start", "1");
      for (const j of order.slice(0, ROW_TOP)) {
        const w = m[i * N + j];
        const bar = el("span", { class: "av-bar-fill", style: "width:" + (vmax > 0 ? (100 * w / vmax).toFixed(1) : 0) + "%" });
        row.appendChild(el("li", { class: "av-key", "data-block": String(j), "data-weight": String(w) },
          [el("span", { class: "av-key-name", text: spec.labels[j] + " " + fmt(w) }), bar]));
      }
      status.textContent = t("row_status", { queries: spec.labels[i], shown: Math.min(ROW_TOP, order.length), n: order.length });
    }
    canvas.addEventListener("mousemove", (event) => {
      const box = canvas.getBoundingClientRect();
      const j = Math.floor((event.clientX - box.left) / box.width * N);
      const i = Math.floor((event.clientY - box.top) / box.height * N);
      if (i < 0 || j < 0 || i >= N || j >= N) return;
      tip.style.display = "block";
      tip.style.left = (event.clientX - box.left + 12) + "px";
      tip.style.top = (event.clientY - box.top + 12) + "px";
      const why = hiddenBy(i, j, layer);
      if (why) {
        tip.textContent = t(why === "after" ? "tip_masked" : "tip_window",
          { queries: spec.labels[i], keys: spec.labels[j], window: why === "window" ? spec.windows[layer] : "" });
        tip.dataset.masked = "true";
        delete tip.dataset.weight;
      } else {
        tip.textContent = t("tip", { queries: spec.labels[i], keys: spec.labels[j], weight: fmt(m[i * N + j]) });
        tip.dataset.weight = String(m[i * N + j]);
        delete tip.dataset.masked;
      }
      if (row.dataset.block !== String(i)) showRow(i);
    });
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    showRow(N - 1);
  }

  function grid(layers) {
    const wrap = el("div", { class: "av-grid", style: "grid-template-columns: repeat(" + H + ", auto)" });
    const size = layers.length === 1 ? clamp(Math.floor(960 / H / N), 1, 8) : 1;
    for (const l of layers) {
      for (let h = 0; h < H; h++) {
        const canvas = el("canvas", {
          class: "av-thumb", tabindex: "0", "data-layer": String(l), "data-head": String(h),
          title: t("thumb", { layer: l, head: h, sink: (100 * spec.sink[l][h]).toFixed(0) + "%", kind: kindName(spec.kinds[l][h]) }),
        });
        paint(canvas, matrix(l, h), size, l);
        canvas.style.width = Math.max(N * size, 48) + "px";
        const open = () => { state.view = "matrix"; state.layer = l; state.head = h; render(); };
        canvas.addEventListener("click", open);
        canvas.addEventListener("keydown", (event) => { if (event.key === "Enter") open(); });
        wrap.appendChild(el("figure", { class: "av-cell" }, [canvas,
          el("figcaption", { text: (layers.length > 1 ? t("panel", { layer: l, head: h }) : t("panel_head", { head: h })) +
            " " + kindName(spec.kinds[l][h]), "data-kind": spec.kinds[l][h] })]));
      }
    }
    main.appendChild(wrap);
    status.textContent = t("grid_status");
  }

  function profileTable(layer) {
    const head = el("tr", {}, [el("th", { text: t("col_head") }), ...spec.bins.map((b) => el("th", { text: b })),
      el("th", { text: t("col_sink") }), el("th", { text: t("col_kind") })]);
    const rows = range(H).map((h) => el("tr", {}, [el("td", { text: String(h) }),
      ...spec.shares[layer][h].map((s) => el("td", { text: (100 * s).toFixed(0) + "%" })),
      el("td", { text: (100 * spec.sink[layer][h]).toFixed(0) + "%" }),
      el("td", { text: kindName(spec.kinds[layer][h]), "data-kind": spec.kinds[layer][h] })]));
    return el("table", { class: "av-profile" }, [
      el("caption", { text: t("profile_caption", { layer }) }),
      el("thead", {}, [head]), el("tbody", {}, rows)]);
  }

  decode().then((w) => {
    weights = w;
    render();
    root.dataset.ready = "true";
  }).catch((error) => { status.textContent = t("unreadable", { error }); });
}
