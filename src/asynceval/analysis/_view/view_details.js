  // ---------- a row's details: error, eval, usage, traces (a JSON tree; messages as a chat), config ----------
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
    return el("tr", { cls: "detail", "data-row": i }, [td]);
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

