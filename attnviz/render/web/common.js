/* What attnviz's page scripts share: plain JavaScript, no library, no network.
 *
 * Inlined once ahead of the page's scripts, inside the same function scope
 * (`attnviz.render.html.embed`), so it defines no global name either.
 */
"use strict";

// viridis at 0, 1/8, ..., 1 (interpolated between).
const VIRIDIS = [
  [68, 1, 84], [71, 45, 123], [59, 82, 139], [44, 114, 142], [33, 145, 140],
  [40, 174, 128], [94, 201, 98], [173, 220, 48], [253, 231, 37],
];

function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }
function range(n) { return Array.from({ length: n }, (_, i) => i); }
// A new element: attrs "text" is its text, "onX" a listener, anything else an attribute.
function el(tag, attrs, children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children || []) node.appendChild(child);
  return node;
}
// [r, g, b] of viridis at x in [0, 1].
function colour(x) {
  const s = clamp(x, 0, 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(s), VIRIDIS.length - 2), f = s - i;
  const a = VIRIDIS[i], b = VIRIDIS[i + 1];
  return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
}
// The string `key` of `texts` (a page's words in its language), {name} filled from `values`.
function fill(texts, key, values) {
  const template = Object.prototype.hasOwnProperty.call(texts, key) ? texts[key] : key;
  return template.replace(/\{(\w+)\}/g, (whole, name) =>
    values && Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : whole);
}
// [r, g, b] of a hidden cell: `root`'s CSS colour --av-masked (#rrggbb), else light grey.
function maskedColour(root) {
  const value = getComputedStyle(root).getPropertyValue("--av-masked").trim() || "#d9d9d9";
  const hex = /^#([0-9a-f]{6})$/i.exec(value);
  return hex ? [0, 2, 4].map((i) => parseInt(hex[1].slice(i, i + 2), 16)) : [217, 217, 217];
}
