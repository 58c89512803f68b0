// asynceval view, the page's script: one function's body in five files joined in order (view.py's
// SCRIPTS): view_base.js, view_charts.js, view_details.js, view_table.js, view_main.js.
// Plain DOM, no library, nothing fetched: every datum comes from the JSON elements (script type
// application/json) the Python side embedded. Text from a run is only ever set as text
// (textContent, createTextNode), never parsed as HTML. This file: data, helpers, the URL hash.
  var STARTED = performance.now();
  var DATA = JSON.parse(document.getElementById("view-data").textContent);
  var RUNS = DATA.runs;
  var PAGE_SIZE = 200;
  var SVGNS = "http://www.w3.org/2000/svg";
  var app = document.getElementById("app");
  var collator = new Intl.Collator(undefined, { numeric: true });

  // ---------- small helpers ----------
  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      for (var key in props) {
        var value = props[key];
        if (value === undefined || value === null) continue;
        if (key === "text") node.textContent = value;
        else if (key === "cls") node.className = value;
        else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
        else node.setAttribute(key, value);
      }
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function svgEl(tag, attrs, text) {
    var node = document.createElementNS(SVGNS, tag);
    for (var key in attrs) node.setAttribute(key, attrs[key]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  // A number from the data, or null: JSON has no NaN, so a non-finite one arrives as a string.
  function real(x) { return typeof x === "number" && isFinite(x); }
  function pct(x) { return real(x) ? (100 * x).toFixed(1) + "%" : "-"; }
  function num(x) { return real(x) ? x.toLocaleString("en-US") : "-"; }
  function secs(x) {
    if (!real(x)) return "-";
    if (x < 1) return (x * 1000).toFixed(x < 0.01 ? 2 : 1) + " ms";
    if (x < 120) return x.toFixed(2) + " s";
    return (x / 60).toFixed(1) + " min";
  }
  function secsShort(x) {
    if (x === 0) return "0";
    if (x < 1) return +(x * 1000).toPrecision(3) + "ms";
    return +x.toPrecision(3) + "s";
  }
  function compact(x) {
    if (x >= 1e6) return +(x / 1e6).toPrecision(3) + "M";
    if (x >= 1e4) return +(x / 1e3).toPrecision(3) + "k";
    return num(x);
  }
  function score(x) { return x === null || x === undefined ? "-" : (x === 1 || x === 0 ? String(x) : x.toFixed(3)); }
  function kvTable(pairs) {
    return el("table", { cls: "kv" }, pairs.map(function (p) {
      return el("tr", null, [el("td", { text: p[0] }), el("td", null, [p[1] instanceof Node ? p[1] : String(p[1])])]);
    }));
  }
  function maxOf(values) {
    var top = -Infinity;
    for (var i = 0; i < values.length; i++) if (values[i] !== null && values[i] > top) top = values[i];
    return top === -Infinity ? 0 : top;
  }
  function niceCeil(x) {
    if (x <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(x)));
    var steps = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= x) return steps[i] * p;
    return 10 * p;
  }
  function ticks(max, count, integer) {
    var raw = max / count, p = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    var step = [1, 2, 2.5, 5, 10].map(function (m) { return m * p; }).find(function (s) { return s >= raw; }) || raw;
    if (integer) step = Math.max(1, Math.ceil(step));
    var out = [];
    for (var v = 0; v <= max + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  // ---------- per-run prepared data: outcome per row, search text, details ----------
  var prepared = {};
  function outcomeOf(status, s) {
    if (s === null || s === undefined) return status === "success" || status === "evaluation_failed" ? "unscored" : "error";
    return s >= 1 ? "passed" : "failed";
  }
  function prep(index) {
    if (prepared[index]) return prepared[index];
    var run = RUNS[index], cols = run.columns, n = run.n_rows, outcome = new Array(n);
    for (var i = 0; i < n; i++) outcome[i] = outcomeOf(cols.status[i], cols.score[i]);
    prepared[index] = { n: n, outcome: outcome, hay: null, text: null, offsets: null, viewKey: null, view: null, pairs: null };
    return prepared[index];
  }
  function haystack(p, cols) {
    if (!p.hay) {
      p.hay = new Array(p.n);
      for (var i = 0; i < p.n; i++) {
        p.hay[i] = [cols.task_id[i], cols.status[i], cols.termination_reason[i], cols.error[i]].join("\u0001").toLowerCase();
      }
    }
    return p.hay;
  }
  function detailOf(index, row) {
    var p = prep(index);
    if (p.text === null) {
      p.text = document.getElementById("details-" + index).textContent;
      p.offsets = new Uint32Array(p.n + 1);
      var pos = 0;
      for (var k = 1; k < p.n; k++) { pos = p.text.indexOf("\n", pos) + 1; p.offsets[k] = pos; }
      p.offsets[p.n] = p.text.length + 1;
    }
    return JSON.parse(p.text.slice(p.offsets[row], p.offsets[row + 1] - 1));
  }
  // The row of run `index` holding (task, rep), as the comparison names pairs; -1 if none.
  function rowOf(index, task, rep) {
    var p = prep(index), cols = RUNS[index].columns;
    if (!p.pairs) {
      p.pairs = new Map();
      for (var i = 0; i < p.n; i++) p.pairs.set(cols.task_id[i] + "\u0001" + cols.repeat_idx[i], i);
    }
    var found = p.pairs.get(task + "\u0001" + rep);
    return found === undefined ? -1 : found;
  }

  // ---------- state kept in the URL hash ----------
  var state = {};
  function readHash() {
    var params = new URLSearchParams(location.hash.replace(/^#/, ""));
    var run = params.get("run");
    state = {
      run: run === "compare" ? -1 : run !== null && RUNS[+run] ? +run : RUNS.length > 1 ? -1 : 0,
      status: params.get("status") || "",
      outcome: params.get("outcome") || "",
      q: params.get("q") || "",
      task: params.get("task"),
      rep: params.get("rep"),
      reason: params.get("reason") || "",
      sort: params.get("sort") || "",
      page: Math.max(0, (+params.get("page") || 1) - 1),
      row: /^\d+$/.test(params.get("row") || "") ? +params.get("row") : null,
    };
  }
  function writeHash() {
    var params = new URLSearchParams();
    params.set("run", state.run < 0 ? "compare" : String(state.run));
    ["status", "reason", "outcome", "q", "sort"].forEach(function (k) { if (state[k]) params.set(k, state[k]); });
    if (state.task !== null) params.set("task", state.task);
    if (state.rep !== null) params.set("rep", state.rep);
    if (state.page) params.set("page", String(state.page + 1));
    if (state.row !== null) params.set("row", String(state.row));
    history.replaceState(null, "", "#" + params.toString());
  }

