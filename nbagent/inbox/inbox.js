// nbagent approvals inbox, rendered by anywidget.
//
// The kernel sends plain values (rows, decided, tools, servers, query, preview,
// state, summary, error, stale); everything a model or a tool produced is text here and
// goes into the DOM through textContent / value only, never innerHTML.
// The selection is local (a set of "chat_id/call_id" keys, kept to the rows
// shown). Buttons set the `action` trait once (then wait for `state` to come
// back to "idle"); the filter controls set `query`.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(label, cls, onClick, title) {
  const b = h("button", "nba-btn " + (cls || ""), label);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    onClick();
  });
  return b;
}

function ageWords(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d`;
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

let counter = 0;

function render({ model, el }) {
  el.classList.add("nba-inbox");
  const ui = { selected: new Set(), sent: false, opened: new Set(), decidedOpen: false, offset: 0,
    clearReason: false };

  // Ages count on in the browser, on the kernel's clock (offset), without the kernel resending rows.
  function syncClock() {
    const k = Date.parse(model.get("clock") || "");
    ui.offset = Number.isNaN(k) ? 0 : k - Date.now();
  }
  function ages() {
    const now = Date.now() + ui.offset;
    for (const node of el.querySelectorAll(".nba-inbox-age[data-at]")) {
      const at = Date.parse(node.dataset.at);
      node.textContent = Number.isNaN(at) ? "" : ageWords(now - at);
    }
  }

  // ---------------------------------------------------------------- skeleton
  const head = h("div", "nba-inbox-head");
  const title = h("span", "nba-inbox-title", "Approvals inbox");
  const counts = h("span", "nba-inbox-counts");
  const sources = h("span", "nba-inbox-sources");
  const refresh = button("Refresh", "nba-inbox-refresh", () => send("refresh"),
    "Read every chat and store again");
  head.append(title, counts, sources, refresh);

  const controls = h("div", "nba-inbox-controls");
  const toolSel = h("select", "nba-inbox-tool");
  toolSel.setAttribute("aria-label", "Filter by tool");
  const serverSel = h("select", "nba-inbox-server");
  serverSel.setAttribute("aria-label", "Filter by server");
  const text = h("input", "nba-inbox-text");
  text.type = "text";
  text.placeholder = "path=/tmp/*  order_id<1030  words";
  text.setAttribute("aria-label", "Filter by argument values");
  const clear = button("Clear filter", "nba-inbox-clear", () => {
    text.value = "";
    setQuery({ tool: "", server: "", text: "" });
  });
  controls.append(h("span", "nba-inbox-label", "Filter:"), toolSel, serverSel, text, clear);
  const pyFilter = h("div", "nba-inbox-note nba-inbox-pyfilter");
  const filterProblem = h("div", "nba-inbox-error nba-inbox-filter-problem");
  filterProblem.setAttribute("role", "status");

  const actions = h("div", "nba-inbox-actions");
  const approveSel = button("Approve selected", "nba-btn-approve nba-inbox-approve",
    () => send("approve", { keys: [...ui.selected] }), "Approve the selected calls");
  const reason = h("input", "nba-action-reason nba-inbox-reason");
  reason.type = "text";
  reason.placeholder = "reason (told to the model)";
  reason.setAttribute("aria-label", "Reason for denying");
  reason.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.isComposing && !ev.shiftKey) {
      ev.preventDefault();
      ev.stopPropagation();  // not JupyterLab's shortcuts
      if (ui.selected.size) send("deny", { keys: [...ui.selected], reason: reason.value });
    }
  });
  const denySel = button("Deny selected", "nba-btn-deny nba-inbox-deny",
    () => send("deny", { keys: [...ui.selected], reason: reason.value }),
    "Deny the selected calls; the reason goes to the model");
  const approveAll = button("Approve all matching", "nba-inbox-approve-all",
    () => send("preview", { verb: "approve" }),
    "Preview every call the filter matches, then confirm");
  const denyAll = button("Deny all matching", "nba-inbox-deny-all",
    () => send("preview", { verb: "deny", reason: reason.value }),
    "Preview every call the filter matches, then confirm (with the reason above)");
  actions.append(approveSel, denySel, reason, h("span", "nba-inbox-sep"), approveAll, denyAll);

  const previewBox = h("div", "nba-inbox-preview");
  const stale = h("div", "nba-inbox-stale");
  stale.setAttribute("role", "status");
  const summary = h("div", "nba-action-summary nba-inbox-summary");
  const error = h("div", "nba-action-error nba-inbox-error");
  const table = h("div", "nba-inbox-rows");
  const decidedBox = h("details", "nba-inbox-decided");
  decidedBox.addEventListener("toggle", () => { ui.decidedOpen = decidedBox.open; });
  el.append(head, stale, controls, filterProblem, pyFilter, actions, previewBox, summary, error, table,
    decidedBox);

  // ----------------------------------------------------------------- talking
  function send(kind, extra) {
    if (ui.sent || model.get("state") === "working") return;
    ui.sent = true;
    // a deny (or a confirmed preview) uses the reason up: clear it once the kernel answers
    ui.clearReason = kind === "deny" || kind === "confirm";
    for (const b of el.querySelectorAll(".nba-inbox-actions button, .nba-inbox-preview button, .nba-inbox-refresh")) b.disabled = true;
    el.classList.add("nba-busy");
    counter += 1;
    model.set("action", Object.assign(
      { kind, keys: [], reason: "", verb: "", token: "",
        nonce: `${Date.now()}-${counter}-${Math.random()}` }, extra || {}));
    model.save_changes();
  }

  function setQuery(q) {
    model.set("query", Object.assign({}, model.get("query"), q));
    model.save_changes();
  }

  let typing = null;
  text.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => setQuery({ text: text.value }), 300);
  });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.isComposing) {
      ev.preventDefault();
      ev.stopPropagation();
      clearTimeout(typing);
      setQuery({ text: text.value });
    }
  });
  toolSel.addEventListener("change", () => setQuery({ tool: toolSel.value }));
  serverSel.addEventListener("change", () => setQuery({ server: serverSel.value }));

  function fillSelect(sel, values, current, any) {
    const all = values.slice();
    if (current && !all.includes(current)) all.push(current);
    const wanted = ["", ...all].join("\u0000");
    if (sel.dataset.options !== wanted) {
      sel.replaceChildren(h("option", "", any));
      sel.firstChild.value = "";
      for (const v of all) {
        const o = h("option", "", v);
        o.value = v;
        sel.append(o);
      }
      sel.dataset.options = wanted;
    }
    sel.value = current || "";
  }

  // ------------------------------------------------------------------ drawing
  function argsCell(args) {
    const cell = h("div", "nba-inbox-args");
    for (const a of args) {
      const line = h("div", "nba-inbox-arg");
      line.append(h("span", "nba-inbox-argkey", a.key), h("span", "nba-inbox-eq", "="));
      if (a.full) {
        const d = h("details", "nba-inbox-fold");
        d.append(h("summary", "nba-inbox-argval", a.short), h("pre", "nba-inbox-full", a.full));
        line.append(d);
      } else {
        line.append(h("span", "nba-inbox-argval", a.short));
      }
      cell.append(line);
    }
    if (!args.length) cell.append(h("span", "nba-inbox-note", "(no arguments)"));
    return cell;
  }

  function drawRows(rows) {
    // Keep what the reader unfolded across redraws.
    ui.opened = new Set(Array.from(table.querySelectorAll(".nba-inbox-row"))
      .filter((r) => Array.from(r.querySelectorAll("details")).some((d) => d.open))
      .map((r) => r.dataset.key));
    table.replaceChildren();
    const shown = rows.filter((r) => r.match);
    const keys = new Set(shown.map((r) => r.key));
    for (const k of [...ui.selected]) if (!keys.has(k)) ui.selected.delete(k);
    if (!shown.length) {
      table.append(h("div", "nba-inbox-empty",
        rows.length ? "No pending call matches the filter." : "Nothing waits for a decision."));
      return;
    }
    const header = h("div", "nba-inbox-row nba-inbox-header");
    const all = h("input", "nba-inbox-check-all");
    all.type = "checkbox";
    all.setAttribute("aria-label", "Select every call shown");
    all.checked = shown.every((r) => ui.selected.has(r.key));
    all.addEventListener("change", () => {
      for (const r of shown) { if (all.checked) ui.selected.add(r.key); else ui.selected.delete(r.key); }
      draw();
    });
    const servers = shown.some((r) => r.server);
    const whys = new Set(shown.map((r) => r.reason + (r.hosted ? " (the provider runs it)" : "")));
    const oneWhy = whys.size === 1;
    table.classList.toggle("nba-inbox-noserver", !servers);
    table.classList.toggle("nba-inbox-onewhy", oneWhy);
    const cols = ["chat", servers ? "server" : null, "tool", "arguments", oneWhy ? null : "why gated", "age"];
    header.append(all, ...cols.filter((c) => c).map((c) => h("span", "nba-inbox-col", c)));
    if (oneWhy && [...whys][0]) {
      table.append(h("div", "nba-inbox-note nba-inbox-whyall", `Why gated (every call shown): ${[...whys][0]}`));
    }
    table.append(header);
    for (const r of shown) {
      const row = h("div", "nba-inbox-row");
      row.dataset.key = r.key;
      row.dataset.tool = r.tool;
      const check = h("input", "nba-inbox-check");
      check.type = "checkbox";
      check.checked = ui.selected.has(r.key);
      check.setAttribute("aria-label", `Select ${r.tool} in chat ${r.chat}`);
      check.addEventListener("change", () => {
        if (check.checked) ui.selected.add(r.key); else ui.selected.delete(r.key);
        draw();
      });
      const chat = h("span", "nba-inbox-chat", r.chat);
      chat.title = `chat ${r.chat_id}, call ${r.call_id}` + (r.source === "store" ? " (stored)" : "");
      const server = h("span", r.server ? "nba-inbox-chip" : "nba-inbox-none", r.server || "-");
      const tool = h("code", "nba-inbox-toolname", r.tool);
      const args = argsCell(r.args);
      const why = h("span", "nba-inbox-why", r.reason + (r.hosted ? " (the provider runs it)" : ""));
      const age = h("span", "nba-inbox-age");
      age.title = r.requested_at;
      if (r.requested_at) age.dataset.at = r.requested_at;
      row.append(...[check, chat, servers ? server : null, tool, args, oneWhy ? null : why, age]
        .filter((n) => n));
      if (ui.opened.has(r.key)) for (const d of row.querySelectorAll("details")) d.open = true;
      table.append(row);
    }
  }

  function drawPreview(p, working) {
    previewBox.replaceChildren();
    if (!p || !p.token) { previewBox.classList.add("nba-hidden"); return; }
    previewBox.classList.remove("nba-hidden");
    const verb = p.verb === "deny" ? "Deny" : "Approve";
    previewBox.append(h("div", "nba-inbox-preview-title",
      `${verb} all matching: ${plural(p.count, "call")} (filter: ${p.filter})`));
    if (p.verb === "deny" && p.reason) previewBox.append(h("div", "nba-inbox-note", `reason: ${p.reason}`));
    const list = h("ol", "nba-inbox-preview-list");
    for (const c of p.calls) {
      const li = h("li", "nba-inbox-preview-call");
      li.append(h("span", "nba-inbox-chat", c.chat), h("code", "", c.line));
      list.append(li);
    }
    previewBox.append(list);
    const row = h("div", "nba-action-row");
    const ok = button(`Confirm: ${verb.toLowerCase()} ${plural(p.count, "call")}`,
      p.verb === "deny" ? "nba-btn-deny nba-inbox-confirm" : "nba-btn-approve nba-inbox-confirm",
      () => send("confirm", { token: p.token }), "Decide exactly the calls listed above");
    ok.disabled = working || p.count === 0;
    const cancel = button("Cancel", "nba-inbox-cancel", () => send("cancel"));
    cancel.disabled = working;
    row.append(ok, cancel);
    previewBox.append(row);
  }

  function drawDecided(decided) {
    decidedBox.replaceChildren();
    if (!decided.length) { decidedBox.classList.add("nba-hidden"); return; }
    decidedBox.classList.remove("nba-hidden");
    decidedBox.append(h("summary", "nba-inbox-decided-title", `Decided (${decided.length})`));
    for (const d of decided) {
      const line = h("div", "nba-inbox-decided-row");
      line.dataset.key = d.key;
      line.dataset.outcome = d.outcome;
      line.append(h("span", "nba-inbox-chat", d.chat), h("code", "", d.line),
        h("span", "nba-inbox-words", d.words));
      decidedBox.append(line);
    }
    decidedBox.open = ui.decidedOpen;
  }

  function draw() {
    const state = model.get("state");
    const working = state === "working";
    if (!working) {
      ui.sent = false;
      el.classList.remove("nba-busy");
      if (ui.clearReason && !model.get("error")) reason.value = "";
      if (ui.clearReason) ui.clearReason = false;
    }
    el.dataset.state = state;
    const rows = model.get("rows") || [];
    const matching = rows.filter((r) => r.match).length;
    counts.textContent = `${plural(rows.length, "pending call")}` +
      (matching !== rows.length ? `, ${matching} matching` : "");
    sources.textContent = model.get("sources") ? `from ${model.get("sources")}` : "";
    const q = model.get("query") || {};
    fillSelect(toolSel, model.get("tools") || [], q.tool, "any tool");
    fillSelect(serverSel, model.get("servers") || [], q.server, "any server");
    if (document.activeElement !== text) text.value = q.text || "";
    pyFilter.textContent = model.get("python_filter") ? `Filter: ${model.get("python_filter")}` : "";
    filterProblem.textContent = model.get("filter_problem") || "";
    drawRows(rows);
    const n = ui.selected.size;
    approveSel.textContent = `Approve selected (${n})`;
    denySel.textContent = `Deny selected (${n})`;
    approveAll.textContent = `Approve all matching (${matching})\u2026`;
    denyAll.textContent = `Deny all matching (${matching})\u2026`;
    approveSel.disabled = denySel.disabled = working || n === 0;
    approveAll.disabled = denyAll.disabled = working || matching === 0;
    refresh.disabled = working;
    drawPreview(model.get("preview"), working);
    summary.textContent = model.get("summary") || "";
    error.textContent = model.get("error") || "";
    stale.textContent = model.get("stale") || "";
    el.classList.toggle("nba-inbox-is-stale", Boolean(model.get("stale")));
    drawDecided(model.get("decided") || []);
    ages();
  }

  const names = ["rows", "decided", "tools", "servers", "query", "python_filter", "filter_problem", "sources",
    "preview", "state", "summary", "error", "stale"];
  const redraw = () => draw();
  for (const name of names) model.on(`change:${name}`, redraw);
  const onClock = () => { syncClock(); ages(); };
  model.on("change:clock", onClock);
  syncClock();
  draw();
  const timer = setInterval(ages, 5000);
  // Ask the kernel for its clock now (the one in the model may be old: a reloaded page).
  try { model.send({ event: "rendered" }); } catch (e) { /* a static page has no kernel */ }
  return () => {
    clearInterval(timer);
    model.off("change:clock", onClock);
    for (const name of names) model.off(`change:${name}`, redraw);
  };
}

export default { render };
