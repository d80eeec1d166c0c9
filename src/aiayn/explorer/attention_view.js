/* The attention view: draws one sentence's attention weights as a heatmap of the chosen kind,
   layer and head, with head thumbnails and hover highlights. Shared by the explorer page
   (`aiayn explore`, inlined) and the served page (`aiayn serve`, /static/attention_view.js);
   the markup it drives is attention_view.html.

   AttentionView.init() once, then AttentionView.show(sentence, id) for each sentence, where
   sentence = {source, target, translated, source_tokens, target_tokens,
               encoder, decoder, cross}  (weights as nested lists [layer][head][query][key];
   a kind the model lacks, e.g. encoder and cross for a language model, is absent or []).
   The table #heatmap carries data-sentence (the id), data-kind, data-layer (0-based) and
   data-head (0-based or 'mean') of what it shows; cells are td#cell-{q}-{k} with data-weight. */
"use strict";
const AttentionView = (() => {
  const $ = (id) => document.getElementById(id);
  const KINDS = ["encoder", "decoder", "cross"];
  // White to dark blue (matplotlib's "Blues"): 0 is white, 1 is navy.
  const RAMP = [[255, 255, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225], [107, 174, 214],
                [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];
  let current = null, currentId = "";
  let hoverQuery = null, hoverKey = null;

  function color(w) {
    const x = Math.min(Math.max(w, 0), 1) * (RAMP.length - 1);
    const i = Math.min(Math.floor(x), RAMP.length - 2), f = x - i;
    const c = RAMP[i].map((v, k) => Math.round(v + f * (RAMP[i + 1][k] - v)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  function textColor(w) { return w > 0.5 ? "#fff" : "#1d2330"; }
  /** Colour scale: the weight itself, or (option) the weight over its row's largest weight. */
  function shade(w, rowMax) { return $("relative").checked && rowMax > 0 ? w / rowMax : w; }
  function el(tag, attrs = {}, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  const kind = () => $("kind").value;
  const hasKind = (s, k) => Array.isArray(s[k]) && s[k].length > 0;
  const queryTokens = (s, k) => (k === "encoder" ? s.source_tokens : s.target_tokens);
  const keyTokens = (s, k) => (k === "decoder" ? s.target_tokens : s.source_tokens);

  /** The (queries x keys) weights shown: one head, or the mean over heads. */
  function weights(s, k, layer, head) {
    const heads = s[k][layer];
    if (head !== "mean") return heads[+head];
    return heads[0].map((row, i) => row.map((_, j) => heads.reduce((a, h) => a + h[i][j], 0) / heads.length));
  }

  function fillSelect(select, options, keep) {
    const old = select.value;
    select.replaceChildren(...options.map(([value, label]) => el("option", {value}, label)));
    if (keep && options.some(([v]) => v === old)) select.value = old;
    return select;
  }

  /** Offer only the kinds this sentence has; keep the chosen one when it is among them. */
  function setupKinds() {
    const options = [...$("kind").options];
    options.forEach((o) => { o.disabled = o.hidden = !hasKind(current, o.value); });
    if (!hasKind(current, kind())) $("kind").value = KINDS.find((k) => hasKind(current, k));
  }

  function setupLayersAndHeads() {
    const s = current, k = kind();
    const layers = s[k].length, heads = s[k][0].length;
    const hadLayer = $("layer").options.length > 0;
    fillSelect($("layer"), [...Array(layers).keys()].map((l) => [String(l), `${l + 1} of ${layers}`]), true);
    if (!hadLayer) $("layer").value = String(layers - 1);
    fillSelect($("head"), [["mean", "average of heads"],
      ...[...Array(heads).keys()].map((h) => [String(h), `${h + 1} of ${heads}`])], true);
  }

  function render() {
    const s = current, k = kind(), layer = +$("layer").value, head = $("head").value;
    const W = weights(s, k, layer, head), qs = queryTokens(s, k), ks = keyTokens(s, k);

    if (hasKind(s, "encoder")) {
      $("pair").replaceChildren(el("span", {}, s.source), el("span", {class: "arrow"}, "→"),
        el("span", {}, s.target || "(empty)"));
    } else {
      $("pair").replaceChildren(el("span", {}, s.target || "(empty)"));
    }
    if (s.translated) $("pair").append(el("span", {class: "tag"}, "model translation"));

    const headName = head === "mean" ? "average of heads" : `head ${+head + 1}`;
    $("heat-title").textContent = `${$("kind").selectedOptions[0].textContent} · layer ${layer + 1} · ${headName}`;

    const table = $("heatmap");
    Object.assign(table.dataset, {sentence: currentId, kind: k, layer: String(layer), head});
    const thead = el("thead"), hr = el("tr");
    hr.append(el("th"));
    ks.forEach((t, j) => { const th = el("th", {"data-k": j}); th.append(el("span", {}, t)); hr.append(th); });
    thead.append(hr);
    const tbody = el("tbody");
    qs.forEach((t, i) => {
      const rowMax = Math.max(...W[i]);
      const tr = el("tr", {"data-q": i});
      tr.append(el("th", {"data-q": i}, t));
      ks.forEach((_, j) => {
        const w = W[i][j];
        const masked = k === "decoder" && j > i;
        const td = el("td", {id: `cell-${i}-${j}`, "data-q": i, "data-k": j, "data-weight": w.toFixed(6),
                             title: `${t} → ${ks[j]}: ${w.toFixed(4)}`});
        if (masked) td.className = "masked";
        else {
          const v = shade(w, rowMax);
          td.style.background = color(v); td.style.color = textColor(v); td.textContent = Math.round(100 * w);
        }
        tr.append(td);
      });
      tbody.append(tr);
    });
    table.replaceChildren(thead, tbody);
    $("legend-max").textContent = $("relative").checked ? "row's largest" : "1";

    $("query-chips").replaceChildren(...qs.map((t, i) => {
      const c = el("span", {class: "chip", "data-q": i}, t); c.append(el("small")); return c; }));
    $("key-chips").replaceChildren(...ks.map((t, j) => {
      const c = el("span", {class: "chip", "data-k": j}, t); c.append(el("small")); return c; }));
    renderHeads(s, k, layer, head);
    highlight();
  }

  function renderHeads(s, k, layer, head) {
    const heads = s[k][layer];
    const items = [["mean", "average"], ...heads.map((_, h) => [String(h), `head ${h + 1}`])];
    $("heads").replaceChildren(...items.map(([value, label]) => {
      const W = weights(s, k, layer, value), rows = W.length, cols = W[0].length;
      const scale = Math.max(2, Math.floor(84 / Math.max(rows, cols)));
      const canvas = el("canvas", {width: cols * scale, height: rows * scale});
      const ctx = canvas.getContext("2d");
      W.forEach((r, i) => {
        const rowMax = Math.max(...r);
        r.forEach((w, j) => { ctx.fillStyle = color(shade(w, rowMax)); ctx.fillRect(j * scale, i * scale, scale, scale); });
      });
      const box = el("div", {class: "thumb" + (value === head ? " selected" : ""), "data-head": value});
      box.append(canvas, el("span", {}, label));
      box.addEventListener("click", () => { $("head").value = value; render(); });
      return box;
    }));
  }

  function highlight() {
    const s = current, k = kind(), layer = +$("layer").value, head = $("head").value;
    const W = weights(s, k, layer, head), qs = queryTokens(s, k), ks = keyTokens(s, k);
    document.querySelectorAll("#heatmap tr").forEach((tr) => tr.classList.toggle("hot", tr.dataset.q !== undefined && +tr.dataset.q === hoverQuery));
    document.querySelectorAll("#heatmap td, #heatmap thead th").forEach((c) =>
      c.classList.toggle(c.tagName === "TD" ? "hot-col" : "hot", c.dataset.k !== undefined && +c.dataset.k === hoverKey));
    const paint = (chip, w, max) => {  // chips: always relative to the largest, so the peak stands out
      const v = w === null || !(max > 0) ? 0 : w / max;
      chip.style.background = w === null ? "" : color(v);
      chip.style.color = w === null ? "" : textColor(v);
      chip.querySelector("small").textContent = w === null ? "" : String(Math.round(100 * w));
      chip.querySelector("small").style.color = w === null ? "" : textColor(v);
    };
    const row = hoverQuery === null ? null : W[hoverQuery];
    const column = hoverKey === null || hoverQuery !== null ? null : W.map((r) => r[hoverKey]);
    document.querySelectorAll("#key-chips .chip").forEach((chip) =>
      paint(chip, row ? row[+chip.dataset.k] : null, row ? Math.max(...row) : 1));
    document.querySelectorAll("#query-chips .chip").forEach((chip) => {
      chip.classList.toggle("hot", +chip.dataset.q === hoverQuery);
      paint(chip, column ? column[+chip.dataset.q] : null, column ? Math.max(...column) : 1);
    });
    let info = "Hover a query token (or a row) to see what it attends to; hover a key (column) to see who attends to it.";
    if (hoverQuery !== null) {
      const best = row.indexOf(Math.max(...row));
      info = `<b>${escapeHtml(qs[hoverQuery])}</b> attends most to <b>${escapeHtml(ks[best])}</b> (${row[best].toFixed(3)})`;
      if (hoverKey !== null) info += ` · to <b>${escapeHtml(ks[hoverKey])}</b>: ${row[hoverKey].toFixed(4)}`;
    } else if (hoverKey !== null) {
      info = `attention paid to <b>${escapeHtml(ks[hoverKey])}</b> by each query`;
    }
    $("info").innerHTML = info;
  }
  function escapeHtml(t) { return t.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`); }

  function onHover(event) {
    if (current === null) return;
    const target = event.target.closest("[data-q], [data-k]");
    hoverQuery = target && target.dataset.q !== undefined ? +target.dataset.q : null;
    hoverKey = target && target.dataset.k !== undefined ? +target.dataset.k : null;
    if (target && target.tagName === "TR") hoverKey = null;
    highlight();
  }

  /** Wire the controls (once per page). */
  function init() {
    const redraw = () => { if (current !== null) render(); };
    $("kind").addEventListener("change", () => { if (current !== null) { setupLayersAndHeads(); render(); } });
    for (const id of ["layer", "head", "relative"]) $(id).addEventListener("change", redraw);
    $("numbers").addEventListener("change", () => document.body.classList.toggle("hide-numbers", !$("numbers").checked));
    document.body.classList.add("hide-numbers");
    for (const id of ["heatmap", "query-chips", "key-chips"]) {
      $(id).addEventListener("mouseover", onHover);
      $(id).addEventListener("mouseleave", () => { hoverQuery = hoverKey = null; if (current !== null) highlight(); });
    }
    const lg = $("legend").getContext("2d");
    for (let x = 0; x < 160; x++) { lg.fillStyle = color(x / 159); lg.fillRect(x, 0, 1, 10); }
  }

  /** Show a sentence (keeping the chosen kind, layer and head where it has them). */
  function show(sentence, id) {
    if (!KINDS.some((k) => hasKind(sentence, k))) throw new Error("the sentence has no attention weights");
    current = sentence;
    currentId = String(id);
    hoverQuery = hoverKey = null;
    setupKinds();
    setupLayersAndHeads();
    render();
  }

  return {init, show};
})();
