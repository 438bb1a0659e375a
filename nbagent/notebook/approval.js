// nbagent action cards (a gated call's decision card, Approve all / Deny all, step
// budget), rendered by anywidget.
//
// An approval card shows the call's card as the kernel rendered it (the `value`
// trait: HTML built by nbagent/notebook/_cards.py, where everything a model or
// a tool produced is escaped, the same HTML every other entry of the view
// shows) and draws its buttons into that card's `.nba-controls` slot.
// Everything this file adds itself goes into the DOM through textContent /
// value, never innerHTML. The first click disables every control of the card at
// once, then sets the `action` trait (with a fresh nonce) for the kernel; the
// kernel answers by changing `state` (and `error` when it refused).

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function button(label, cls, onClick, title) {
  const b = h("button", "nba-btn " + cls, label);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    onClick();
  });
  return b;
}

// A reason box: Enter submits (`onEnter`), as a form would.
function reasonBox(ui, placeholder, label, onEnter) {
  const box = h("input", "nba-action-reason");
  box.type = "text";
  box.placeholder = placeholder;
  box.value = ui.reason;
  box.setAttribute("aria-label", label);
  box.addEventListener("input", () => { ui.reason = box.value; });
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.isComposing && !ev.shiftKey) {
      ev.preventDefault();
      ev.stopPropagation();  // not JupyterLab's Shift+Enter / Enter shortcuts
      onEnter(box.value);
    }
  });
  return box;
}

const TRAITS = ["state", "error", "summary", "note", "value", "arguments", "editable", "reason",
  "tool", "steps", "budget", "increment", "kind", "count", "revocable", "hosted"];

let counter = 0;

