  // ---------- the table of repetitions: filters, search, sort and pages, from the URL hash ----------
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
    { key: "cost_usd", label: "cost", num: true, fmt: usd },
    { key: "attempts", label: "attempts", num: true },
    { key: "error", label: "error" },
  ];
  // USD as `asynceval report` writes it: 4 significant digits below $1, cents from $1 up.
  function usd(x) {
    if (!real(x)) return "-";
    var a = Math.abs(x), sign = x < 0 ? "-" : "";
    if (a === 0) return "$0";
    if (a >= 1) return sign + "$" + a.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    if (a < 1e-9) return sign + "$" + a.toExponential(3);
    var parts = a.toFixed(3 - Math.floor(Math.log10(a))).split(".");
    var fraction = parts[1].replace(/0+$/, "");
    while (fraction.length < 2) fraction += "0";
    return sign + "$" + parts[0] + "." + fraction;
  }
  function cell(cols, key, i) {
    if (key === "tokens") {
      var a = cols.prompt_tokens[i], b = cols.completion_tokens[i];
      return a === null && b === null ? null : (a || 0) + (b || 0);
    }
    return cols[key][i];
  }

  function currentView(index) {
    var run = RUNS[index], cols = run.columns, p = prep(index);
    var key = [index, state.status, state.reason, state.outcome, state.q, state.task, state.rep, state.sort].join("\u0001");
    if (p.viewKey === key) return p.view;
    var q = state.q.toLowerCase(), hay = q ? haystack(p, cols) : null, rows = [];
    var notSuccess = state.status === "!success";
    for (var i = 0; i < p.n; i++) {
      if (state.status && (notSuccess ? cols.status[i] === "success" : cols.status[i] !== state.status)) continue;
      if (state.reason && cols.termination_reason[i] !== state.reason) continue;
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
    if (state.row !== null && rows.indexOf(state.row) >= 0) state.page = Math.floor(rows.indexOf(state.row) / PAGE_SIZE);
    var pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    if (state.page >= pages) state.page = pages - 1;
    box.appendChild(controls(index, rows.length, pages));
    var table = el("table", { cls: "rows", id: "rows" });
    var head = el("tr");
    COLS.forEach(function (c) {
      var cls = state.sort === c.key ? "sorted-asc" : state.sort === "-" + c.key ? "sorted-desc" : "";
      var sortBy = function () {
        var next = state.sort === c.key ? "-" + c.key : state.sort === "-" + c.key ? "" : c.key;
        setState({ sort: next, page: 0 });
      };
      var sorted = cls === "sorted-asc" ? "ascending" : cls === "sorted-desc" ? "descending" : "none";
      head.appendChild(el("th", { cls: cls, title: "sort by " + c.label, tabindex: "0", "aria-sort": sorted, "data-col": c.key,
        onclick: function () { sortBy(); refocus('th[data-col="' + c.key + '"]'); },
        onkeydown: onKeys(sortBy, 'th[data-col="' + c.key + '"]') }, [c.label]));
    });
    table.appendChild(el("thead", null, [head]));
    var body = el("tbody");
    var shown = rows.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
    // One tab stop for the rows (the open one, else the first); the arrow keys move between them.
    var stop = shown.indexOf(state.row) >= 0 ? state.row : shown[0];
    shown.forEach(function (i) {
      body.appendChild(rowElement(index, cols, p, i, i === stop));
      if (state.row === i) body.appendChild(detailRow(index, i));
    });
    table.appendChild(body);
    box.appendChild(table);
    if (pages > 1) box.appendChild(controls(index, rows.length, pages, true));
  }

  function rowElement(index, cols, p, i, tabStop) {
    var tr = el("tr", { cls: "row oc-row-" + p.outcome[i] + (state.row === i ? " open" : ""), "data-row": i, "data-task": cols.task_id[i], "data-outcome": p.outcome[i],
      tabindex: tabStop ? "0" : "-1", "aria-expanded": state.row === i ? "true" : "false" });
    COLS.forEach(function (c) {
      var v = cell(cols, c.key, i), text;
      if (c.key === "tokens") text = v === null ? "-" : num(cols.prompt_tokens[i]) + " / " + num(cols.completion_tokens[i]);
      else text = v === null || v === undefined ? (c.key === "error" ? "" : "-") : c.fmt ? c.fmt(v) : c.num ? num(v) : String(v);
      var cls = c.num ? "num" : c.key === "error" ? "err" : "";
      if (c.key === "status") cls = v === "success" ? "st-success" : "st-error";
      if (c.key === "score") cls += " oc-" + p.outcome[i];
      tr.appendChild(el("td", { cls: cls, title: c.key === "error" && v ? v : null, text: text }));
    });
    var toggle = function () { setState({ row: state.row === i ? null : i }); };
    var selector = 'tr.row[data-row="' + i + '"]';
    tr.addEventListener("click", function () { toggle(); refocus(selector); });
    tr.addEventListener("keydown", onKeys(toggle, selector));
    tr.addEventListener("keydown", function (event) { moveAmongRows(tr, event); });
    return tr;
  }

  // ArrowUp / ArrowDown (Home / End: the page's first / last row) move the focus, and the rows'
  // one tab stop with it, past any open row's details.
  function moveAmongRows(tr, event) {
    var step = { ArrowDown: 1, ArrowUp: -1, Home: -Infinity, End: Infinity }[event.key];
    if (!step || event.altKey || event.ctrlKey || event.metaKey) return;
    var all = Array.prototype.slice.call(tr.parentNode.querySelectorAll("tr.row"));
    var at = all.indexOf(tr), to = Math.max(0, Math.min(all.length - 1, at + step));
    event.preventDefault();
    if (to === at) return;
    tr.setAttribute("tabindex", "-1");
    all[to].setAttribute("tabindex", "0");
    all[to].focus();
  }

  // Enter or Space on a focused row or column header does what a click does (not held down,
  // nor with Ctrl, Alt or Meta: those are the browser's); the table is drawn anew, so the focus
  // moves to the same row or header in the new one (`selector`).
  function onKeys(action, selector) {
    return function (event) {
      if (event.key !== "Enter" && event.key !== " ") return;
      if (event.repeat || event.ctrlKey || event.altKey || event.metaKey) return;
      event.preventDefault();
      action();
      refocus(selector);
    };
  }
  function refocus(selector) {
    var again = document.querySelector(selector);
    if (again) again.focus({ preventScroll: true });
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
      if (state.reason) {
        box.appendChild(el("button", { id: "reason-filter", text: "termination " + state.reason + " ✕", onclick: function () { state.reason = ""; state.page = 0; writeHash(); render(); } }));
      }
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

