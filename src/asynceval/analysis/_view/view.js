// asynceval view: the page's script. Plain DOM, no library, nothing fetched: every datum comes
// from the JSON elements (script type application/json) the Python side embedded. Text from a run
// is only ever set as text (textContent, createTextNode), never parsed as HTML.
(function () {
  "use strict";
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
  function pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; }
  function num(x) { return x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US"); }
  function secs(x) {
    if (x === null || x === undefined) return "-";
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
    prepared[index] = { n: n, outcome: outcome, hay: null, text: null, offsets: null, viewKey: null, view: null };
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
      sort: params.get("sort") || "",
      page: Math.max(0, (+params.get("page") || 1) - 1),
      row: params.get("row") === null ? null : +params.get("row"),
    };
  }
  function writeHash() {
    var params = new URLSearchParams();
    params.set("run", state.run < 0 ? "compare" : String(state.run));
    ["status", "outcome", "q", "sort"].forEach(function (k) { if (state[k]) params.set(k, state[k]); });
    if (state.task !== null) params.set("task", state.task);
    if (state.rep !== null) params.set("rep", state.rep);
    if (state.page) params.set("page", String(state.page + 1));
    if (state.row !== null) params.set("row", String(state.row));
    history.replaceState(null, "", "#" + params.toString());
  }

  // ---------- the page ----------
  function render() {
    app.textContent = "";
    var title = RUNS.length === 1 ? RUNS[0].label : RUNS.length + " runs";
    app.appendChild(el("h1", { text: "asynceval view: " + title }));
    if (RUNS.length > 1) {
      var tabs = el("nav", { cls: "tabs" }, [el("a", { href: "#run=compare", cls: state.run < 0 ? "active" : "", text: "Comparison" })]);
      RUNS.forEach(function (run, i) {
        tabs.appendChild(el("a", { href: "#run=" + i, cls: state.run === i ? "active" : "", text: run.label }));
      });
      app.appendChild(tabs);
    }
    if (state.run < 0) renderComparison(app);
    else renderRun(app, state.run);
    app.appendChild(el("footer", { id: "render-info" }, [
      DATA.generator + ", built " + DATA.generated_at + ". The URL's #hash holds the run, filters, search, sort and page: copy it to share this view. " +
      "Rendered in " + Math.round(performance.now() - STARTED) + " ms.",
    ]));
  }

  function renderRun(root, index) {
    var run = RUNS[index];
    root.appendChild(el("p", { cls: "muted" }, [run.results_path]));
    var cards = el("div", { cls: "cards" });
    root.appendChild(cards);
    cards.appendChild(headerCard(run));
    renderScore(cards, run);
    root.appendChild(el("div", { cls: "cards counts" }, [
      el("div", null, [el("h3", { text: "Status (click to filter)" }), chips(run.summary.statuses, "status")]),
      Object.keys(run.summary.termination_reasons).length
        ? el("div", null, [el("h3", { text: "Termination reason" }), chips(run.summary.termination_reasons, null)]) : null,
    ]));
    runNotes(root, run);
    root.appendChild(el("h2", { text: "Calls in flight, queue waits and retries (events.jsonl)" }));
    renderEvents(root, run);
    root.appendChild(el("h2", { text: "Repetitions" }));
    var tableBox = el("div", { id: "table-box" });
    root.appendChild(tableBox);
    renderTable(tableBox, index);
  }

  function headerCard(run) {
    var card = el("div", { cls: "card run-card" });
    if (!run.headers.length) card.appendChild(el("p", { text: "results.jsonl has no header line." }));
    run.headers.forEach(function (h, i) {
      if (run.headers.length > 1) card.appendChild(el("div", { cls: "muted", text: "run " + (i + 1) + " of " + run.headers.length + (h.resumed ? " (resumed)" : "") }));
      var limits = (h.max_concurrent_llm_calls === undefined ? "?" : h.max_concurrent_llm_calls) + " LLM calls, " +
        (h.max_concurrent_tasks === undefined ? "?" : h.max_concurrent_tasks) + " tasks at once";
      card.appendChild(kvTable([
        ["benchmark", h.benchmark || "-"],
        ["started", h.started_at || "-"],
        ["limits", limits],
        ["versions", "asynceval " + (h.asynceval_version || "?") + ", Python " + (h.python || "?")],
      ]));
      var settings = el("details", null, [el("summary", { text: "settings and the whole header" })]);
      settings.appendChild(renderValue(h, 0));
      card.appendChild(settings);
    });
    return card;
  }

  function runNotes(root, run) {
    var notes = [];
    if (run.superseded) notes.push(num(run.superseded) + " earlier reports were replaced by a resumed run's re-run (the last report of a task and repeat counts)");
    if (run.summary.damaged_lines) notes.push(num(run.summary.damaged_lines) + " damaged lines of results.jsonl were skipped");
    if (run.truncated_rows) notes.push(num(run.truncated_rows) + " rows' details were cut to fit the page (a run's rows share a budget of characters, rows that did not pass a larger share); each says which line of results.jsonl holds it whole");
    notes.forEach(function (t) { root.appendChild(el("p", { cls: "note", text: t })); });
  }

  function ciBar(ci, rate, width) {
    var svg = svgEl("svg", { viewBox: "0 0 " + width + " 14", width: width, height: 14, "class": "ci" });
    svg.appendChild(svgEl("rect", { x: 0, y: 6, width: width, height: 2, fill: "#e3e7ec" }));
    if (ci) svg.appendChild(svgEl("rect", { "class": "ci-bar", x: ci[0] * width, y: 2, width: Math.max(1, (ci[1] - ci[0]) * width), height: 10 }));
    if (rate !== null && rate !== undefined) svg.appendChild(svgEl("rect", { "class": "ci-point", x: rate * width - 1, y: 0, width: 2, height: 14 }));
    return svg;
  }

  function renderScore(cards, run) {
    var s = run.summary;
    cards.appendChild(s.pass_rate === null
      ? el("div", { cls: "card", id: "pass-rate" }, [el("div", { cls: "muted", text: "pass rate" }), el("div", { cls: "big", text: "-" }), el("div", { text: "no scored repetitions" })])
      : el("div", { cls: "card", id: "pass-rate" }, [
        el("div", { cls: "muted", text: "pass rate" }),
        el("div", { cls: "big", text: pct(s.pass_rate) }),
        el("div", { text: num(+s.passed.toFixed(3)) + " / " + num(s.scored) + " scored repetitions" }),
        el("div", { text: "95% CI " + pct(s.pass_rate_ci95[0]) + " – " + pct(s.pass_rate_ci95[1]) + " (Wilson)" }),
        ciBar(s.pass_rate_ci95, s.pass_rate, 200),
      ]));
    cards.appendChild(el("div", { cls: "card" }, [kvTable([
      ["repetitions", num(s.repetitions)],
      ["not scored", s.infrastructure_errors + " infrastructure errors, " + s.timeouts + " timeouts"],
      ["LLM calls / retries", num(s.llm_calls) + " / " + num(s.retries)],
      ["tokens in / out", num(s.prompt_tokens) + " / " + num(s.completion_tokens)],
      ["task duration p50 / p95", secs(s.duration_p50_s) + " / " + secs(s.duration_p95_s)],
      ["wall time", secs(s.wall_s)],
    ])]));
  }

  function chips(counts, filterKey) {
    var box = el("div", { cls: "chips", id: filterKey ? "status-counts" : "termination-counts" });
    Object.keys(counts).forEach(function (name) {
      var chip = el("button", {
        cls: "chip" + (filterKey && state.status === name ? " active" : ""),
        title: filterKey ? "show only " + name : name,
        onclick: filterKey ? function () {
          state.status = state.status === name ? "" : name;
          state.page = 0; state.row = null; writeHash(); render();
        } : null,
      }, [el("span", { cls: name === "success" ? "st-success" : "st-error", text: name }), el("b", { text: num(counts[name]) })]);
      box.appendChild(chip);
    });
    return box;
  }

  // ---------- events: charts ----------
  function renderEvents(root, run) {
    var ev = run.events;
    if (!ev.present) {
      root.appendChild(el("p", { cls: "note", id: "no-events", text: "No events.jsonl next to results.jsonl (" + ev.path + "), so no chart of calls in flight: the run's events went elsewhere (LOG_FILE) or the file was removed." }));
      return;
    }
    var head = num(ev.events) + " events read";
    if (ev.damaged_lines) head += "; " + num(ev.damaged_lines) + " damaged lines skipped";
    root.appendChild(el("p", { cls: "muted", text: head + "." }));
    var total = ev.wait_histogram.counts.reduce(function (a, b) { return a + b; }, 0);
    var waits = total ? el("div", { cls: "chart-col histogram-col" }, [
      el("div", { cls: "chart-wrap" }, [histogram(ev.wait_histogram)]),
      el("div", { cls: "legend" }, [legend("#7fa3e6", "queue wait before a slot, all " + num(total) + " calls" + (ev.runs.length > 1 ? " of every run" : ""))]),
    ]) : null;
    ev.runs.forEach(function (seg, i) {
      if (ev.runs.length > 1) root.appendChild(el("h3", { text: "Run " + (i + 1) + " of " + ev.runs.length + " in the log" + (seg.started_at ? ", started " + seg.started_at : "") }));
      renderSegment(root, seg, i === ev.runs.length - 1 ? waits : null);
    });
  }

  // One run of the log: its figures, calls in flight, and queue waits (with `side` beside them).
  function renderSegment(root, seg, side) {
    var st = seg.stats;
    if (!st.calls) {
      root.appendChild(el("p", { cls: "note no-calls", text: "This log holds no acquired/released events: the calls went around asynceval's funnel, or the log was filtered above INFO." }));
      return;
    }
    var retries = Object.keys(st.retries_by_status).map(function (k) {
      return (k === "None" || k === "null" ? "no status (timeout, connection)" : k) + ": " + st.retries_by_status[k];
    }).join(", ");
    var limitText = seg.limit === null ? "limit unknown" : "limit " + seg.limit + (st.limit_held ? " (held)" : " (EXCEEDED)");
    root.appendChild(el("p", { cls: "stats" }, [
      num(st.calls) + " calls over " + secs(st.duration_s) + " · max in flight " + st.max_in_flight + ", " + limitText +
      " · queue wait p50 " + secs(st.wait_p50_s) + ", p95 " + secs(st.wait_p95_s) + ", max " + secs(st.wait_max_s) +
      " · slot held p50 " + secs(st.held_p50_s) + ", p95 " + secs(st.held_p95_s) +
      " · retries " + st.retries + (retries ? " (" + retries + ")" : "") + " · timeouts " + st.timeouts +
      " · failed calls " + st.failed_calls +
      (st.limit_changes ? " · adaptive limit: " + st.limit_changes + " changes, lowest " + st.lowest_endpoint_limit : "") +
      (st.still_in_flight ? " · " + st.still_in_flight + " calls never released (run killed?)" : ""),
    ]));
    root.appendChild(inflightChart(seg));
    root.appendChild(el("div", { cls: "legend" }, [
      legend("#2f6fdd", "most calls in flight per bucket"), legend("#b9cff5", "mean in flight"),
      legend("#c4372d", "limit"), seg.adaptive_limit ? legend("#d98a00", "adaptive endpoint limit (lowest)") : null,
      legend("#d98a00", "retries"), legend("#c4372d", "timeouts and failed calls"),
    ]));
    root.appendChild(el("div", { cls: "chart-row" }, [
      el("div", { cls: "chart-col wait-col" }, [
        waitChart(seg),
        el("div", { cls: "legend" }, [legend("#2f6fdd", "queue wait p50 of the calls acquired in a bucket"), legend("#8a4fd1", "p95")]),
      ]),
      side,
    ]));
  }
  function legend(colour, text) { return el("span", { style: "--c: " + colour, text: text }); }

  var ML = 50, MR = 16; // chart margins; each chart has its own width W
  function xAxis(svg, seg, y, W) {
    var span = seg.buckets * seg.bucket_s, pw = W - ML - MR;
    svg.appendChild(svgEl("line", { "class": "axis", x1: ML, x2: W - MR, y1: y, y2: y }));
    ticks(span, 8).forEach(function (t) {
      if (t > span) return;
      var x = ML + (t / span) * pw;
      svg.appendChild(svgEl("line", { "class": "axis", x1: x, x2: x, y1: y, y2: y + 4 }));
      svg.appendChild(svgEl("text", { x: x, y: y + 15, "text-anchor": "middle" }, span < 2 ? (t * 1000).toFixed(0) + " ms" : +t.toPrecision(6) + " s"));
    });
  }
  function yAxis(svg, top, height, max, fmt, W, integer) {
    ticks(max, 4, integer).forEach(function (v) {
      if (v > max) return;
      var y = top + height - (v / max) * height;
      svg.appendChild(svgEl("line", { "class": "grid", x1: ML, x2: W - MR, y1: y, y2: y }));
      svg.appendChild(svgEl("text", { x: ML - 6, y: y + 4, "text-anchor": "end" }, fmt(v)));
    });
  }
  function stepPath(values, x, y) {
    var d = [], started = false;
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null) { started = false; continue; }
      if (!started) { d.push("M" + x(i).toFixed(1) + " " + y(v).toFixed(1)); started = true; }
      else d.push("V" + y(v).toFixed(1));
      d.push("H" + x(i + 1).toFixed(1));
    }
    return d.join("");
  }

  function inflightChart(seg) {
    var W = 1100, H = 240, top = 12, ph = 150, lane = 34, laneTop = top + ph + 8, pw = W - ML - MR, n = seg.buckets;
    var adaptiveMax = seg.adaptive_limit ? maxOf(seg.adaptive_limit) : 0;
    var yMax = Math.ceil(niceCeil(Math.max(seg.limit || 0, maxOf(seg.max_in_flight), adaptiveMax, 1) * 1.1));
    var x = function (i) { return ML + (i / n) * pw; };
    var y = function (v) { return top + ph - (v / yMax) * ph; };
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, "class": "chart inflight-chart", role: "img", "aria-label": "calls in flight over time against the limit" });
    yAxis(svg, top, ph, yMax, function (v) { return String(v); }, W, true);
    var mean = "M" + x(0) + " " + y(0) + stepPath(seg.mean_in_flight, x, y).replace(/^M[^V]*/, function (m) { return "L" + m.slice(1); }) + "V" + y(0) + "Z";
    svg.appendChild(svgEl("path", { "class": "inflight-mean", d: mean }));
    svg.appendChild(svgEl("path", { "class": "inflight-max", d: stepPath(seg.max_in_flight, x, y) }));
    if (seg.adaptive_limit) svg.appendChild(svgEl("path", { "class": "adaptive-limit", d: stepPath(seg.adaptive_limit, x, y) }));
    if (seg.limit !== null) {
      svg.appendChild(svgEl("line", { "class": "limit-line", x1: ML, x2: W - MR, y1: y(seg.limit), y2: y(seg.limit) }));
      svg.appendChild(svgEl("text", { "class": "limit-label", x: W - MR - 4, y: y(seg.limit) - 4, "text-anchor": "end" }, "limit " + seg.limit));
    }
    svg.appendChild(svgEl("text", { x: ML + 4, y: top + 10 }, "calls in flight"));
    var worst = Math.max(maxOf(seg.retries), 1), bad = Math.max(maxOf(seg.timeouts.map(function (t, i) { return t + seg.failed[i]; })), 1);
    var bw = Math.max(pw / n, 1.5), half = lane / 2 - 2;
    for (var i = 0; i < n; i++) {
      if (seg.retries[i]) svg.appendChild(svgEl("rect", { "class": "retry-bar", x: x(i), width: bw, y: laneTop + half - (seg.retries[i] / worst) * half, height: (seg.retries[i] / worst) * half }));
      var hurt = seg.timeouts[i] + seg.failed[i];
      if (hurt) svg.appendChild(svgEl("rect", { "class": "timeout-bar", x: x(i), width: bw, y: laneTop + half + 2, height: (hurt / bad) * half }));
    }
    svg.appendChild(svgEl("text", { x: ML - 6, y: laneTop + half, "text-anchor": "end" }, "retries"));
    svg.appendChild(svgEl("text", { x: ML - 6, y: laneTop + lane, "text-anchor": "end" }, "t/o, fail"));
    xAxis(svg, seg, laneTop + lane + 2, W);
    return withTooltip(svg, seg, top, laneTop + lane, W);
  }

  function waitChart(seg) {
    var W = 720, H = 190, top = 10, ph = 140, pw = W - ML - MR, n = seg.buckets;
    var yMax = niceCeil(Math.max(maxOf(seg.wait_p95), 1e-4) * 1.1);
    var x = function (i) { return ML + ((i + 0.5) / n) * pw; };
    var y = function (v) { return top + ph - (v / yMax) * ph; };
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, "class": "chart wait-chart", role: "img", "aria-label": "queue wait per time bucket" });
    yAxis(svg, top, ph, yMax, secsShort, W);
    [["wait-p95", seg.wait_p95], ["wait-p50", seg.wait_p50]].forEach(function (pair) {
      var d = [], points = 0;
      pair[1].forEach(function (v, i) {
        if (v === null) return;
        d.push((points ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1));
        points++;
      });
      svg.appendChild(svgEl("path", { "class": pair[0], d: d.join("") }));
      if (points <= 300) d.forEach(function (step) { // few points: show where the measurements are
        var xy = step.slice(1).split(" ");
        svg.appendChild(svgEl("circle", { "class": pair[0] + "-dot", cx: xy[0], cy: xy[1], r: 1.8 }));
      });
    });
    svg.appendChild(svgEl("text", { x: ML + 4, y: top + 10 }, "queue wait"));
    xAxis(svg, seg, top + ph + 2, W);
    return withTooltip(svg, seg, top, top + ph, W);
  }

  function withTooltip(svg, seg, top, bottom, W) {
    var wrap = el("div", { cls: "chart-wrap" }, [svg]);
    var tip = el("div", { cls: "tip" });
    var cursor = svgEl("line", { "class": "cursor", y1: top, y2: bottom, x1: -10, x2: -10 });
    svg.appendChild(cursor);
    wrap.appendChild(tip);
    svg.addEventListener("mousemove", function (event) {
      var box = svg.getBoundingClientRect(), sx = (event.clientX - box.left) * (W / box.width);
      var i = Math.floor(((sx - ML) / (W - ML - MR)) * seg.buckets);
      if (i < 0 || i >= seg.buckets) { tip.style.display = "none"; return; }
      var from = i * seg.bucket_s;
      cursor.setAttribute("x1", sx); cursor.setAttribute("x2", sx);
      tip.textContent = secs(from) + " – " + secs(from + seg.bucket_s) + " after the start\n" +
        "in flight: max " + seg.max_in_flight[i] + ", mean " + seg.mean_in_flight[i] + (seg.limit !== null ? " (limit " + seg.limit + ")" : "") +
        (seg.adaptive_limit && seg.adaptive_limit[i] !== null ? ", adaptive " + seg.adaptive_limit[i] : "") + "\n" +
        "acquired " + seg.acquired[i] + ", most queued " + seg.queued_max[i] + ", repetitions finished " + seg.finished[i] + "\n" +
        "queue wait p50 " + secs(seg.wait_p50[i]) + ", p95 " + secs(seg.wait_p95[i]) + ", max " + secs(seg.wait_max[i]) + "\n" +
        "retries " + seg.retries[i] + ", timeouts " + seg.timeouts[i] + ", failed calls " + seg.failed[i];
      tip.style.display = "block";
      var left = event.clientX - wrap.getBoundingClientRect().left + 14;
      tip.style.left = Math.min(left, wrap.clientWidth - tip.offsetWidth - 4) + "px";
      tip.style.top = "8px";
    });
    svg.addEventListener("mouseleave", function () { tip.style.display = "none"; cursor.setAttribute("x1", -10); cursor.setAttribute("x2", -10); });
    return wrap;
  }

  function histogram(hist) {
    var Wh = 440, H = 190, ml = 40, top = 14, ph = 140, edges = hist.edges, counts = hist.counts;
    var last = counts.length - 1;
    while (last > 0 && !counts[last]) last--;
    counts = counts.slice(0, Math.min(counts.length, last + 2));
    var bw = (Wh - ml - 10) / counts.length, top2 = niceCeil(maxOf(counts));
    var svg = svgEl("svg", { viewBox: "0 0 " + Wh + " " + H, "class": "chart wait-histogram", role: "img", "aria-label": "histogram of queue waits" });
    ticks(top2, 3, true).forEach(function (v) {
      var yv = top + ph - (v / top2) * ph;
      svg.appendChild(svgEl("line", { "class": "grid", x1: ml, x2: Wh - 10, y1: yv, y2: yv }));
      svg.appendChild(svgEl("text", { x: ml - 5, y: yv + 4, "text-anchor": "end" }, compact(v)));
    });
    counts.forEach(function (c, i) {
      var h = (c / top2) * ph, last = i === edges.length - 1;
      var label = last ? secsShort(edges[i]) + " or more" : secsShort(edges[i]) + " to " + secsShort(edges[i + 1]);
      var bar = svgEl("rect", { "class": "hist-bar", x: ml + i * bw + 2, width: bw - 4, y: top + ph - h, height: h });
      bar.appendChild(svgEl("title", {}, label + ": " + num(c) + " calls"));
      svg.appendChild(bar);
      // Bin edges under the bars' boundaries, as on a histogram's axis.
      svg.appendChild(svgEl("text", { x: ml + i * bw, y: top + ph + 14, "text-anchor": "middle" }, secsShort(edges[i])));
      if (i === counts.length - 1) svg.appendChild(svgEl("text", { x: ml + (i + 1) * bw, y: top + ph + 14, "text-anchor": "middle" }, last ? "∞" : secsShort(edges[i + 1])));
      if (c) svg.appendChild(svgEl("text", { x: ml + (i + 0.5) * bw, y: top + ph - h - 3, "text-anchor": "middle" }, compact(c)));
    });
    return svg;
  }

  // ---------- the table ----------
  var COLS = [
    { key: "line", label: "line", num: true },
    { key: "task_id", label: "task" },
    { key: "repeat_idx", label: "rep", num: true },
    { key: "status", label: "status" },
    { key: "termination_reason", label: "termination" },
    { key: "score", label: "score", num: true, fmt: score },
    { key: "duration_s", label: "duration", num: true, fmt: secs },
    { key: "queued_s", label: "queued", num: true, fmt: secs },
    { key: "llm_calls", label: "calls", num: true },
    { key: "retries", label: "retries", num: true },
    { key: "tokens", label: "tokens in / out", num: true },
    { key: "attempts", label: "attempts", num: true },
    { key: "error", label: "error" },
  ];
  function cell(cols, key, i) {
    if (key === "tokens") {
      var a = cols.prompt_tokens[i], b = cols.completion_tokens[i];
      return a === null && b === null ? null : (a || 0) + (b || 0);
    }
    return cols[key][i];
  }

  function currentView(index) {
    var run = RUNS[index], cols = run.columns, p = prep(index);
    var key = [index, state.status, state.outcome, state.q, state.task, state.rep, state.sort].join("\u0001");
    if (p.viewKey === key) return p.view;
    var q = state.q.toLowerCase(), hay = q ? haystack(p, cols) : null, rows = [];
    var notSuccess = state.status === "!success";
    for (var i = 0; i < p.n; i++) {
      if (state.status && (notSuccess ? cols.status[i] === "success" : cols.status[i] !== state.status)) continue;
      if (state.outcome && p.outcome[i] !== state.outcome) continue;
      if (state.task !== null && cols.task_id[i] !== state.task) continue;
      if (state.rep !== null && String(cols.repeat_idx[i]) !== state.rep) continue;
      if (q && hay[i].indexOf(q) < 0) continue;
      rows.push(i);
    }
    if (state.sort) {
      var desc = state.sort.charAt(0) === "-", sortKey = desc ? state.sort.slice(1) : state.sort;
      var col = COLS.find(function (c) { return c.key === sortKey; });
      if (col) {
        var values = rows.map(function (i) { return cell(cols, sortKey, i); });
        var order = rows.map(function (_, k) { return k; });
        order.sort(function (a, b) {
          var va = values[a], vb = values[b];
          if (va === null || va === undefined) return vb === null || vb === undefined ? a - b : 1;
          if (vb === null || vb === undefined) return -1;
          var c = col.num ? va - vb : collator.compare(String(va), String(vb));
          return (desc ? -c : c) || a - b;
        });
        rows = order.map(function (k) { return rows[k]; });
      }
    }
    p.viewKey = key; p.view = rows;
    return rows;
  }

  function setState(change) {
    for (var k in change) state[k] = change[k];
    writeHash();
    var box = document.getElementById("table-box");
    if (box) renderTable(box, state.run);
  }

  function renderTable(box, index) {
    box.textContent = "";
    var run = RUNS[index], cols = run.columns, p = prep(index);
    if (!p.n) { box.appendChild(el("p", { cls: "note", text: "results.jsonl holds no repetition yet." })); return; }
    var rows = currentView(index);
    if (state.row === null && state.task !== null && rows.length === 1) state.row = rows[0]; // a link to one pair opens it
    if (state.row !== null && rows.indexOf(state.row) >= 0) state.page = Math.floor(rows.indexOf(state.row) / PAGE_SIZE);
    var pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    if (state.page >= pages) state.page = pages - 1;
    box.appendChild(controls(index, rows.length, pages));
    var table = el("table", { cls: "rows", id: "rows" });
    var head = el("tr");
    COLS.forEach(function (c) {
      var cls = state.sort === c.key ? "sorted-asc" : state.sort === "-" + c.key ? "sorted-desc" : "";
      head.appendChild(el("th", { cls: cls, title: "sort by " + c.label, onclick: function () {
        var next = state.sort === c.key ? "-" + c.key : state.sort === "-" + c.key ? "" : c.key;
        setState({ sort: next, page: 0 });
      } }, [c.label]));
    });
    table.appendChild(el("thead", null, [head]));
    var body = el("tbody");
    rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE).forEach(function (i) {
      body.appendChild(rowElement(index, cols, p, i));
      if (state.row === i) body.appendChild(detailRow(index, i));
    });
    table.appendChild(body);
    box.appendChild(table);
    if (pages > 1) box.appendChild(controls(index, rows.length, pages, true));
  }

  function rowElement(index, cols, p, i) {
    var tr = el("tr", { cls: "row oc-row-" + p.outcome[i] + (state.row === i ? " open" : ""), "data-row": i, "data-task": cols.task_id[i], "data-outcome": p.outcome[i] });
    COLS.forEach(function (c) {
      var v = cell(cols, c.key, i), text;
      if (c.key === "tokens") text = v === null ? "-" : num(cols.prompt_tokens[i]) + " / " + num(cols.completion_tokens[i]);
      else text = v === null || v === undefined ? (c.key === "error" ? "" : "-") : c.fmt ? c.fmt(v) : c.num ? num(v) : String(v);
      var cls = c.num ? "num" : c.key === "error" ? "err" : "";
      if (c.key === "status") cls = v === "success" ? "st-success" : "st-error";
      if (c.key === "score") cls += " oc-" + p.outcome[i];
      tr.appendChild(el("td", { cls: cls, title: c.key === "error" && v ? v : null, text: text }));
    });
    tr.addEventListener("click", function () { setState({ row: state.row === i ? null : i }); });
    return tr;
  }

  function controls(index, count, pages, bottom) {
    var box = el("div", { cls: "controls" });
    if (!bottom) {
      var run = RUNS[index];
      var status = el("select", { id: "status-filter", title: "status", onchange: function (e) { setState({ status: e.target.value, page: 0, row: null }); } });
      [["", "every status"], ["!success", "not success"]].concat(Object.keys(run.summary.statuses).map(function (s) { return [s, s]; })).forEach(function (o) {
        var opt = el("option", { value: o[0], text: o[1] });
        if (o[0] === state.status) opt.selected = true;
        status.appendChild(opt);
      });
      var outcome = el("select", { id: "outcome-filter", title: "outcome", onchange: function (e) { setState({ outcome: e.target.value, page: 0, row: null }); } });
      [["", "every outcome"], ["passed", "passed (score 1)"], ["failed", "failed (scored, below 1)"], ["error", "error (not scored)"], ["unscored", "no usable evaluation"]].forEach(function (o) {
        var opt = el("option", { value: o[0], text: o[1] });
        if (o[0] === state.outcome) opt.selected = true;
        outcome.appendChild(opt);
      });
      var timer = null;
      var search = el("input", { type: "search", id: "search", placeholder: "search task id, status, error…", value: state.q, oninput: function (e) {
        clearTimeout(timer);
        timer = setTimeout(function () {
          setState({ q: e.target.value, page: 0, row: null });
          var again = document.getElementById("search");
          again.focus(); again.setSelectionRange(again.value.length, again.value.length);
        }, 200);
      } });
      box.appendChild(status); box.appendChild(outcome); box.appendChild(search);
      if (state.task !== null || state.rep !== null) {
        box.appendChild(el("button", { text: "task " + state.task + (state.rep !== null ? " rep " + state.rep : "") + " ✕", onclick: function () { setState({ task: null, rep: null, page: 0 }); } }));
      }
    }
    var first = count ? state.page * PAGE_SIZE + 1 : 0, last = Math.min(count, (state.page + 1) * PAGE_SIZE);
    var pager = el("span", { cls: "pager" }, [
      el("button", { text: "‹ prev", disabled: state.page ? null : "disabled", onclick: function () { setState({ page: state.page - 1, row: null }); } }),
      el("span", { id: bottom ? null : "row-count", text: "rows " + num(first) + "–" + num(last) + " of " + num(count) + (count !== RUNS[index].n_rows ? " (filtered from " + num(RUNS[index].n_rows) + ")" : "") + ", page " + (state.page + 1) + " of " + pages }),
      el("button", { text: "next ›", disabled: state.page + 1 < pages ? null : "disabled", onclick: function () { setState({ page: state.page + 1, row: null }); } }),
    ]);
    box.appendChild(pager);
    return box;
  }

  // ---------- a row's details ----------
  function detailRow(index, i) {
    var cols = RUNS[index].columns, td = el("td", { colspan: COLS.length, cls: "detail" });
    var d;
    try { d = detailOf(index, i); } catch (err) { td.appendChild(el("p", { cls: "note", text: "details unreadable: " + err })); return el("tr", { cls: "detail" }, [td]); }
    td.appendChild(el("div", { cls: "muted" }, ["task " + cols.task_id[i] + ", repeat " + cols.repeat_idx[i] + " — results.jsonl line " + d.line]));
    if (d.truncated) td.appendChild(el("p", { cls: "note truncated", text: "Truncated to fit the page (this row's share: " + num(d.cap) + " characters of JSON): " + d.truncated.join(", ") + ". The full record is in results.jsonl line " + d.line + "." }));
    if (d.error) { td.appendChild(el("h4", { text: "error" })); td.appendChild(renderError(d.error)); }
    td.appendChild(el("h4", { text: "eval" }));
    td.appendChild(d.eval === null || d.eval === undefined ? el("span", { cls: "muted", text: "none" }) : renderValue(d.eval, 0, 3));
    td.appendChild(el("h4", { text: "usage and timing" }));
    var usage = { llm_calls: cols.llm_calls[i], retries: cols.retries[i], prompt_tokens: cols.prompt_tokens[i], completion_tokens: cols.completion_tokens[i] };
    for (var k in d.usage || {}) usage[k] = d.usage[k];
    var timing = { queued_s: cols.queued_s[i], duration_s: cols.duration_s[i], finished_at: cols.finished_at[i] };
    td.appendChild(renderValue({ usage: usage, timing: timing, attempts: cols.attempts[i] }, 0, 1));
    td.appendChild(el("h4", { text: "traces" }));
    td.appendChild(d.traces === null || d.traces === undefined ? el("span", { cls: "muted", text: "none" }) : renderValue(d.traces, 0, 4));
    var config = el("details", null, [el("summary", { text: "config" })]);
    config.appendChild(d.config === null || d.config === undefined ? el("span", { cls: "muted", text: "none kept" }) : renderValue(RUNS[index].configs[d.config], 0, 2));
    td.appendChild(config);
    var raw = el("details", null, [el("summary", { text: "raw JSON of these details" })]);
    raw.addEventListener("toggle", function () {
      if (raw.open && raw.children.length === 1) raw.appendChild(el("pre", { cls: "block", text: JSON.stringify(d, null, 2) }));
    });
    td.appendChild(raw);
    return el("tr", { cls: "detail" }, [td]);
  }

  function renderError(error) {
    if (typeof error !== "object") return el("pre", { cls: "block", text: String(error) });
    var box = el("div");
    box.appendChild(el("div", null, [el("b", { text: (error.type || "error") + ": " }), el("span", { cls: "pre", text: error.message || "" })]));
    var rest = {};
    Object.keys(error).forEach(function (k) { if (k !== "type" && k !== "message" && k !== "traceback") rest[k] = error[k]; });
    if (Object.keys(rest).length) box.appendChild(renderValue(rest, 0, 2));
    if (error.traceback) box.appendChild(el("pre", { cls: "block", text: error.traceback }));
    return box;
  }

  function isMessages(value) {
    if (!Array.isArray(value) || !value.length) return false;
    var withRole = 0;
    for (var i = 0; i < value.length; i++) {
      var m = value[i];
      if (m && typeof m === "object" && !Array.isArray(m) && typeof m.role === "string") withRole++;
      else if (typeof m !== "string") return false; // a "… [N more items]" marker is a string
    }
    return withRole > 0;
  }

  // A JSON value as a collapsible tree; children are built when first opened.
  function renderValue(value, depth, openDepth) {
    var box = el("div", { cls: "tree" });
    box.appendChild(valueNode(value, depth, openDepth === undefined ? 1 : openDepth));
    return box;
  }
  function isBranch(value) {
    return value !== null && typeof value === "object" && !isMessages(value) && (Array.isArray(value) ? value.length : Object.keys(value).length) > 0;
  }
  // `name`: the key or index this value sits under, shown in its summary line.
  function valueNode(value, depth, openDepth, name) {
    if (value === null || value === undefined) return el("span", { cls: "null", text: "null" });
    if (typeof value === "string") return longText(value);
    if (typeof value !== "object") return el("span", { cls: "num", text: String(value) });
    if (isMessages(value)) return renderMessages(value, depth, openDepth);
    var keys = Array.isArray(value) ? null : Object.keys(value);
    var size = keys ? keys.length : value.length;
    if (!size) return el("span", { cls: "null", text: keys ? "{}" : "[]" });
    var label = keys ? "{" + keys.slice(0, 6).join(", ") + (size > 6 ? ", …" : "") + "}" : "[" + size + " items]";
    var summary = el("summary", null, name === undefined ? [label] : [el("span", { cls: "key", text: name + ": " }), label]);
    var node = el("details", null, [summary]);
    var filled = false;
    function fill() {
      if (filled) return;
      filled = true;
      (keys || value.map(function (_, i) { return i; })).forEach(function (k) {
        var item = value[k], key = keys ? k : "[" + k + "]";
        if (isBranch(item)) node.appendChild(valueNode(item, depth + 1, openDepth, key));
        else node.appendChild(el("div", { cls: "entry" }, [el("span", { cls: "key", text: key + ": " }), valueNode(item, depth + 1, openDepth)]));
      });
    }
    node.addEventListener("toggle", function () { if (node.open) fill(); });
    if (depth < openDepth) { node.open = true; fill(); }
    return node;
  }
  function longText(text, limit) {
    limit = limit || 2000;
    if (text.length <= 100 && text.indexOf("\n") < 0) return el("span", { cls: "str", text: JSON.stringify(text) });
    var pre = el("pre", { cls: "str", text: text.length > limit ? text.slice(0, limit) : text });
    if (text.length <= limit) return pre;
    var box = el("div", null, [pre]);
    box.appendChild(el("button", { cls: "more", text: "show all " + num(text.length) + " characters", onclick: function (e) {
      e.stopPropagation(); pre.textContent = text; e.target.remove();
    } }));
    return box;
  }
  function renderMessages(messages, depth, openDepth) {
    var box = el("div", { cls: "messages" });
    var show = function (m) { box.appendChild(messageNode(m, depth, openDepth)); };
    if (messages.length <= 40) messages.forEach(show);
    else {
      messages.slice(0, 10).forEach(show);
      var hidden = messages.slice(10, messages.length - 10);
      var more = el("button", { cls: "more", text: "show " + hidden.length + " more messages", onclick: function (e) {
        e.stopPropagation();
        var frag = document.createDocumentFragment();
        hidden.forEach(function (m) { frag.appendChild(messageNode(m, depth, openDepth)); });
        box.replaceChild(frag, more);
      } });
      box.appendChild(more);
      messages.slice(messages.length - 10).forEach(show);
    }
    return box;
  }
  function messageNode(m, depth, openDepth) {
    if (typeof m === "string") return el("div", { cls: "muted", text: m });
    var who = m.role + (m.name ? " (" + m.name + ")" : "") + (m.tool_call_id ? " → " + m.tool_call_id : "");
    var node = el("div", { cls: "msg role-" + String(m.role).replace(/[^a-z_-]/gi, "") }, [el("div", { cls: "who", text: who })]);
    var content = m.content;
    if (typeof content === "string") node.appendChild(contentText(content));
    else if (Array.isArray(content)) content.forEach(function (part) {
      node.appendChild(part && typeof part.text === "string" ? contentText(part.text) : renderValue(part, depth + 1, openDepth));
    });
    else if (content !== undefined && content !== null) node.appendChild(renderValue(content, depth + 1, openDepth));
    (m.tool_calls || []).forEach(function (call) {
      var fn = (call && call.function) || call || {};
      var args = typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments);
      node.appendChild(el("pre", { cls: "tool-call", text: "→ " + (fn.name || "tool") + "(" + (args || "") + ")" }));
    });
    var rest = {};
    Object.keys(m).forEach(function (k) { if (["role", "content", "name", "tool_calls", "tool_call_id"].indexOf(k) < 0) rest[k] = m[k]; });
    if (Object.keys(rest).length) node.appendChild(renderValue(rest, depth + 1, 0));
    return node;
  }
  function contentText(text) {
    if (text.length <= 1500) return el("pre", { cls: "content", text: text });
    return longText(text, 1500);
  }

  // ---------- several runs ----------
  function renderComparison(root) {
    root.appendChild(el("h2", { text: "Runs side by side" }));
    var statuses = [];
    RUNS.forEach(function (r) { Object.keys(r.summary.statuses).forEach(function (s) { if (statuses.indexOf(s) < 0) statuses.push(s); }); });
    var head = ["run", "repetitions", "scored", "passed", "pass rate", "95% CI", ""].concat(statuses, ["LLM calls", "retries", "wall time", "max in flight / limit"]);
    var table = el("table", { cls: "compare", id: "compare-table" }, [el("tr", null, head.map(function (h) { return el("th", { text: h }); }))]);
    RUNS.forEach(function (r, i) {
      var s = r.summary, seg = r.events.runs[r.events.runs.length - 1];
      var cells = [
        el("td", null, [el("a", { href: "#run=" + i, text: r.label })]),
        el("td", { cls: "num", text: num(s.repetitions) }),
        el("td", { cls: "num", text: num(s.scored) }),
        el("td", { cls: "num", text: s.scored ? (+s.passed.toFixed(3)) + " / " + s.scored : "-" }),
        el("td", { cls: "num", text: pct(s.pass_rate) }),
        el("td", { cls: "num", text: s.pass_rate_ci95 ? pct(s.pass_rate_ci95[0]) + " – " + pct(s.pass_rate_ci95[1]) : "-" }),
        el("td", null, [ciBar(s.pass_rate_ci95, s.pass_rate, 160)]),
      ];
      statuses.forEach(function (st) { cells.push(el("td", { cls: "num", text: num(s.statuses[st] || 0) })); });
      cells.push(el("td", { cls: "num", text: num(s.llm_calls) }), el("td", { cls: "num", text: num(s.retries) }), el("td", { cls: "num", text: secs(s.wall_s) }));
      cells.push(el("td", { cls: "num", text: seg ? seg.stats.max_in_flight + " / " + (seg.limit === null ? "?" : seg.limit) : "no events" }));
      table.appendChild(el("tr", null, cells));
    });
    root.appendChild(table);
    DATA.comparisons.forEach(function (c, k) { renderPaired(root, c, k + 1); });
  }

  function renderPaired(root, c, index) {
    root.appendChild(el("h2", { text: c.label_b + " against " + c.label_a + " (paired by task and repeat)" }));
    if (!c.n_pairs) {
      root.appendChild(el("p", { cls: "note", text: "No repetition is scored in both runs: nothing to pair." }));
    } else {
      var diff = c.difference, cls = diff > 0 ? "up" : diff < 0 ? "down" : "";
      var signed = function (x) { return (x > 0 ? "+" : "") + (100 * x).toFixed(1) + " pts"; };
      root.appendChild(el("div", { cls: "cards" }, [
        el("div", { cls: "card paired" }, [
          el("div", { cls: "muted", text: "difference in mean score, B − A" }),
          el("div", { cls: "big " + cls, text: signed(diff) }),
          el("div", { text: "95% CI " + signed(c.difference_ci95[0]) + " to " + signed(c.difference_ci95[1]) + " (" + c.interval_method + ")" }),
          el("div", { text: "over " + num(c.n_pairs) + " pairs scored in both: " + pct(c.mean_a) + " → " + pct(c.mean_b) }),
        ]),
        el("div", { cls: "card" }, [kvTable([
          ["improved (failed in A, passed in B)", num(c.improved_count)],
          ["regressed (passed in A, failed in B)", num(c.regressed_count)],
          ["both passed / both failed", num(c.both_passed) + " / " + num(c.both_failed)],
          ["McNemar exact p / mid-p", c.mcnemar_p.toPrecision(3) + " / " + c.mcnemar_mid_p.toPrecision(3)],
        ])]),
      ]));
    }
    root.appendChild(kvTable([
      ["only in " + c.label_a, num(c.only_in_a_count)],
      ["only in " + c.label_b, num(c.only_in_b_count)],
      ["scored in A only / B only / neither", num(c.scored_in_a_only_count) + " / " + num(c.scored_in_b_only_count) + " / " + num(c.scored_in_neither_count)],
    ]));
    [
      ["regressed", "Regressed", index], ["improved", "Improved", index],
      ["only_in_a", "Only in " + c.label_a, 0], ["only_in_b", "Only in " + c.label_b, index],
      ["scored_in_a_only", "Scored in " + c.label_a + " only", index], ["scored_in_b_only", "Scored in " + c.label_b + " only", 0],
    ].forEach(function (spec) {
      var pairs = c[spec[0]], total = c[spec[0] + "_count"];
      if (!total) return;
      var box = el("details", null, [el("summary", { text: spec[1] + ": " + num(total) + (total > pairs.length ? " (first " + pairs.length + " listed)" : "") })]);
      var list = el("div", { cls: "chips" });
      pairs.forEach(function (pair) {
        var hash = "#run=" + spec[2] + "&task=" + encodeURIComponent(pair.task_id) + "&rep=" + encodeURIComponent(pair.repeat_idx);
        list.appendChild(el("a", { cls: "chip", href: hash, text: pair.task_id + " #" + pair.repeat_idx }));
      });
      box.appendChild(list);
      root.appendChild(box);
    });
  }

  // ---------- start ----------
  function start() {
    readHash();
    render();
    if (state.row !== null) {
      var open = document.querySelector("tr.row.open");
      if (open && open.scrollIntoView) open.scrollIntoView({ block: "center" });
    }
  }
  window.addEventListener("hashchange", start);
  start();
  document.documentElement.setAttribute("data-rendered-ms", String(Math.round(performance.now())));
})();
