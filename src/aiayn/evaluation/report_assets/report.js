/* The evaluation report page (`aiayn evaluate --report`): reads the embedded data (the same
   dict as OUT.json, see aiayn/evaluation/report.py) and draws the corpus figures, the plots,
   the word table, the sortable and filterable sentence table and, for a clicked sentence, its
   encoder-decoder attention with the attention view of aiayn/explorer.

   Hooks for tests: body[data-ready="1"] once drawn; table#sentences carries data-sort and
   data-order; each row tr[data-id] has td.c-<column> cells and span.flag[data-flag] chips
   (class "unavailable" where a flag could not be computed); #attention-card carries
   data-sentence and data-state ("loading", then "shown" or "unavailable"); #word-scores holds
   the clicked sentence's span.word[data-score] (class "low" under LOW_PROBABILITY). */
"use strict";
const DATA = JSON.parse(document.getElementById("aiayn-data").textContent);
const $ = (id) => document.getElementById(id);
const FLAGS = Object.keys(DATA.flags);
const SVG_NS = "http://www.w3.org/2000/svg";

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}
function svgEl(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
const fmt = (x, digits = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(digits));

// ---------------------------------------------------------------- top
function drawTop() {
  $("title").textContent = DATA.title;
  document.title = DATA.title;
  const m = DATA.model;
  $("model-summary").textContent = `${m.directory} · d_model ${m.d_model}, ${m.num_heads} heads, ` +
    `${m.num_encoder_layers} encoder + ${m.num_decoder_layers} decoder layers · ${m.device} · ` +
    `${DATA.corpus.sentences} sentence(s)`;
  const c = DATA.corpus, figures = [];
  if (DATA.has_reference) {
    figures.push(["bleu", fmt(c.bleu), "BLEU"], ["chrf", fmt(c.chrf), "chrF"],
                 ["length_ratio", fmt(c.length_ratio, 3), "length ratio (hyp/ref tokens)"]);
  }
  figures.push(["sentences", String(c.sentences), "sentences"]);
  if (c.constraints && c.constraints.include_phrases) {
    figures.push(["keep_rate", `${fmt(100 * c.constraints.keep_rate, 1)}%`,
                  `constraints kept (${c.constraints.include_kept}/${c.constraints.include_phrases} phrases)`]);
  }
  if (c.constraints && c.constraints.exclude_phrases) {
    figures.push(["exclude_rate", `${c.constraints.exclude_appeared}/${c.constraints.exclude_phrases}`,
                  "excluded phrases that appear"]);
  }
  $("figures").replaceChildren(...figures.map(([key, value, label]) => {
    const box = el("div", {class: "figure", "data-figure": key});
    box.append(el("b", {}, value), el("span", {}, label));
    return box;
  }));
  if (DATA.has_reference) {
    $("figures").after(el("div", {class: "signature", id: "bleu-signature"}, `BLEU ${c.bleu_signature}`),
                       el("div", {class: "signature", id: "chrf-signature"}, `chrF ${c.chrf_signature}`));
  }
  $("flag-counts").replaceChildren(...FLAGS.map((name) => {
    const info = DATA.flags[name], count = c.flag_counts[name];
    const box = el("div", {class: "flag-count", "data-flag": name,
                           title: info.available ? info.description : info.note});
    box.append(el("span", {class: "flag" + (info.available ? "" : " unavailable"), "data-flag": name}, name),
               el("b", {}, info.available ? String(count) : "unavailable"));
    box.addEventListener("click", () => { $("flag-filter").value = name; applyFilter(); });
    return box;
  }));
  const cmp = DATA.compare;
  if (cmp) {
    const sig = cmp.significance, box = el("div", {class: "figures", id: "compare-figures"});
    for (const metric of ["BLEU", "chrF"]) {
      const r = sig[metric], fig = el("div", {class: "figure", "data-figure": `compare-${metric}`});
      fig.append(el("b", {}, `${fmt(r.system)} vs ${fmt(r.baseline)}`),
                 el("span", {}, `${metric}: this model vs ${cmp.name} · p = ${fmt(r.p_value, 4)}` +
                                ` (paired bootstrap, ${cmp.samples} resamples)`));
      box.append(fig);
    }
    const key = cmp.chrf, fig = el("div", {class: "figure", "data-figure": "wins"});
    fig.append(el("b", {}, `${key.wins} / ${key.losses} / ${key.ties}`),
               el("span", {}, "sentences won / lost / tied (sentence chrF)"));
    box.append(fig);
    $("compare-summary").replaceChildren(el("h2", {}, `Compared with ${cmp.name}`), box,
      el("div", {class: "signature"}, `same p-values: ${cmp.sacrebleu_command}`));
  }
}

// ---------------------------------------------------------------- plots
function axes(svg, W, H, pad, xTicks, yTicks, xLabel, yLabel) {
  svg.append(svgEl("line", {x1: pad.l, y1: H - pad.b, x2: W - pad.r, y2: H - pad.b, stroke: "#999"}),
             svgEl("line", {x1: pad.l, y1: pad.t, x2: pad.l, y2: H - pad.b, stroke: "#999"}));
  for (const [x, label] of xTicks) svg.append(svgEl("text", {x, y: H - pad.b + 13, "text-anchor": "middle"}, label));
  for (const [y, label] of yTicks) svg.append(svgEl("text", {x: pad.l - 4, y: y + 3, "text-anchor": "end"}, label));
  svg.append(svgEl("text", {x: (pad.l + W - pad.r) / 2, y: H - 3, "text-anchor": "middle"}, xLabel),
             svgEl("text", {x: 10, y: pad.t - 6}, yLabel));
}
function plotCard(id, title, svg) {
  const card = el("div", {class: "card", id});
  card.append(el("h2", {}, title), svg);
  $("plots").append(card);
}
function drawPlots() {
  if (!DATA.has_reference) return;
  const W = 380, H = 230, pad = {l: 38, r: 10, t: 16, b: 30};
  const sx = (v, max) => pad.l + (W - pad.l - pad.r) * v / max, sy = (v, max) => H - pad.b - (H - pad.t - pad.b) * v / max;
  // sentence chrF against source length
  let svg = svgEl("svg", {width: W, height: H, id: "plot-scatter"});
  const maxX = Math.max(1, ...DATA.sentences.map((s) => s.source_words));
  const xt = [...new Set([0, 0.25, 0.5, 0.75, 1].map((f) => Math.round(f * maxX)))];
  axes(svg, W, H, pad, xt.map((v) => [sx(v, maxX), String(v)]), [0, 25, 50, 75, 100].map((v) => [sy(v, 100), String(v)]),
       "source length (words)", "sentence chrF");
  for (const s of DATA.sentences) {
    const dot = svgEl("circle", {cx: sx(s.source_words, maxX), cy: sy(s.chrf, 100), r: 2.6,
      fill: Object.keys(s.flags).length ? "#c62828" : "#3b5bdb", "fill-opacity": 0.55, "data-id": s.id});
    dot.append(svgEl("title", {}, `#${s.id + 1}: chrF ${fmt(s.chrf)}, ${s.source_words} words`));
    svg.append(dot);
  }
  plotCard("scatter-card", "Sentence chrF vs source length (red: flagged)", svg);
  // length-ratio histogram
  const hist = DATA.ratio_histogram, maxC = Math.max(1, ...hist.map((b) => b.count));
  svg = svgEl("svg", {width: W, height: H, id: "plot-ratio"});
  const bw = (W - pad.l - pad.r) / hist.length;
  axes(svg, W, H, pad, hist.map((b, i) => [pad.l + bw * (i + 0.5), i % 5 === 0 || i === hist.length - 1 ? b.label : ""]),
       [0, 0.5, 1].map((f) => [sy(f * maxC, maxC), String(Math.round(f * maxC))]), "hypothesis / reference length", "sentences");
  hist.forEach((b, i) => {
    const low = DATA.settings.length_low, high = DATA.settings.length_high, x = i * 0.1;
    const outside = b.label.endsWith("+") ? high < 2 : (x + 0.1 <= low || x > high);
    const bar = svgEl("rect", {x: pad.l + bw * i + 1, y: sy(b.count, maxC), width: Math.max(1, bw - 2),
      height: H - pad.b - sy(b.count, maxC), fill: outside ? "#ef6c00" : "#3b5bdb", "data-label": b.label, "data-count": b.count});
    bar.append(svgEl("title", {}, `${b.label}: ${b.count}`));
    svg.append(bar);
  });
  plotCard("ratio-card", "Length ratio per sentence (orange: outside the length band)", svg);
  // scores by source-length bucket
  const buckets = DATA.length_buckets;
  svg = svgEl("svg", {width: W, height: H, id: "plot-buckets"});
  const gw = (W - pad.l - pad.r) / buckets.length;
  axes(svg, W, H, pad, buckets.map((b, i) => [pad.l + gw * (i + 0.5), `${b.label} (${b.sentences})`]),
       [0, 25, 50, 75, 100].map((v) => [sy(v, 100), String(v)]), "source length, words (sentences)", "BLEU / chrF");
  buckets.forEach((b, i) => {
    [["bleu", "#3b5bdb"], ["chrf", "#12b886"]].forEach(([key, colour], k) => {
      const bar = svgEl("rect", {x: pad.l + gw * i + gw * (0.1 + 0.4 * k), y: sy(b[key], 100), width: gw * 0.38,
        height: H - pad.b - sy(b[key], 100), fill: colour, "data-bucket": b.label, "data-metric": key});
      bar.append(svgEl("title", {}, `${b.label} words: ${key === "bleu" ? "BLEU" : "chrF"} ${fmt(b[key])}`));
      svg.append(bar);
    });
  });
  plotCard("buckets-card", "Corpus BLEU (blue) and chrF (green) by source length", svg);
}

// ---------------------------------------------------------------- words
function wordTable(caption, columns, rows, id) {
  const table = el("table", {id});
  table.append(el("caption", {}, caption));
  const head = el("tr");
  columns.forEach(([, label]) => head.append(el("th", {}, label)));
  table.append(head);
  for (const row of rows) {
    const tr = el("tr");
    columns.forEach(([key]) => tr.append(el("td", {}, typeof row[key] === "number" && key !== "words" &&
      !key.endsWith("count") ? fmt(row[key], 3) : String(row[key]))));
    table.append(tr);
  }
  return table;
}
function drawWords() {
  if (!DATA.words) { $("words-card").hidden = true; return; }
  const w = DATA.words;
  $("words").replaceChildren(
    wordTable("by frequency", [["label", "frequency"], ["words", "words"], ["precision", "precision"],
      ["recall", "recall"], ["f", "F"]], w.buckets, "word-buckets"),
    wordTable("right most often", [["word", "word"], ["reference_count", "in refs"], ["hypothesis_count", "in hyps"],
      ["f", "F"]], w.best, "word-best"),
    wordTable("right least often", [["word", "word"], ["reference_count", "in refs"], ["hypothesis_count", "in hyps"],
      ["f", "F"]], w.worst, "word-worst"),
    wordTable("produced, never in a reference", [["word", "word"], ["hypothesis_count", "in hyps"]],
      w.never_in_reference, "word-unused"));
}

// ---------------------------------------------------------------- sentences
const COLUMNS = [
  ["id", "#", true], ["source", "source", false], ["hypothesis", "hypothesis", false],
  ...(DATA.has_reference ? [["reference", "reference", false], ["chrf", "chrF", true], ["bleu", "BLEU", true]] : []),
  ...(DATA.compare ? [["compare", `${DATA.compare.name}`, false], ["delta", "Δ chrF", true]] : []),
  ["ratio", "length ratio", true], ["flags", "flags", true],
];
function sortValue(s, key) {
  if (key === "flags") return Object.keys(s.flags).length;
  if (key === "delta") return s.chrf - s.compare.chrf;
  const v = s[key];
  return v === null || v === undefined ? -Infinity : v;
}
function flagChips(s) {
  const chips = [];
  for (const name of FLAGS) {
    const info = DATA.flags[name];
    if (name in s.flags) {
      chips.push(el("span", {class: "flag", "data-flag": name, title: `${name}: ${s.flags[name]}\n${info.description}`}, name));
    } else if (!info.available || s.unavailable.includes(name)) {
      chips.push(el("span", {class: "flag unavailable", "data-flag": name,
        title: `${name}: ${info.note || "unavailable for this sentence (empty or longer than the model's max_len)"}`},
        `${name}: unavailable`));
    }
  }
  return chips;
}
function drawTable() {
  const head = el("tr");
  for (const [key, label, sortable] of COLUMNS) {
    const th = el("th", sortable ? {"data-sort": key, class: `c-${key}`} : {class: `c-${key}`}, label);
    if (sortable) th.addEventListener("click", () => sortBy(key));
    head.append(th);
  }
  $("sentences-head").replaceChildren(head);
  const rows = DATA.sentences.map((s) => {
    const tr = el("tr", {"data-id": s.id});
    for (const [key] of COLUMNS) {
      const td = el("td", {class: `c-${key}`});
      if (key === "id") td.textContent = String(s.id + 1);
      else if (key === "chrf" || key === "bleu" || key === "ratio") td.textContent = fmt(s[key], key === "ratio" ? 3 : 2);
      else if (key === "compare") td.textContent = s.compare.hypothesis;
      else if (key === "delta") {
        const d = s.chrf - s.compare.chrf;
        td.textContent = (d > 0 ? "+" : "") + fmt(d);
        td.classList.add(d > 1e-9 ? "win" : d < -1e-9 ? "loss" : "tie");
      } else if (key === "flags") td.append(...flagChips(s));
      else td.textContent = s[key] ?? "";
      if (["id", "chrf", "bleu", "ratio", "delta"].includes(key)) td.classList.add("num");
      tr.append(td);
    }
    tr.addEventListener("click", () => showAttention(s.id));
    return tr;
  });
  $("sentences-body").replaceChildren(...rows);
  const filter = $("flag-filter");
  filter.replaceChildren(el("option", {value: "all"}, "all sentences"), el("option", {value: "any"}, "flagged (any flag)"),
    el("option", {value: "none"}, "not flagged"),
    ...FLAGS.map((name) => el("option", {value: name}, `flag: ${name}`)));
  filter.addEventListener("change", applyFilter);
  $("search").addEventListener("input", applyFilter);
  applyFilter();
}
function sortBy(key) {
  const table = $("sentences");
  const order = table.dataset.sort === key && table.dataset.order === "asc" ? "desc" : "asc";
  Object.assign(table.dataset, {sort: key, order});
  const sign = order === "asc" ? 1 : -1;
  const byId = Object.fromEntries([...$("sentences-body").children].map((tr) => [tr.dataset.id, tr]));
  const sorted = [...DATA.sentences].sort((a, b) => sign * (sortValue(a, key) - sortValue(b, key)) || a.id - b.id);
  $("sentences-body").replaceChildren(...sorted.map((s) => byId[s.id]));
  document.querySelectorAll("#sentences th").forEach((th) => {
    th.classList.toggle("sorted-asc", th.dataset.sort === key && order === "asc");
    th.classList.toggle("sorted-desc", th.dataset.sort === key && order === "desc");
  });
}
function applyFilter() {
  const flag = $("flag-filter").value, text = $("search").value.trim().toLowerCase();
  let shown = 0;
  for (const tr of $("sentences-body").children) {
    const s = DATA.sentences[+tr.dataset.id], n = Object.keys(s.flags).length;
    const byFlag = flag === "all" || (flag === "any" && n > 0) || (flag === "none" && n === 0) || flag in s.flags;
    const byText = !text || [s.source, s.hypothesis, s.reference || ""].some((t) => t.toLowerCase().includes(text));
    tr.hidden = !(byFlag && byText);
    if (!tr.hidden) shown++;
  }
  $("sentences").dataset.filter = flag;
  $("shown-count").textContent = `${shown} of ${DATA.sentences.length} shown`;
}

// ---------------------------------------------------------------- attention
/** The (L, H, T, S) weights of a sentence: base64 -> zlib stream -> bytes -> weight / 255. */
async function decodeAttention(a) {
  const packed = Uint8Array.from(atob(a.cross), (c) => c.charCodeAt(0));
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
  const raw = new Uint8Array(await new Response(stream).arrayBuffer()), [L, H, T, S] = a.shape, out = [];
  let o = 0;
  for (let l = 0; l < L; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      const rows = [];
      for (let t = 0; t < T; t++) {
        const row = new Array(S);
        for (let k = 0; k < S; k++) row[k] = raw[o++] / 255;
        rows.push(row);
      }
      heads.push(rows);
    }
    out.push(heads);
  }
  return out;
}
let shownSentence = null;
function markFlagged() {
  if (shownSentence === null) return;
  const flagged = new Set(shownSentence.highlight), keysAreSource = $("heatmap").dataset.kind !== "decoder";
  document.querySelectorAll("#heatmap thead th[data-k], #key-chips .chip").forEach((node) => {
    const on = keysAreSource && flagged.has(+node.dataset.k);
    if (node.classList.contains("flagged") !== on) node.classList.toggle("flagged", on);
  });
}
const LOW_PROBABILITY = 0.5;  // a word the model gives less probability than this is coloured
function showWordScores(s) {
  const box = $("word-scores");
  box.replaceChildren();
  box.hidden = !s.word_scores;
  if (!s.word_scores) return;
  box.append(el("span", {class: "hint"}, `log-probability of each word (p < ${LOW_PROBABILITY} coloured): `));
  for (const [word, score] of s.word_scores) {
    const p = Math.exp(score), low = p < LOW_PROBABILITY;
    const span = el("span", {class: low ? "word low" : "word", "data-score": String(score),
                             title: `log p = ${score.toFixed(4)}, p = ${p.toFixed(3)}`}, word);
    if (low) span.style.background = `rgba(220, 50, 47, ${(0.25 + 0.75 * (1 - p / LOW_PROBABILITY)).toFixed(3)})`;
    box.append(span, " ");
  }
}
async function showAttention(id) {
  const s = DATA.sentences[id], card = $("attention-card");
  card.hidden = false;
  showWordScores(s);
  card.dataset.state = "loading";
  card.dataset.sentence = String(id);
  $("attention-sentence").textContent = `#${id + 1}`;
  document.querySelectorAll("#sentences-body tr.selected").forEach((tr) => tr.classList.remove("selected"));
  document.querySelector(`#sentences-body tr[data-id="${id}"]`).classList.add("selected");
  if (!s.attention) {
    card.dataset.state = "unavailable";
    $("attention-view").hidden = true;
    $("attention-note").hidden = false;
    $("attention-note").textContent = "Attention " + (DATA.attention_note ||
      "unavailable for this sentence: it is empty, or longer than the model's max_len");
    shownSentence = null;
    return;
  }
  const cross = await decodeAttention(s.attention);
  if (card.dataset.sentence !== String(id)) return;  // another sentence was clicked meanwhile
  $("attention-note").hidden = true;
  $("attention-view").hidden = false;
  shownSentence = s;
  AttentionView.show({source: s.source, target: s.hypothesis, translated: true, source_tokens: s.source_tokens,
                      target_tokens: s.target_tokens, cross}, id);
  markFlagged();
  card.dataset.state = "shown";
  card.scrollIntoView({block: "nearest"});
}

function init() {
  drawTop();
  drawPlots();
  drawWords();
  drawTable();
  AttentionView.init();
  const observer = new MutationObserver(markFlagged);  // the view redraws on every control change
  observer.observe($("heatmap"), {childList: true});
  observer.observe($("key-chips"), {childList: true});
  document.body.dataset.ready = "1";
}
init();
