// nbagent action cards (a gated call's decision card, Approve all / Deny all, step
// budget, a pending input's card), rendered by anywidget.
//
// An approval card shows the call's card as the kernel rendered it (the `value`
// trait: HTML built by nbagent/notebook/_cards.py, where everything a model or
// a tool produced is escaped, the same HTML every other entry of the view
// shows) and draws its buttons into that card's `.nba-controls` slot.
// Everything this file adds itself goes into the DOM through textContent /
// value, never innerHTML. The first click disables every control of the card at
// once, then sends the action (with a fresh nonce) to the kernel as a custom
// message; the kernel answers by changing `state` (and `error` when it refused).
//
// An input card (kind "input") shows the input as the kernel rendered it (`value`)
// and draws its controls into its `.nba-controls` slot: an elicitation's form from
// the `fields` the kernel read off its JSON Schema, a URL's Done, a sampling
// request's Approve / Deny / own reply, ask_user's text box or choices, an
// external call's result. What is typed is sent as entered (`action.data`); the
// kernel types and checks it, and a bad value comes back as `error` with the input
// still waiting (what was typed stays: it lives in `ui.values`).

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

// A reason box: Enter submits (`onEnter`), as a form would; Enter with a modifier does
// nothing (Shift+Enter, Ctrl+Enter, Alt+Enter are JupyterLab's run keys: pressed from habit,
// they must not deny a call).
function reasonBox(ui, placeholder, label, onEnter) {
  const box = h("input", "nba-action-reason");
  box.type = "text";
  box.placeholder = placeholder;
  box.value = ui.reason;
  box.setAttribute("aria-label", label);
  box.addEventListener("input", () => { ui.reason = box.value; });
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.isComposing && !plainEnter(ev)) ev.preventDefault();
    else if (ev.key === "Enter" && !ev.isComposing) {
      ev.preventDefault();
      ev.stopPropagation();  // not JupyterLab's Shift+Enter / Enter shortcuts
      onEnter(box.value);
    }
  });
  return box;
}

function plainEnter(ev) {
  return !(ev.shiftKey || ev.ctrlKey || ev.altKey || ev.metaKey);
}

const TRAITS = ["state", "error", "summary", "note", "value", "arguments", "editable", "reason",
  "tool", "steps", "budget", "increment", "kind", "count", "revocable", "hosted", "fields",
  "choices", "input_kind", "input_id"];

let counter = 0;

// Keys typed in a card's text box, form field or JSON editor are the card's: none reaches
// JupyterLab, whose Shift+Enter / Ctrl+Enter / Alt+Enter would run the cell again (a new
// request to the model, what was typed lost) and whose one-key shortcuts act on cells. Only
// Ctrl / Cmd / Alt chords other than Enter go on (Ctrl+S saves). The key's own default is
// kept: Shift+Enter in a text area is a new line.
function keepKeys(el) {
  el.addEventListener("keydown", (ev) => {
    const t = ev.target;
    if (!t || !t.closest || !t.closest("input, textarea, select, [contenteditable]")) return;
    if (ev.key === "Enter" || !(ev.ctrlKey || ev.metaKey || ev.altKey)) ev.stopPropagation();
  });
}

// A control's identity across redraws, which build every node anew: its kind, its label
// (what a screen reader reads) and its class.
function controlKey(node) {
  return keyOf(node.tagName, node.getAttribute("aria-label") || node.textContent, node.className);
}

function keyOf(tag, label, cls) {
  return `${tag.toUpperCase()}\u0000${label}\u0000${cls.trim()}`;
}

// A note a screen reader says without moving focus ("sent", "working").
function statusNote(cls, text) {
  const note = h("div", cls, text);
  note.setAttribute("role", "status");
  return note;
}

