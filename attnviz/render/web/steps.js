/* attnviz's step slider for a decoder that wrote: plain JavaScript, no library, no network.
 *
 * `attnvizSteps(root, spec)` draws a slider over the new tokens. At step k it shows the
 * text so far, each token read shaded by the weight new token k gave it (the row of the
 * query that wrote it, in the chosen layer and head or the mean of heads), and below it
 * the same head view and matrix as attnviz's page (`attnvizMount`, defined beside this
 * script) over the tokens read until then. `spec`:
 *
 *   base          attnvizMount's spec of the whole attention read [layers, heads, T, T]
 *   labels        every piece: the prompt's, then the new tokens (one more than base.T)
 *   prompt        P, the prompt's pieces; new token k is labels[P + k], written by row P - 1 + k
 *   layer, head   where the view opens (head null: the mean of heads)
 */
function attnvizSteps(root, spec) {
  "use strict";
  const base = spec.base;
  const L = base.layers, H = base.heads, T = base.T, P = spec.prompt;
  const N = spec.labels.length - P;
  const state = { step: N - 1, layer: spec.layer == null ? L - 1 : spec.layer, head: spec.head, view: "heads" };
  let weights = null;


  root.classList.add("attnviz-steps");
  root.dataset.theme = base.theme || "auto";
  const title = el("div", { class: "av-steps-title", text: base.title });
  const slider = el("input", {
    type: "range", min: "0", max: String(N - 1), value: String(state.step),
    class: "av-step-slider", "aria-label": "step",
  });
  const label = el("span", { class: "av-step-label" });
  const layerSelect = el("select", { class: "av-step-layer", "aria-label": "layer" },
    range(L).map((l) => el("option", { value: String(l), text: "layer " + l })));
  const headSelect = el("select", { class: "av-step-head", "aria-label": "head" }, [
    el("option", { value: "mean", text: "mean of heads" }),
    ...range(H).map((h) => el("option", { value: String(h), text: "head " + h })),
  ]);
  layerSelect.value = String(state.layer);
  headSelect.value = state.head == null ? "mean" : String(state.head);
  const bar = el("div", { class: "av-steps-bar" }, [slider, label, layerSelect, headSelect]);
  const strip = el("div", { class: "av-step-text", "aria-live": "polite" });
  const note = el("div", { class: "av-steps-note", text:
    "Each token read is shaded by the weight the new token (outlined) gave it: " +
    "the row of the query that wrote it. Below: every weight read until this step." });
  const view = el("div", { class: "av-step-view" });
  root.append(title, bar, strip, note, view);

  // The base data decoded once, as attnvizMount decodes it.
  async function decode() {
    const text = atob(base.data);
    let bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    if (base.compression === "deflate") {
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      bytes = new Uint8Array(await new Response(stream).arrayBuffer());
    }
    const n = L * H * T * T;
    const out = new Float32Array(n);
    if (base.dtype === "u16") {
      for (let i = 0; i < n; i++) out[i] = (bytes[i] | (bytes[n + i] << 8)) / base.scale;
    } else {
      for (let i = 0; i < n; i++) out[i] = bytes[i] / base.scale;
    }
    return out;
  }
  function at(l, h, q, k) { return weights[((l * H + h) * T + q) * T + k]; }
  function row(step) {  // the weights of the query that wrote new token `step`
    const q = P - 1 + step, out = new Float64Array(q + 1);
    const heads = state.head == null ? range(H) : [state.head];
    for (const h of heads) for (let k = 0; k <= q; k++) out[k] += at(state.layer, h, q, k) / heads.length;
    return out;
  }

  // The attention read until `step` ([L, H, Tk, Tk], Tk = P + step) as attnvizMount's spec.
  function subSpec(step) {
    const Tk = P + step, n = L * H * Tk * Tk;
    const u16 = base.dtype === "u16";
    const bytes = new Uint8Array(u16 ? 2 * n : n);
    let i = 0;
    for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) for (let q = 0; q < Tk; q++) {
      for (let k = 0; k < Tk; k++, i++) {
        const v = Math.round(at(l, h, q, k) * base.scale);
        bytes[i] = v & 255;
        if (u16) bytes[n + i] = v >> 8;
      }
    }
    let binary = "";
    for (let s = 0; s < bytes.length; s += 8192) {
      binary += String.fromCharCode.apply(null, bytes.subarray(s, s + 8192));
    }
    return Object.assign({}, base, {
      T: Tk, data: btoa(binary), compression: "none", tokens: spec.labels.slice(0, Tk),
      words: null, wordLabels: null, units: "tokens", view: state.view,
      layer: state.layer, head: state.head,
      title: base.title + " · step " + (step + 1) + ": writing " + spec.labels[P + step],
    });
  }

  function shade(w, max) {
    const a = max > 0 ? w / max : 0;
    return "rgba(0, 114, 178, " + (0.08 + 0.72 * a).toFixed(3) + ")";
  }

  function render() {
    const step = state.step;
    const w = row(step);
    const max = Math.max(...w);
    // counted from 1, as a reader counts: the last of 8 new tokens is "step 8 of 8"
    label.textContent = "step " + (step + 1) + " of " + N + ": writing " + spec.labels[P + step];
    strip.textContent = "";
    for (let k = 0; k <= P + step; k++) {
      const token = el("span", { class: "av-step-token" + (k < P ? " av-prompt" : ""), text: spec.labels[k] });
      if (k < P + step) {
        token.dataset.weight = w[k].toFixed(6);
        token.title = spec.labels[k] + ": " + w[k].toFixed(4);
        token.style.background = shade(w[k], max);
      } else {
        token.classList.add("av-step-new");
      }
      strip.append(token, document.createTextNode(" "));
    }
    root.dataset.step = String(step);
    attnvizMount(view, subSpec(step));
  }

  slider.addEventListener("input", () => { state.step = Number(slider.value); render(); });
  layerSelect.addEventListener("change", () => { state.layer = Number(layerSelect.value); render(); });
  headSelect.addEventListener("change", () => {
    state.head = headSelect.value === "mean" ? null : Number(headSelect.value);
    render();
  });
  view.addEventListener("click", (event) => {  // keep the inner view chosen across steps
    const button = event.target.closest ? event.target.closest("[data-view]") : null;
    if (button) state.view = button.dataset.view;
  });

  if (typeof DecompressionStream === "undefined" && base.compression === "deflate") {
    strip.textContent = "this browser cannot decompress the data (it needs DecompressionStream)";
    return;
  }
  decode().then((values) => {
    weights = values;
    render();
    root.dataset.ready = "true";
  }).catch((error) => { strip.textContent = "cannot read the attention data: " + error; });
}