function render({ model, el }) {
  el.classList.add("nba-action");
  // Local UI state survives redraws (an error must not wipe what was typed).
  const ui = { editing: false, editText: null, reason: "", clicked: false, jsonError: "" };

  function send(kind, extra) {
    if (ui.clicked) return;
    ui.clicked = true;
    for (const node of el.querySelectorAll("button, input, textarea")) node.disabled = true;
    el.classList.add("nba-busy");
    counter += 1;
    model.set("action", Object.assign(
      { kind, reason: "", arguments: "", nonce: `${Date.now()}-${counter}-${Math.random()}` },
      extra || {}));
    model.save_changes();
  }

  function approvalControls(state, slot) {
    const tool = model.get("tool");
    if (ui.editing && model.get("editable")) {
      const box = h("div", "nba-action-edit");
      const area = h("textarea", "nba-action-json");
      area.value = ui.editText !== null ? ui.editText : model.get("arguments");
      area.rows = Math.min(12, Math.max(3, area.value.split("\n").length));
      area.spellcheck = false;
      area.setAttribute("aria-label", "Edited arguments (JSON)");
      const note = h("div", "nba-action-error", ui.jsonError);
      area.addEventListener("input", () => {
        ui.editText = area.value;
        try {
          const v = JSON.parse(area.value);
          ui.jsonError = (v && typeof v === "object" && !Array.isArray(v)) ? "" : "Arguments must be a JSON object.";
        } catch (e) {
          ui.jsonError = "Not valid JSON: " + e.message;
        }
        note.textContent = ui.jsonError;
        ok.disabled = !!ui.jsonError;
      });
      const row = h("div", "nba-action-row");
      const ok = button("Approve with these arguments", "nba-btn-approve", () => {
        if (ui.jsonError) return;
        send("edit", { arguments: area.value });
      });
      ok.disabled = !!ui.jsonError || state === "working";
      const cancel = button("Cancel", "", () => { ui.editing = false; ui.jsonError = ""; draw(); });
      cancel.disabled = state === "working";
      row.append(ok, cancel);
      box.append(area, note, row);
      slot.append(box);
      return;
    }
    const row = h("div", "nba-action-row");
    const hosted = model.get("hosted");
    const approve = button("Approve", "nba-btn-approve", () => send("approve"),
      hosted ? "Send the approval to the provider, which runs this call" : "Run this call");
    const reason = reasonBox(ui, "reason (optional)", "Reason for denying (Enter denies)",
      (text) => send("deny", { reason: text }));
    const deny = button("Deny", "nba-btn-deny", () => send("deny", { reason: reason.value }),
      "Do not run this call; the model is told why (Enter in the reason box does the same)");
    const editable = model.get("editable");
    const edit = button("Edit arguments", "", () => { ui.editing = true; draw(); },
      editable ? "Change the arguments, then approve"
        : "These arguments are too large to edit here; use chat.approve(call, arguments=...)");
    edit.disabled = !editable;
    const always = button("Always allow", "", () => send("always"),
      `Approve this and every later call of ${tool} (you can take it back)`);
    if (hosted) row.append(approve, deny, reason, always);  // the provider's call: no editing
    else row.append(approve, deny, reason, edit, always);
    if (state === "working") for (const n of row.querySelectorAll("button, input")) n.disabled = true;
    slot.append(row);
    if (!editable && !hosted) {
      slot.append(h("div", "nba-action-note",
        "The arguments are too large to edit here (the card shows their start); " +
        "use chat.approve(call, arguments=...) to run it with other arguments."));
    }
  }

  function drawApproval(state) {
    const html = model.get("value");
    const active = state === "pending" || state === "working";
    let slot = el;
    if (html) {
      const body = h("div", "nba-card-html");
      body.innerHTML = html;  // the kernel's escaped card (see the top of this file)
      el.append(body);
      slot = body.querySelector(".nba-controls") || el;
    } else {
      const head = h("div", "nba-action-head");
      head.append(h("span", "nba-action-title", active ? "Approval needed: " : "Decided: "));
      head.append(h("code", "nba-action-tool", model.get("tool")));
      el.append(head);
    }
    if (active) {
      approvalControls(state, slot);
      if (state === "working") slot.append(h("div", "nba-action-note", "working\u2026"));
    } else if (model.get("revocable")) {
      const tool = model.get("tool");
      const row = h("div", "nba-action-row");
      row.append(button(`Stop always allowing ${tool}`, "", () => send("revoke"),
        `Calls of ${tool} ask for approval again from now on (decisions already made stand)`));
      slot.append(row);
    } else if (!html && model.get("summary")) {
      el.append(h("div", "nba-action-summary", model.get("summary")));
    }
    const note = model.get("note");
    if (note) el.append(h("div", "nba-action-note", note));
  }

  function drawBatch(state) {
    if (state !== "pending" && state !== "working") {
      const summary = model.get("summary");
      if (summary) el.append(h("div", "nba-action-summary", summary));
      return;
    }
    const n = model.get("count");
    const head = h("div", "nba-action-head");
    head.append(h("span", "nba-action-icon", "\u26A0"));
    head.append(h("span", "nba-action-title", `${n} calls in this response need approval`));
    el.append(head);
    const row = h("div", "nba-action-row");
    const all = button(`Approve all (${n})`, "nba-btn-approve", () => send("approve_all"),
      "Approve every call below that still waits (each decision is recorded)");
    const reason = reasonBox(ui, "reason (optional)", "Reason for denying all (Enter denies all)",
      (text) => send("deny_all", { reason: text }));
    const none = button("Deny all", "nba-btn-deny", () => send("deny_all", { reason: reason.value }),
      "Deny every call below that still waits; the reason goes with each");
    row.append(all, none, reason);
    if (state === "working") for (const n2 of row.querySelectorAll("button, input")) n2.disabled = true;
    el.append(row);
  }

  function drawBudget(state) {
    const head = h("div", "nba-action-head");
    // U+2016 (a pause sign drawn as two bars): in DejaVu and every common UI font; U+23F8 is not.
    head.append(h("span", "nba-action-icon", state === "pending" || state === "working" ? "\u2016" : "\u2714"));
    const names = { steps: "Step", cost: "Cost", tokens: "Token" };
    head.append(h("span", "nba-action-title", `${names[model.get("budget")] || "Step"} budget exhausted.`));
    el.append(head);
    if (state !== "pending" && state !== "working") {
      // Settled: one line in the transcript ("Step budget exhausted. Continued (+2 steps).").
      const summary = model.get("summary");
      if (summary) head.append(h("span", "nba-action-summary", summary));
      return;
    }
    const row = h("div", "nba-action-row");
    const n = model.get("steps");
    const increment = model.get("increment") || `+${n} step${n === 1 ? "" : "s"}`;
    const more = button(`Continue (${increment})`, "nba-btn-approve", () => send("continue"));
    if (model.get("budget") === "steps") {
      more.title = "A step is one model request or one round of tool calls, as max_steps counts them";
    }
    const stop = button("Stop", "", () => send("stop"));
    row.append(more, stop);
    if (state === "working") for (const n of row.querySelectorAll("button")) n.disabled = true;
    el.append(row);
  }

  function draw() {
    const state = model.get("state");
    const kind = model.get("kind");
    if (state !== "working") { ui.clicked = false; el.classList.remove("nba-busy"); }
    // Keep what the reader opened and where they were typing across the redraw.
    const opened = Array.from(el.querySelectorAll("details"), (d) => d.open);
    const focused = el.contains(document.activeElement) ? document.activeElement.className : "";
    el.replaceChildren();
    el.dataset.state = state;
    el.dataset.kind = kind;
    const empty = !model.get("summary") && !(kind === "approval" && model.get("value"));
    if (state === "closed" && empty) { el.classList.add("nba-hidden"); return; }
    el.classList.remove("nba-hidden");
    if (kind === "budget") drawBudget(state);
    else if (kind === "batch") drawBatch(state);
    else drawApproval(state);
    const error = model.get("error");
    if (error) el.append(h("div", "nba-action-error", error));
    const details = el.querySelectorAll("details");
    if (details.length === opened.length) details.forEach((d, i) => { d.open = opened[i]; });
    if (focused) {
      const again = el.querySelector(`.${focused.split(" ").filter(Boolean).join(".")}`);
      if (again && !again.disabled && again.focus) again.focus();
    }
  }

  const redraw = () => draw();
  for (const name of TRAITS) model.on(`change:${name}`, redraw);
  draw();
  try { model.send({ event: "rendered" }); } catch (e) { /* a static page has no kernel */ }
  return () => { for (const name of TRAITS) model.off(`change:${name}`, redraw); };
}

export default { render };