function render({ model, el }) {
  el.classList.add("nba-action");
  // Focusable from code only (not a Tab stop): the card holds the keyboard focus while its
  // controls are disabled (a disabled button drops it to the page's body).
  el.tabIndex = -1;
  keepKeys(el);
  // Where focus goes when the card is taken away while it has it (a settled turn's view
  // becomes plain HTML): the notebook cell it was in, not the page's body. `cell` is found
  // once the card is on the page; `focused` says whether focus was in the card last.
  const place = { cell: null, focused: false };
  el.addEventListener("focusin", () => {
    place.focused = true;
    const up = el.parentElement;
    place.cell = (up && up.closest(".jp-Cell, .cell")) || place.cell;
  });
  el.addEventListener("focusout", (ev) => {
    // a node taken out of the page may say so with no relatedTarget: still ours
    if (ev.relatedTarget && !el.contains(ev.relatedTarget)) place.focused = false;
  });
  // Local UI state survives redraws (an error must not wipe what was typed). `focus`: the
  // control that had focus, given it back once a redraw has it enabled again.
  const ui = { editing: false, editText: null, reason: "", clicked: false, jsonError: "",
    values: {}, replying: false, reply: "", focus: null };

  // Focus to the card itself, keeping which control had it.
  function holdFocus() {
    const active = document.activeElement;
    if (!active || !el.contains(active)) return;
    if (active !== el) ui.focus = controlKey(active);
    el.focus({ preventScroll: true });
  }

  // A redraw that swaps controls (the editor opened or closed): focus goes to `key`'s.
  function focusOn(key) {
    if (document.activeElement && el.contains(document.activeElement)) {
      el.focus({ preventScroll: true });
      ui.focus = key;
    }
  }

  function send(kind, extra) {
    if (ui.clicked) return;
    ui.clicked = true;
    holdFocus();  // before the controls are disabled (Enter on Approve: focus stays here)
    for (const node of el.querySelectorAll("button, input, textarea")) node.disabled = true;
    el.classList.add("nba-busy");
    // Said at once: a kernel busy with another cell handles the click only when that cell
    // ends (seconds, minutes); the kernel's answer (its `state`) redraws the card.
    el.append(statusNote("nba-action-note nba-sent", "sent \u2014 waiting for the kernel\u2026"));
    counter += 1;
    // A custom message, not a trait: Jupyter Widgets sends one state update at a time and
    // holds the next until the kernel reports the first idle, which a kernel running an
    // awaiting cell (`await chat.ask_async`) does not do for it, so a second click on a card
    // (after an error) would never arrive.
    model.send({ event: "action", action: Object.assign(
      { kind, reason: "", arguments: "", data: null,
        nonce: `${Date.now()}-${counter}-${Math.random()}` },
      extra || {}) });
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
      note.setAttribute("aria-live", "polite");  // said as it changes, not as an alert
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
      const cancel = button("Cancel", "", () => {
        ui.editing = false;
        ui.jsonError = "";
        focusOn(keyOf("button", "Edit arguments", "nba-btn"));
        draw();
      });
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
    const edit = button("Edit arguments", "", () => {
      ui.editing = true;
      focusOn(keyOf("textarea", "Edited arguments (JSON)", "nba-action-json"));
      draw();
    },
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
      if (state === "working") slot.append(statusNote("nba-action-note", "working\u2026"));
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

  // ----------------------------------------------------------------- input cards
  // Enter in a one-line box submits (Enter with a modifier does nothing); in a text area
  // (`needCtrl`) Ctrl+Enter / Cmd+Enter submits and Enter is a new line.
  function onEnter(node, fn, needCtrl) {
    node.addEventListener("keydown", (ev) => {
      if (ev.key !== "Enter" || ev.isComposing || ev.shiftKey) return;
      if (needCtrl && !(ev.ctrlKey || ev.metaKey)) return;
      if (!needCtrl && !plainEnter(ev)) return;
      ev.preventDefault();
      ev.stopPropagation();
      fn();
    });
  }

  function fieldValue(f) {
    return Object.prototype.hasOwnProperty.call(ui.values, f.name) ? ui.values[f.name] : f.default;
  }

  function fieldControl(f, i, single, accept) {
    const cls = `nba-field nba-field-${i}`;
    const set = (v) => { ui.values[f.name] = v; };
    const label = `${f.label}${f.required ? " (required)" : ""}`;
    if (f.widget === "checkbox") {
      const box = h("input", cls);
      box.type = "checkbox";
      box.checked = !!fieldValue(f);
      box.setAttribute("aria-label", label);
      box.addEventListener("change", () => set(box.checked));
      return box;
    }
    if (f.widget === "select") {
      const sel = h("select", cls);
      sel.setAttribute("aria-label", label);
      const none = h("option", "", f.required ? "choose\u2026" : "(none)");
      none.value = "";
      sel.append(none);
      for (const o of f.options || []) {
        const opt = h("option", "", o.label);
        opt.value = o.value;
        sel.append(opt);
      }
      sel.value = fieldValue(f) || "";
      sel.addEventListener("change", () => set(sel.value));
      return sel;
    }
    if (f.widget === "multi") {
      const wrap = h("span", "nba-multi");
      const chosen = new Set(fieldValue(f) || []);
      (f.options || []).forEach((o, j) => {
        const item = h("label", "nba-multi-item");
        const box = h("input", `${cls}-${j}`);
        box.type = "checkbox";
        box.checked = chosen.has(o.value);
        box.addEventListener("change", () => {
          const now = new Set(fieldValue(f) || []);
          if (box.checked) now.add(o.value); else now.delete(o.value);
          set((f.options || []).map((x) => x.value).filter((v) => now.has(v)));
        });
        item.append(box, document.createTextNode(" " + o.label));
        wrap.append(item);
      });
      return wrap;
    }
    const multiline = f.widget === "json";
    const box = h(multiline ? "textarea" : "input", cls + " nba-action-reason");
    if (!multiline) {
      box.type = f.widget === "number" ? "number" : (f.input_type || "text");
      if (f.widget === "number") {
        box.step = f.integer ? "1" : "any";
        if (f.minimum !== null && f.minimum !== undefined) box.min = String(f.minimum);
        if (f.maximum !== null && f.maximum !== undefined) box.max = String(f.maximum);
      }
      if (f.max_length) box.maxLength = f.max_length;
    }
    box.value = fieldValue(f) === undefined || fieldValue(f) === null ? "" : String(fieldValue(f));
    box.setAttribute("aria-label", label);
    box.addEventListener("input", () => set(box.value));
    if (single && !multiline) onEnter(box, accept);
    return box;
  }

  function formValues(fields) {
    const out = {};
    for (const f of fields) out[f.name] = fieldValue(f);
    return out;
  }

  function inputControls(state, slot) {
    const kind = model.get("input_kind");
    const row = h("div", "nba-action-row");
    const reasonFor = (label) => reasonBox(ui, "reason (optional)", label,
      (text) => send("decline", { reason: text }));
    if (kind === "elicitation") {
      const fields = model.get("fields") || [];
      const accept = () => send("accept", { data: formValues(fields) });
      const single = fields.length === 1;
      const form = h("div", "nba-form-live");
      fields.forEach((f, i) => {
        const line = h("label", "nba-form-row");
        const name = h("span", "nba-form-label", f.label);
        if (f.required) name.append(h("span", "nba-required", " *"));
        if (f.description) name.title = f.description;
        line.append(name, fieldControl(f, i, single, accept));
        if (f.description) line.append(h("span", "nba-form-help", f.description));
        form.append(line);
      });
      slot.append(form);
      row.append(
        button("Accept", "nba-btn-approve", accept, "Send these values to the server"),
        button("Decline", "nba-btn-deny", () => send("decline"), "Refuse to give these values"),
        button("Cancel", "", () => send("cancel"), "Dismiss the request without deciding"));
    } else if (kind === "elicitation_url") {
      row.append(
        button("Done", "nba-btn-approve", () => send("accept"),
          "Tell the server you finished the step on that page"),
        button("Decline", "nba-btn-deny", () => send("decline"), "Do not do it"));
    } else if (kind === "sampling") {
      if (ui.replying) {
        const area = h("textarea", "nba-field nba-reply nba-action-json");
        area.rows = 3;
        area.value = ui.reply;
        area.placeholder = "your reply (Ctrl+Enter sends)";
        area.setAttribute("aria-label", "Your own reply to the server");
        const sendReply = () => send("accept", { data: area.value });
        area.addEventListener("input", () => { ui.reply = area.value; });
        onEnter(area, sendReply, true);
        slot.append(area);
        row.append(button("Send my reply", "nba-btn-approve", sendReply,
          "Answer the server with this text; the model is not asked"),
        button("Back", "", () => { ui.replying = false; draw(); }));
      } else {
        row.append(
          button("Approve", "nba-btn-approve", () => send("accept"),
            "Run the model on these messages and send its reply to the server"),
          button("Deny", "nba-btn-deny", () => send("decline"), "Do not run the model"),
          button("Reply myself", "", () => { ui.replying = true; draw(); },
            "Write the reply yourself instead of asking the model"));
      }
    } else if (kind === "ask_user") {
      const choices = model.get("choices") || [];
      if (choices.length) {
        for (const c of choices) {
          row.append(button(c, "nba-btn-choice", () => send("accept", { data: c }), `Answer "${c}"`));
        }
      } else {
        const box = h("input", "nba-field nba-answer nba-action-reason");
        box.type = "text";
        box.placeholder = "your answer (Enter sends)";
        box.value = ui.values.answer || "";
        box.setAttribute("aria-label", "Your answer");
        box.addEventListener("input", () => { ui.values.answer = box.value; });
        onEnter(box, () => send("accept", { data: box.value }));
        row.append(box, button("Answer", "nba-btn-approve",
          () => send("accept", { data: box.value }), "Send this answer to the model"));
      }
      row.append(button("Decline", "nba-btn-deny", () => send("decline", { reason: ui.reason }),
        "Do not answer; the model is told"), reasonFor("Reason for declining (Enter declines)"));
    } else {  // external: the result of work done outside nbagent
      const area = h("textarea", "nba-field nba-result-text nba-action-json");
      area.rows = 3;
      area.value = ui.values.result || "";
      area.placeholder = "the result (Ctrl+Enter submits)";
      area.setAttribute("aria-label", "The call's result");
      const submit = () => send("accept", { data: area.value });
      area.addEventListener("input", () => { ui.values.result = area.value; });
      onEnter(area, submit, true);
      slot.append(area);
      row.append(button("Submit", "nba-btn-approve", submit, "Give this text as the call's result"),
        button("Decline", "nba-btn-deny", () => send("decline", { reason: ui.reason }),
          "Give no result; the model is told"), reasonFor("Reason for declining (Enter declines)"));
    }
    if (state === "working") for (const n of row.querySelectorAll("button, input")) n.disabled = true;
    slot.append(row);
  }

  function drawInput(state) {
    const active = state === "pending" || state === "working";
    if (!active) {  // answered: one line
      const line = h("div", "nba-input-line");
      line.append(h("span", "nba-action-icon", state === "answered" ? "\u2714" : "\u2715"));
      line.append(h("span", "nba-action-summary", model.get("summary")));
      el.append(line);
      return;
    }
    const body = h("div", "nba-card-html");
    body.innerHTML = model.get("value");  // the kernel's escaped card (see the top of this file)
    el.append(body);
    const slot = body.querySelector(".nba-controls") || el;
    inputControls(state, slot);
    if (state === "working") slot.append(statusNote("nba-action-note", "working\u2026"));
  }

  function draw() {
    const state = model.get("state");
    const kind = model.get("kind");
    if (state !== "working") { ui.clicked = false; el.classList.remove("nba-busy"); }
    // Keep what the reader opened and where they were typing across the redraw.
    const opened = Array.from(el.querySelectorAll("details"), (d) => d.open);
    const active = document.activeElement;
    const hadFocus = !!active && el.contains(active);
    const typing = hadFocus && active !== el && typeof active.selectionStart === "number"
      ? [active.selectionStart, active.selectionEnd] : null;
    if (hadFocus && active !== el) ui.focus = controlKey(active);
    el.replaceChildren();
    el.dataset.state = state;
    el.dataset.kind = kind;
    const empty = !model.get("summary") && !(kind === "approval" && model.get("value"));
    if (state === "closed" && empty) { el.classList.add("nba-hidden"); return; }
    el.classList.remove("nba-hidden");
    if (kind === "budget") drawBudget(state);
    else if (kind === "batch") drawBatch(state);
    else if (kind === "input") drawInput(state);
    else drawApproval(state);
    const error = model.get("error");
    if (error) {
      const said = h("div", "nba-action-error", error);
      said.setAttribute("role", "alert");  // a refused click: said at once
      el.append(said);
    }
    const details = el.querySelectorAll("details");
    if (details.length === opened.length) details.forEach((d, i) => { d.open = opened[i]; });
    if (hadFocus) {
      // the control that had focus when it is there and enabled (the edit's Approve after
      // a refusal, the reason box typed in), else the card itself: never the page's body
      const again = ui.focus && !ui.clicked ? Array.from(
        el.querySelectorAll("button, input, textarea, select"),
      ).find((n) => !n.disabled && controlKey(n) === ui.focus) : null;
      if (again) {
        again.focus({ preventScroll: true });
        if (typing && typeof again.selectionStart === "number") {
          try { again.setSelectionRange(typing[0], typing[1]); } catch (e) { /* a number box */ }
        }
      } else {
        el.focus({ preventScroll: true });
      }
    }
  }

  const redraw = () => draw();
  for (const name of TRAITS) model.on(`change:${name}`, redraw);
  draw();
  // Which page drew it: one token per page (a reloaded page, another tab: a new one), so
  // the kernel knows when a card is drawn on a page its output's updates cannot reach.
  if (!window.__nbagentPage) window.__nbagentPage = `${Date.now()}-${Math.random()}`;
  try { model.send({ event: "rendered", page: window.__nbagentPage }); } catch (e) { /* a static page has no kernel */ }
  return () => {
    for (const name of TRAITS) model.off(`change:${name}`, redraw);
    if (!place.focused || !place.cell) return;
    // the card is going (its node out of the page now or soon): once it has, a focus left
    // on nothing goes to its cell
    const refocus = () => {
      const now = document.activeElement;
      const lost = !now || now === document.body || (el.contains(now) && !el.isConnected);
      if (lost && place.cell.isConnected) place.cell.focus({ preventScroll: true });
    };
    refocus();
    requestAnimationFrame(refocus);
  };
}

export default { render };
