  // ---------- events: what logs check says, and the charts ----------
  function renderEvents(root, run) {
    var ev = run.events;
    if (!ev.present) {
      root.appendChild(el("p", { cls: "note", id: "no-events", text: "No events.jsonl next to results.jsonl (" + ev.path + "), so no chart of calls in flight: the run's events went elsewhere (LOG_FILE) or the file was removed." }));
      return;
    }
    var head = num(ev.check.events) + " events read";
    if (ev.damaged_lines) head += "; " + num(ev.damaged_lines) + " damaged lines skipped (asynceval logs check refuses such a file)";
    root.appendChild(el("p", { cls: "muted", text: head + "." }));
    root.appendChild(el("p", { cls: "stats", id: "log-check" }, [el("b", { text: "asynceval logs check: " + verdict(ev.check) })]));
    var total = ev.wait_histogram.counts.reduce(function (a, b) { return a + b; }, 0), withCalls = -1;
    ev.runs.forEach(function (seg, i) { if (seg.stats.calls) withCalls = i; });
    // Beside the queue waits of the last run in the log that made calls (not merely the last run).
    var waits = total ? el("div", { cls: "chart-col histogram-col" }, [
      el("div", { cls: "chart-wrap" }, [histogram(ev.wait_histogram)]),
      el("div", { cls: "legend" }, [legend("#7fa3e6", "queue wait before a slot, all " + num(total) + " acquisitions with a wait on record" + (ev.runs.length > 1 ? ", every run in the log" : ""))]),
    ]) : null;
    ev.runs.forEach(function (seg, i) {
      if (ev.runs.length > 1) root.appendChild(el("h3", { text: "Run " + (i + 1) + " of " + ev.runs.length + " in the log" + (seg.started_at ? ", started " + seg.started_at : "") + (seg.header !== null ? " (results header " + (seg.header + 1) + ")" : "") }));
      renderSegment(root, seg, i === withCalls ? waits : null);
    });
  }

  // The log's verdict in the words of `asynceval logs check` (its figures: the same replay).
  function verdict(check) {
    if (!check.checkable) return "CANNOT CHECK: no call events in this log (calls made outside the funnel, a log filtered above INFO, or runs with nothing to do)";
    var limit = check.limit === null ? "limit unknown" : "limit " + check.limit;
    var text = (check.ok ? "OK" : "VIOLATED") + ": max in flight " + check.max_in_flight + " (" + limit + ": " + (check.limit_held ? "held" : "EXCEEDED") + ")";
    return text + ", " + check.unresolved_429 + " unresolved 429s, " + num(check.calls) + " calls";
  }

  function noCallsNote(st) {
    if (st.finished && !st.repetitions) {
      return "This run in the log ran no repetition" + (st.skipped_as_done ? " (" + num(st.skipped_as_done) + " already done were skipped, as a resume does)" : "") + ": it made no LLM call, so there is nothing to chart.";
    }
    if (!st.repetitions) return "This run's log ends before any repetition finished or any LLM call was made (stopped or killed early?): nothing to chart.";
    return "This run's " + num(st.repetitions) + " repetitions made no LLM call through asynceval's funnel (no acquired or released event): their calls went around it (an SDK or framework with its own HTTP client), or the log was filtered above INFO.";
  }

  // One run of the log: its figures (its replay's, as logs check counts), calls in flight, queue waits.
  function renderSegment(root, seg, side) {
    var st = seg.stats;
    if (!st.calls) {
      root.appendChild(el("p", { cls: "note no-calls", text: noCallsNote(st) }));
      return;
    }
    var retries = Object.keys(st.retries_by_status).map(function (k) {
      return (k === "None" || k === "null" ? "no status (timeout, connection)" : k) + ": " + st.retries_by_status[k];
    }).join(", ");
    var limitText = seg.limit !== null ? "limit " + seg.limit + (st.max_in_flight <= seg.limit ? " (held)" : " (EXCEEDED)")
      : "limit unknown to the log" + (seg.header_limit !== null ? " (the results header says " + seg.header_limit + ": asynceval logs check --limit " + seg.header_limit + " checks against it)" : "");
    root.appendChild(el("p", { cls: "stats" }, [
      num(st.events) + " events, " + num(st.calls) + " calls over " + secs(st.duration_s) + (seg.cluster ? " (a cluster run: replayed in time order)" : "") + " · max in flight " + st.max_in_flight + ", " + limitText +
      " · queue wait p50 " + secs(st.wait_p50_s) + ", p95 " + secs(st.wait_p95_s) + ", max " + secs(st.wait_max_s) +
      " · slot held p50 " + secs(st.held_p50_s) + ", p95 " + secs(st.held_p95_s) +
      " · retries " + st.retries + (retries ? " (" + retries + ")" : "") + " · unresolved 429s " + st.unresolved_429 + " · timeouts " + st.timeouts +
      " · failed calls " + st.failed_calls +
      (st.limit_changes ? " · adaptive limit: " + st.limit_changes + " changes, lowest " + st.lowest_endpoint_limit + (st.adaptive_held ? "" : " (above the cap, or a changed cap: EXCEEDED)") : "") +
      (st.still_in_flight ? " · " + st.still_in_flight + " calls never released (run killed?)" : "") +
      (st.untimed ? " · " + num(st.untimed) + " events without a usable timestamp (counted; charted at the last known time)" : ""),
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
      side || el("div", { cls: "chart-col histogram-col" }),
    ]));
  }
  function legend(colour, text) { return el("span", { style: "--c: " + colour, text: text }); }

  var ML = 50, MR = 30; // chart margins (MR: room for half the last time label); each chart has its own width W
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
    // The log's limit; else the results header's, labelled as such.
    var limit = seg.limit !== null ? seg.limit : seg.header_limit, limitLabel = "limit " + limit + (seg.limit !== null ? "" : " (results header)");
    var yMax = Math.ceil(niceCeil(Math.max(limit || 0, maxOf(seg.max_in_flight), adaptiveMax, 1) * 1.1));
    var x = function (i) { return ML + (i / n) * pw; };
    var y = function (v) { return top + ph - (v / yMax) * ph; };
    var svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, "class": "chart inflight-chart", role: "img", "aria-label": "calls in flight over time against the limit" });
    yAxis(svg, top, ph, yMax, function (v) { return String(v); }, W, true);
    var mean = "M" + x(0) + " " + y(0) + stepPath(seg.mean_in_flight, x, y).replace(/^M[^V]*/, function (m) { return "L" + m.slice(1); }) + "V" + y(0) + "Z";
    svg.appendChild(svgEl("path", { "class": "inflight-mean", d: mean }));
    svg.appendChild(svgEl("path", { "class": "inflight-max", d: stepPath(seg.max_in_flight, x, y) }));
    if (seg.adaptive_limit) svg.appendChild(svgEl("path", { "class": "adaptive-limit", d: stepPath(seg.adaptive_limit, x, y) }));
    if (limit !== null) {
      svg.appendChild(svgEl("line", { "class": "limit-line", x1: ML, x2: W - MR, y1: y(limit), y2: y(limit) }));
      svg.appendChild(svgEl("text", { "class": "limit-label", x: W - MR - 4, y: y(limit) - 4, "text-anchor": "end" }, limitLabel));
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
    // mr: room right of the last bar for half of its edge's label ("500ms" is about 32 wide).
    var Wh = 440, H = 190, ml = 40, mr = 24, top = 14, ph = 140, edges = hist.edges, counts = hist.counts;
    var last = counts.length - 1;
    while (last > 0 && !counts[last]) last--;
    counts = counts.slice(0, Math.min(counts.length, last + 2));
    var bw = (Wh - ml - mr) / counts.length, top2 = niceCeil(maxOf(counts));
    var svg = svgEl("svg", { viewBox: "0 0 " + Wh + " " + H, "class": "chart wait-histogram", role: "img", "aria-label": "histogram of queue waits" });
    ticks(top2, 3, true).forEach(function (v) {
      var yv = top + ph - (v / top2) * ph;
      svg.appendChild(svgEl("line", { "class": "grid", x1: ml, x2: Wh - mr, y1: yv, y2: yv }));
      svg.appendChild(svgEl("text", { x: ml - 5, y: yv + 4, "text-anchor": "end" }, compact(v)));
    });
    counts.forEach(function (c, i) {
      var h = (c / top2) * ph, last = i === edges.length - 1;
      var label = last ? secsShort(edges[i]) + " or more" : secsShort(edges[i]) + " to " + secsShort(edges[i + 1]);
      var bar = svgEl("rect", { "class": "hist-bar", x: ml + i * bw + 2, width: bw - 4, y: top + ph - h, height: h });
      bar.appendChild(svgEl("title", {}, label + ": " + num(c) + " acquisitions"));
      svg.appendChild(bar);
      // Bin edges under the bars' boundaries, as on a histogram's axis.
      svg.appendChild(svgEl("text", { x: ml + i * bw, y: top + ph + 14, "text-anchor": "middle" }, secsShort(edges[i])));
      if (i === counts.length - 1) svg.appendChild(svgEl("text", { x: ml + (i + 1) * bw, y: top + ph + 14, "text-anchor": "middle" }, last ? "∞" : secsShort(edges[i + 1])));
      if (c) svg.appendChild(svgEl("text", { x: ml + (i + 0.5) * bw, y: top + ph - h - 3, "text-anchor": "middle" }, compact(c)));
    });
    return svg;
  }

