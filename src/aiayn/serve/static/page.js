/* The page of `aiayn serve`: send the text box to the service, show the output, and draw the
   attention with the explorer's view (attention_view.js). A translation model: POST
   /v1/attention gives the translation and every attention weight in one answer. A language
   model: POST /v1/generate gives the continuation, then /v1/attention the weights over the
   prompt and continuation. When the service asks for an API key (401), a key field appears. */
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  let task = null, shown = 0;

  function setStatus(text, isError = false) {
    $("status").textContent = text;
    $("status").classList.toggle("error", isError);
  }

  /** A JSON request to the service; throws an Error with the service's message. */
  async function call(method, path, body) {
    const headers = {};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const key = $("api-key").value;
    if (key) headers.Authorization = `Bearer ${key}`;
    const response = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
    let data = null;
    try { data = await response.json(); } catch (_) { /* not JSON: reported below */ }
    if (!response.ok) {
      if (response.status === 401) { $("api-key-row").hidden = false; $("api-key").focus(); }
      const message = data && data.error ? data.error.message : `HTTP ${response.status}`;
      throw new Error(message);
    }
    return data;
  }

  function describe(info) {
    const s = info.sizes, langs = info.languages ? `${info.languages.source} → ${info.languages.target} · ` : "";
    const layers = info.task === "lm" ? `${s.num_decoder_layers} layers`
      : `${s.num_encoder_layers} encoder + ${s.num_decoder_layers} decoder layers`;
    $("model-summary").textContent = `${info.task === "lm" ? "language model" : "translation model"} · ${langs}` +
      `d_model ${s.d_model}, ${s.num_heads} heads, ${layers} · ${info.parameters.toLocaleString("en")} parameters` +
      ` · engine ${info.engine}`;
  }

  async function loadModel() {
    try {
      const info = await call("GET", "/v1/model");
      task = info.task;
      describe(info);
      const lm = task === "lm";
      document.querySelectorAll(".lm-only").forEach((node) => { node.hidden = !lm; });
      document.querySelectorAll(".mt-only").forEach((node) => { node.hidden = lm; });
      $("submit").textContent = lm ? "Generate" : "Translate";
      $("input-title").textContent = lm ? "Type a prompt" : "Type a sentence";
      $("output-title").textContent = lm ? "Continuation" : "Translation";
      $("input").placeholder = lm ? "Type a prompt, then press Enter" : "Type a sentence, then press Enter";
      if (!$("input").value && info.example) $("input").value = info.example;  // an example to start from
      $("submit").disabled = false;
      setStatus("");
    } catch (error) {
      setStatus(error.message, true);
    }
    document.body.dataset.ready = "1";
  }

  function showAttention(entry) {
    $("view").hidden = false;
    shown += 1;
    AttentionView.show(entry, String(shown));
  }

  /** The comma-separated phrases of the field `id` ("must contain" / "must avoid"). */
  function phrases(id) {
    return $(id).value.split(",").map((p) => p.trim()).filter((p) => p);
  }

  async function submit(event) {
    event.preventDefault();
    if (task === null) { await loadModel(); if (task === null) return; }
    const text = $("input").value.trim();
    if (!text) { setStatus("type something first", true); return; }
    $("submit").disabled = true;
    document.body.dataset.busy = "1";
    const started = performance.now();
    let note = "";
    try {
      if (task === "lm") {
        setStatus("generating…");
        const body = {prompt: text, max_new_tokens: +$("max-new-tokens").value, temperature: +$("temperature").value};
        if ($("seed").value !== "") body.seed = +$("seed").value;
        const {text: continuation} = await call("POST", "/v1/generate", body);
        $("output").replaceChildren(document.createTextNode(text), Object.assign(document.createElement("mark"),
          {textContent: continuation}));
        $("output-card").hidden = false;
        showAttention(await call("POST", "/v1/attention", {text: text + continuation}));
      } else if (phrases("include").length || phrases("exclude").length) {
        // Constrained: /v1/translate takes the phrases (the attention view shows unconstrained search).
        setStatus("translating…");
        const body = {text: [text], include: [phrases("include")], exclude: [phrases("exclude")]};
        const best = (await call("POST", "/v1/translate", body)).translations[0][0];
        $("output").textContent = best.text;
        $("output-card").hidden = false;
        $("view").hidden = true;
        note = best.constraints_met ? "" : " · the length limit came before every phrase was in";
      } else {
        setStatus("translating…");
        const entry = await call("POST", "/v1/attention", {text});
        $("output").textContent = entry.target;
        $("output-card").hidden = false;
        showAttention(entry);
      }
      setStatus(`${Math.round(performance.now() - started)} ms${note}`);
    } catch (error) {
      setStatus(error.message, true);
    } finally {
      $("submit").disabled = false;
      delete document.body.dataset.busy;
    }
  }

  AttentionView.init();
  $("form").addEventListener("submit", submit);
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("form").requestSubmit(); }
  });
  $("api-key").addEventListener("change", () => { if (task === null) loadModel(); });
  loadModel();
})();
