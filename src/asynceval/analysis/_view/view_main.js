  // ---------- the page: a run's page, the comparison of several, and the start ----------
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
        ? el("div", null, [el("h3", { text: "Termination reason (click to filter)" }), chips(run.summary.termination_reasons, "reason")]) : null,
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
    if (run.manifest) card.appendChild(kvTable(run.manifest));
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
    run.warnings.forEach(function (t) { root.appendChild(el("p", { cls: "note warning", text: "warning: " + t })); });
    var notes = [];
    if (run.superseded) notes.push(num(run.superseded) + " earlier reports were replaced by a resumed run's re-run (the last report of a task and repeat counts)");
    if (run.summary.damaged_lines) notes.push(num(run.summary.damaged_lines) + " damaged lines of results.jsonl were skipped");
    if (run.truncated_rows) notes.push(num(run.truncated_rows) + " rows' details were cut to fit the page (a run's rows share a budget of characters per page, rows that did not pass a larger share); each says which line of results.jsonl holds it whole");
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
        el("div", { id: "pass-rate-of", text: s.pass_rate_over === "tasks"
          ? "mean over " + num(s.tasks) + " tasks (adaptive repeats: " + num(s.scored) + " scored repetitions)"
          : num(+s.passed.toFixed(3)) + " / " + num(s.scored) + " scored repetitions" }),
        el("div", { id: "pass-rate-ci", text: "95% CI " + pct(s.pass_rate_ci95[0]) + " – " + pct(s.pass_rate_ci95[1]) + " (" + (s.pass_rate_interval || "Wilson, over repetitions") + ", " + num(s.tasks) + " tasks)" }),
        ciBar(s.pass_rate_ci95, s.pass_rate, 200),
        s.add_tasks_not_repeats ? el("div", { cls: "muted", id: "add-tasks", text: "the interval is mostly between tasks: add tasks, not repeats" }) : null,
      ].filter(Boolean)));
    // Beside the pass rate: the run's cost, in the words `asynceval report` has (view.py).
    cards.appendChild(el("div", { cls: "card", id: "cost" }, [
      el("div", { cls: "muted", text: "cost" }),
      el("div", { cls: "big", text: run.cost.total }),
      kvTable(run.cost.rows),
    ]));
    if (s.reducers && s.reducers.length) {
      cards.appendChild(el("div", { cls: "card", id: "reducers" }, [
        el("div", { cls: "muted", text: "reducers, mean over tasks (95% CI)" }),
        kvTable(s.reducers.map(function (r) {
          return [r.name, r.value === null ? "no task has enough repetitions" : pct(r.value) + " (" + pct(r.ci95[0]) + " – " + pct(r.ci95[1]) + ")" + (r.too_few ? ", " + num(r.too_few) + " tasks with too few left out" : "")];
        })),
      ]));
    }
    cards.appendChild(el("div", { cls: "card" }, [kvTable([
      ["repetitions", num(s.repetitions)],
      ["errors", s.errors ? num(s.errors) + " (" + num(s.timeouts) + " of them timeouts)" : "none"],
    ].concat((s.error_kinds || []).map(function (g) {
      return ["  " + g.label, num(g.count) + ": " + g.first];
    })).concat([
      ["LLM calls / retries", num(s.llm_calls) + " / " + num(s.retries)],
      s.cache_hits ? ["answered from the cache", num(s.cache_hits) + " of the LLM calls"] : null,
      s.journal_hits ? ["replayed from the journal", num(s.journal_hits) + " of the LLM calls"] : null,
      ["tokens in / out", num(s.prompt_tokens) + " / " + num(s.completion_tokens)],
      ["task duration p50 / p95", secs(s.duration_p50_s) + " / " + secs(s.duration_p95_s)],
      ["wall time", secs(s.wall_s)],
    ]).filter(Boolean))]));
  }

  // Counts of a column's values (`key`: "status" or "reason", the hash's filter of that column);
  // a chip filters the table to its value, or clears the filter when it already does.
  function chips(counts, key) {
    var box = el("div", { cls: "chips", id: key === "status" ? "status-counts" : "termination-counts" });
    Object.keys(counts).forEach(function (name) {
      var chip = el("button", {
        cls: "chip" + (state[key] === name ? " active" : ""), "data-value": name,
        title: state[key] === name ? "show every row" : "show only " + name,
        onclick: function () {
          state[key] = state[key] === name ? "" : name;
          state.page = 0; state.row = null; writeHash(); render();
        },
      }, [el("span", { cls: key === "status" ? (name === "success" ? "st-success" : "st-error") : "", text: name }), el("b", { text: num(counts[name]) })]);
      box.appendChild(chip);
    });
    return box;
  }

  // ---------- several runs ----------
  function renderComparison(root) {
    root.appendChild(el("h2", { text: "Runs side by side" }));
    var statuses = [];
    RUNS.forEach(function (r) { Object.keys(r.summary.statuses).forEach(function (s) { if (statuses.indexOf(s) < 0) statuses.push(s); }); });
    var head = ["run", "repetitions", "scored", "passed", "pass rate", "95% CI", "", "cost"].concat(statuses, ["LLM calls", "retries", "wall time", "max in flight / limit"]);
    var table = el("table", { cls: "compare", id: "compare-table" }, [el("tr", null, head.map(function (h) { return el("th", { text: h }); }))]);
    RUNS.forEach(function (r, i) {
      var s = r.summary;
      var cells = [
        el("td", null, [el("a", { href: "#run=" + i, text: r.label })]),
        el("td", { cls: "num", text: num(s.repetitions) }),
        el("td", { cls: "num", text: num(s.scored) }),
        el("td", { cls: "num", text: s.scored ? (+s.passed.toFixed(3)) + " / " + s.scored : "-" }),
        el("td", { cls: "num", text: pct(s.pass_rate) }),
        el("td", { cls: "num", text: s.pass_rate_ci95 ? pct(s.pass_rate_ci95[0]) + " – " + pct(s.pass_rate_ci95[1]) : "-" }),
        el("td", null, [ciBar(s.pass_rate_ci95, s.pass_rate, 160)]),
        el("td", { cls: "num", title: r.cost.rows[0][1], text: r.cost.total }),
      ];
      statuses.forEach(function (st) { cells.push(el("td", { cls: "num", text: num(s.statuses[st] || 0) })); });
      cells.push(el("td", { cls: "num", text: num(s.llm_calls) }), el("td", { cls: "num", text: num(s.retries) }), el("td", { cls: "num", text: secs(s.wall_s) }));
      cells.push(el("td", { cls: "num in-flight", text: inFlightCell(r.events) }));
      table.appendChild(el("tr", null, cells));
    });
    root.appendChild(table);
    DATA.comparisons.forEach(function (c, k) { renderPaired(root, c, k + 1); });
  }

  // The most calls in flight of any run in the log against their limits, as logs check says.
  function inFlightCell(ev) {
    if (!ev.present) return "no events";
    if (!ev.check.checkable) return "no call events";
    var limits = [];
    ev.runs.forEach(function (seg) { if (seg.limit !== null && limits.indexOf(seg.limit) < 0) limits.push(seg.limit); });
    return ev.check.max_in_flight + " / " + (limits.length ? limits.join(", ") : "?") + (ev.check.limit_held ? "" : " EXCEEDED");
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
          el("div", { text: "95% CI " + signed(c.difference_ci95[0]) + " to " + signed(c.difference_ci95[1]) + " (" + c.interval_method + (c.interval_method.indexOf("bootstrap") >= 0 ? ", " + num(c.resamples) + " resamples, seed " + c.seed : "") + ")" }),
          el("div", { id: "verdict-" + index, text: c.no_difference_shown ? "no difference shown (the interval holds 0)" : "a difference shown (the interval does not hold 0)" }),
          el("div", { text: "over " + num(c.n_pairs) + " pairs in " + num(c.tasks) + " tasks scored in both: " + pct(c.mean_a) + " → " + pct(c.mean_b) }),
        ]),
        el("div", { cls: "card" }, [kvTable([
          ["improved (failed in A, passed in B)", num(c.improved_count)],
          ["regressed (passed in A, failed in B)", num(c.regressed_count)],
          ["both passed / both failed", num(c.both_passed) + " / " + num(c.both_failed)],
          ["McNemar exact p / mid-p", c.mcnemar_p === null ? "not shown (several repetitions per task)" : c.mcnemar_p.toPrecision(3) + " / " + c.mcnemar_mid_p.toPrecision(3)],
        ].concat((c.reducers || []).map(function (r) {
          return [r.name + ", B − A over tasks", r.difference === null ? "no task has enough repetitions in both" : signed(r.difference) + " (95% CI " + signed(r.ci95[0]) + " to " + signed(r.ci95[1]) + ")" + (r.no_difference_shown ? ", no difference shown" : "")];
        })))]),
      ]));
    }
    root.appendChild(el("div", { cls: "card", id: "cost-" + index }, [kvTable(c.cost_rows)]));
    root.appendChild(kvTable([
      ["only in " + c.label_a, num(c.only_in_a_count)],
      ["only in " + c.label_b, num(c.only_in_b_count)],
      ["scored in A only / B only / neither", num(c.scored_in_a_only_count) + " / " + num(c.scored_in_b_only_count) + " / " + num(c.scored_in_neither_count)],
    ]));
    [
      ["regressed", "Regressed", index], ["improved", "Improved", index],
      ["only_in_a", "Only in " + c.label_a, 0], ["only_in_b", "Only in " + c.label_b, index],
      ["scored_in_a_only", "Scored in " + c.label_a + " only", index], ["scored_in_b_only", "Scored in " + c.label_b + " only", 0],
      ["scored_in_neither", "Scored in neither", index],
    ].forEach(function (spec) {
      var pairs = c[spec[0]], total = c[spec[0] + "_count"];
      if (!total) return;
      var box = el("details", null, [el("summary", { text: spec[1] + ": " + num(total) + (total > pairs.length ? " (first " + pairs.length + " listed)" : "") })]);
      var list = el("div", { cls: "chips" });
      pairs.forEach(function (pair) {
        var row = rowOf(spec[2], pair.task_id, pair.repeat_idx); // opened, and closable: no rule re-opens it
        var hash = "#run=" + spec[2] + "&task=" + encodeURIComponent(pair.task_id) + "&rep=" + encodeURIComponent(pair.repeat_idx) + (row < 0 ? "" : "&row=" + row);
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
