// nbagent action cards (approval and step budget), rendered by anywidget.
//
// Everything shown comes from model traits and goes into the DOM through
// textContent / value, never innerHTML, so nothing a model or tool produced
// can become markup. The first click disables every control of the card at
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

  function drawApproval(state) {
    const pending = state === "pending";
    const head = h("div", "nba-action-head");
    head.append(h("span", "nba-action-icon", pending || state === "working" ? "\u26A0" : "\u2714"));
    head.append(h("span", "nba-action-title", pending || state === "working"
      ? "Approval needed: " : "Decided: "));
    head.append(h("code", "nba-action-tool", model.get("tool")));
    const why = model.get("reason");
    if (why && (pending || state === "working")) head.append(h("span", "nba-action-why", "\u2014 " + why));
    el.append(head);

    if (!pending && state !== "working") {
      const summary = model.get("summary");
      if (summary) el.append(h("div", "nba-action-summary", summary));
      return;
    }
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
      el.append(box);
    } else {
      const row = h("div", "nba-action-row");
      const approve = button("Approve", "nba-btn-approve", () => send("approve"), "Run this call");
      const reason = h("input", "nba-action-reason");
      reason.type = "text";
      reason.placeholder = "reason (optional)";
      reason.value = ui.reason;
      reason.setAttribute("aria-label", "Reason for denying");
      reason.addEventListener("input", () => { ui.reason = reason.value; });
      const deny = button("Deny", "nba-btn-deny", () => send("deny", { reason: reason.value }),
        "Do not run this call; the model is told why");
      const editable = model.get("editable");
      const edit = button("Edit arguments", "", () => { ui.editing = true; draw(); },
        editable ? "Change the arguments, then approve"
          : "These arguments are too large to edit here; use chat.approve(call, arguments=...)");
      edit.disabled = !editable;
      const always = button("Always allow this tool", "", () => send("always"),
        `Approve every call of ${model.get("tool")} for the rest of the session`);
      row.append(approve, deny, reason, edit, always);
      if (state === "working") for (const n of row.querySelectorAll("button, input")) n.disabled = true;
      el.append(row);
      if (!editable) {
        el.append(h("div", "nba-action-note",
          "The arguments are too large to edit here (the call above shows their start); " +
          "use chat.approve(call, arguments=...) to run it with other arguments."));
      }
    }
    if (state === "working") el.append(h("div", "nba-action-note", "working\u2026"));
  }

  function drawBudget(state) {
    const head = h("div", "nba-action-head");
    // U+2016 (a pause sign drawn as two bars): in DejaVu and every common UI font; U+23F8 is not.
    head.append(h("span", "nba-action-icon", state === "pending" || state === "working" ? "\u2016" : "\u2714"));
    head.append(h("span", "nba-action-title", "Step budget exhausted."));
    el.append(head);
    if (state !== "pending" && state !== "working") {
      const summary = model.get("summary");
      if (summary) el.append(h("div", "nba-action-summary", summary));
      return;
    }
    const row = h("div", "nba-action-row");
    const steps = model.get("steps");
    const more = button(`Continue (+${steps} steps)`, "nba-btn-approve", () => send("continue"));
    const stop = button("Stop", "", () => send("stop"));
    row.append(more, stop);
    if (state === "working") for (const n of row.querySelectorAll("button")) n.disabled = true;
    el.append(row);
  }

  function draw() {
    const state = model.get("state");
    if (state === "pending") { ui.clicked = false; el.classList.remove("nba-busy"); }
    el.replaceChildren();
    el.dataset.state = state;
    el.dataset.kind = model.get("kind");
    if (state === "closed" && !model.get("summary")) { el.classList.add("nba-hidden"); return; }
    el.classList.remove("nba-hidden");
    if (model.get("kind") === "budget") drawBudget(state); else drawApproval(state);
    const error = model.get("error");
    if (error) el.append(h("div", "nba-action-error", error));
  }

  const redraw = () => draw();
  for (const name of ["state", "error", "summary", "arguments", "editable", "reason", "tool", "steps", "kind"]) {
    model.on(`change:${name}`, redraw);
  }
  draw();
  try { model.send({ event: "rendered" }); } catch (e) { /* a static page has no kernel */ }
  return () => {
    for (const name of ["state", "error", "summary", "arguments", "editable", "reason", "tool", "steps", "kind"]) {
      model.off(`change:${name}`, redraw);
    }
  };
}

export default { render };
