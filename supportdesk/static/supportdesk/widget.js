/*
 * SupportDesk chat widget. Embed with one tag:
 *   <script src="https://support.example.com/static/supportdesk/widget.js"
 *           data-api-base="https://support.example.com" data-language="en" data-theme="light" defer></script>
 * data-open="true" starts with the panel open; otherwise a launcher button in the corner opens
 * and closes it, and the customer's choice is remembered (localStorage) across pages.
 *
 * It lives in a shadow DOM (the host page's CSS cannot reach it), talks to the
 * REST API and the conversation websocket, and resumes from the last event
 * sequence number it saw after a reconnect or a page reload.
 *
 * Safety: nothing the model or the customer writes is parsed as HTML by the
 * widget. Streamed text is inserted as text; the final answer comes as HTML
 * sanitized on the server (nh3) and is sanitized again here (allowlisted tags,
 * no attributes but http(s)/mailto links) before it is attached.
 */
(function () {
  "use strict";
  const script = document.currentScript;
  if (!script) return;
  const scriptUrl = new URL(script.src, location.href);
  const apiBase = (script.dataset.apiBase || scriptUrl.origin).replace(/\/+$/, "");
  const wsBase = apiBase.replace(/^http/, "ws");
  const wanted = script.dataset.language || document.documentElement.lang || "en";
  const theme = script.dataset.theme === "dark" ? "dark" : "light";
  const storeKey = "supportdesk:" + apiBase;
  const openKey = storeKey + ":open";

  const SAFE_TAGS = new Set(["P", "BR", "STRONG", "EM", "B", "I", "CODE", "PRE", "BLOCKQUOTE", "UL", "OL", "LI",
    "H1", "H2", "H3", "H4", "H5", "H6", "A", "HR", "TABLE", "THEAD", "TBODY", "TR", "TH", "TD", "SUP"]);
  const STYLE = `
    :host { all: initial; position: fixed; right: 16px; bottom: 16px; z-index: 2147483000;
      display: flex; flex-direction: column; align-items: flex-end; gap: 10px; }
    * { box-sizing: border-box; }
    .launcher { width: 56px; height: 56px; border-radius: 50%; border: none; cursor: pointer; background: #0b6bcb;
      color: #fff; font: 26px/1 system-ui, sans-serif; box-shadow: 0 4px 16px rgba(0,0,0,.25); display: grid; place-items: center; }
    .launcher.dark { background: #63b3ed; color: #1f2933; }
    .launcher:focus-visible { outline: 3px solid #f5a623; outline-offset: 3px; }
    .panel[hidden] { display: none; }
    .greeting { background: var(--bubble); padding: 8px 10px; border-radius: 10px; margin: 6px 0; }
    .panel { --bg:#fff; --fg:#1f2933; --muted:#52606d; --accent:#0b6bcb; --bubble:#f0f4f8; --border:#cbd2d9; --err:#b42318;
      width: 380px; max-width: calc(100vw - 32px); height: 560px; max-height: calc(100vh - 100px);
      display: flex; flex-direction: column; background: var(--bg); color: var(--fg);
      font: 14px/1.45 system-ui, sans-serif; border: 1px solid var(--border); border-radius: 12px;
      box-shadow: 0 8px 30px rgba(0,0,0,.18); overflow: hidden; }
    .panel.dark { --bg:#1f2933; --fg:#f5f7fa; --muted:#9aa5b1; --accent:#63b3ed; --bubble:#323f4b; --border:#52606d; --err:#ff8a80; }
    header { padding: 10px 14px; font-weight: 600; border-bottom: 1px solid var(--border); display:flex; justify-content:space-between; }
    .conn { font-weight: 400; font-size: 12px; color: var(--muted); }
    .log { flex: 1; overflow-y: auto; padding: 10px 14px; }
    .user { text-align: right; margin: 8px 0; }
    .user span { display: inline-block; background: var(--accent); color: #fff; padding: 6px 10px; border-radius: 10px; white-space: pre-wrap; text-align: left; }
    .plan { color: var(--muted); font-style: italic; margin: 6px 0; white-space: pre-wrap; }
    .answer { background: var(--bubble); padding: 8px 10px; border-radius: 10px; margin: 6px 0; overflow-wrap: anywhere; }
    .answer.streaming { white-space: pre-wrap; }
    .answer p { margin: 0 0 6px; } .answer p:last-child { margin-bottom: 0; }
    .answer a, .sources a { color: var(--accent); }
    .typing { color: var(--muted); font-size: 12px; margin: 4px 0; }
    .confidence { font-size: 12px; margin: 4px 0; }
    .confidence[data-level=high] { color: #2f855a; } .confidence[data-level=medium] { color: #b7791f; } .confidence[data-level=low] { color: var(--err); }
    .sources { font-size: 12px; margin: 4px 0; } .sources ol { margin: 2px 0; padding-left: 20px; }
    .limitations { font-size: 12px; color: var(--muted); margin: 4px 0; }
    .chips { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0; }
    .chips button, .thumbs button, .error button, form button { font: inherit; cursor: pointer; border: 1px solid var(--border);
      background: var(--bg); color: var(--fg); border-radius: 14px; padding: 3px 10px; }
    .thumbs { display:flex; gap:6px; align-items:center; margin: 4px 0; font-size: 12px; }
    .thumbs button[aria-pressed=true] { background: var(--accent); color:#fff; }
    .thumbs textarea { font: inherit; width: 100%; }
    .error { color: var(--err); margin: 6px 0; }
    .starting { font-size: 12px; color: var(--muted); background: var(--bubble); border-radius: 8px; padding: 6px 10px; margin: 6px 0; }
    .starting[hidden] { display: none; }
    button:focus-visible, input:focus-visible, textarea:focus-visible, a:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }
    form { display: flex; gap: 6px; padding: 10px; border-top: 1px solid var(--border); }
    form input { flex: 1; font: inherit; padding: 6px 8px; border: 1px solid var(--border); border-radius: 8px; background: var(--bg); color: var(--fg); }
    form button { border-radius: 8px; background: var(--accent); color: #fff; border-color: var(--accent); }
    details.debug { font-size: 11px; border: 1px dashed var(--muted); border-radius: 6px; padding: 4px 6px; margin: 4px 0; }
    .badges span { display:inline-block; background: var(--bubble); border-radius: 8px; padding: 1px 6px; margin-right: 4px; }
    details.debug pre { white-space: pre-wrap; max-height: 160px; overflow: auto; }
    .handoff-note { color: var(--muted); font-size: 12px; margin: 8px 0; padding: 6px 10px; border-left: 3px solid var(--accent); }
    .answer.staff .author { display: block; font-size: 11px; color: var(--muted); margin-bottom: 2px; }
    button.handoff { font: inherit; font-size: 12px; cursor: pointer; border: 1px solid var(--border); background: var(--bg);
      color: var(--fg); border-radius: 14px; padding: 2px 10px; margin: 4px 0; }
    form.handoff-email { padding: 0; border: none; margin: 4px 0; }
  `;

  const host = document.createElement("div");
  host.id = "supportdesk-widget";
  const root = host.attachShadow({ mode: "open" });
  let strings = {};
  let staff = false;
  let language = "en";
  let conversation = null;   // {id, token}
  let socket = null;
  let lastSeq = 0;
  let retryDelay = 500;
  let pendingText = null;    // a message sent but not yet accepted (kept for retry)
  const outbox = [];         // messages typed while the socket was not open
  const turns = new Map();   // turn id -> view
  let userTexts = new Map(); // turn id -> the customer's message (for replays)

  // A turn may be answered in another language than the widget's (the customer's message
  // decides): its own strings, sent with its answer, win for that turn's labels.
  const t = (key, view) => (view && view.strings && view.strings[key]) || strings[key] || key;
  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };

  // --- markup -----------------------------------------------------------------------
  const panel = el("section", "panel" + (theme === "dark" ? " dark" : ""));
  panel.id = "supportdesk-panel";
  panel.setAttribute("role", "dialog");
  const launcher = el("button", "launcher" + (theme === "dark" ? " dark" : ""));
  launcher.type = "button";
  launcher.setAttribute("aria-controls", panel.id);
  launcher.setAttribute("aria-haspopup", "dialog");
  const greeting = el("div", "greeting");
  // Shown while the assistant's model is still starting (the platform serves before it).
  const starting = el("div", "starting");
  starting.setAttribute("role", "status");
  starting.hidden = true;
  const header = el("header");
  const title = el("span");
  const conn = el("span", "conn");
  // Issue #29: the customer can always ask for a person (a reply may offer it too: `offer_handoff`).
  const handoffHeader = el("button", "handoff");
  handoffHeader.type = "button";
  handoffHeader.addEventListener("click", () => handoffRequest("widget_button"));
  header.append(title, handoffHeader, conn);
  const log = el("div", "log");
  log.setAttribute("role", "log");
  log.setAttribute("aria-live", "polite");
  log.setAttribute("aria-relevant", "additions text");
  const form = el("form");
  const input = el("input");
  input.type = "text";
  input.autocomplete = "off";
  const send = el("button");
  send.type = "submit";
  form.append(input, send);
  panel.append(header, log, form);
  const style = el("style");
  style.textContent = STYLE;
  root.append(style, panel, launcher);

  // --- open / closed -----------------------------------------------------------------
  // The widget's icons are inline SVG: an emoji (💬, 👍) shows as an empty box where no emoji font is
  // installed. The thumbs are Feather's (MIT licence).
  const LAUNCHER_ICONS = {
    open: {d: "M5 4h14a3 3 0 0 1 3 3v8a3 3 0 0 1-3 3h-8l-5 4v-4H5a3 3 0 0 1-3-3V7a3 3 0 0 1 3-3z", fill: true},
    close: {d: "M6 6l12 12M18 6L6 18", fill: false},
    up: {d: "M14 9V5a3 3 0 0 0-3-3l-4 9v11h11.28a2 2 0 0 0 2-1.7l1.38-9a2 2 0 0 0-2-2.3zM7 22H4a2 2 0 0 1-2-2v-7a2 2 0 0 1 2-2h3", fill: false},
    down: {d: "M10 15v4a3 3 0 0 0 3 3l4-9V2H5.72a2 2 0 0 0-2 1.7l-1.38 9a2 2 0 0 0 2 2.3zm7-13h2.67A2.31 2.31 0 0 1 22 4v7a2.31 2.31 0 0 1-2.33 2H17", fill: false},
  };
  function launcherIcon(name, size = 26) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "icon icon-" + name);
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("width", String(size));
    svg.setAttribute("height", String(size));
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", LAUNCHER_ICONS[name].d);
    path.setAttribute("fill", LAUNCHER_ICONS[name].fill ? "currentColor" : "none");
    path.setAttribute("stroke", "currentColor");
    path.setAttribute("stroke-width", LAUNCHER_ICONS[name].fill ? "1" : size < 20 ? "2" : "2.5");
    path.setAttribute("stroke-linecap", "round");
    path.setAttribute("stroke-linejoin", "round");
    svg.append(path);
    return svg;
  }

  function storedOpen() {
    const saved = localStorage.getItem(openKey);
    return saved === null ? script.dataset.open === "true" : saved === "1";
  }

  function setOpen(open, remember) {
    panel.hidden = !open;
    launcher.setAttribute("aria-expanded", String(open));
    launcher.setAttribute("aria-label", t(open ? "widget_close" : "widget_open"));
    launcher.title = t(open ? "widget_close" : "widget_open");
    launcher.replaceChildren(launcherIcon(open ? "close" : "open"));
    if (remember) localStorage.setItem(openKey, open ? "1" : "0");
    if (open && remember) { input.focus(); scroll(); }
  }

  launcher.addEventListener("click", () => setOpen(panel.hidden, true));
  panel.addEventListener("keydown", (e) => {
    if (e.key === "Escape") { e.preventDefault(); setOpen(false, true); launcher.focus(); }
  });
  setOpen(storedOpen(), false);

  function labels() {
    title.textContent = t("widget_title");
    panel.setAttribute("aria-label", t("widget_title"));
    log.setAttribute("aria-label", t("widget_messages"));
    input.placeholder = t("widget_placeholder");
    input.setAttribute("aria-label", t("widget_placeholder"));
    send.textContent = t("widget_send");
    handoffHeader.textContent = t("widget_handoff_button");
    greeting.textContent = t("widget_greeting");
    starting.textContent = t("widget_assistant_starting");
    setOpen(!panel.hidden, false);
  }

  // While the model starts, say so and look again every few seconds until it is up.
  function assistantState(state) {
    starting.hidden = state !== "starting";
    if (state !== "starting") return;
    setTimeout(async () => {
      try {
        const config = await api(`/api/widget/config?lang=${encodeURIComponent(language)}`);
        assistantState(config.assistant);
      } catch (e) { assistantState("starting"); }
    }, 5000);
  }

  // --- safe HTML ----------------------------------------------------------------------
  function safeUrl(href) {
    try {
      const url = new URL(href, location.href);
      return ["http:", "https:", "mailto:"].includes(url.protocol) ? url.href : null;
    } catch (e) { return null; }
  }

  function sanitizeInto(target, html) {
    const doc = new DOMParser().parseFromString("<body>" + html + "</body>", "text/html");
    target.replaceChildren(...cleanChildren(doc.body));
  }

  function cleanChildren(parent) {
    const out = [];
    for (const node of Array.from(parent.childNodes)) {
      if (node.nodeType === Node.TEXT_NODE) out.push(document.createTextNode(node.textContent));
      else if (node.nodeType === Node.ELEMENT_NODE) {
        if (!SAFE_TAGS.has(node.tagName)) {
          if (!["SCRIPT", "STYLE", "IFRAME", "OBJECT", "EMBED", "TEMPLATE"].includes(node.tagName)) out.push(...cleanChildren(node));
          continue;
        }
        const copy = document.createElement(node.tagName.toLowerCase());
        if (node.tagName === "A") {
          const href = safeUrl(node.getAttribute("href") || "");
          if (href) { copy.href = href; copy.target = "_blank"; copy.rel = "noopener noreferrer nofollow"; }
        }
        copy.append(...cleanChildren(node));
        out.push(copy);
      }
    }
    return out;
  }

  // [n] in the answer becomes a link to the cited source.
  function linkCitations(container, sources) {
    const byNumber = new Map(sources.map((s) => [s.number, s]));
    const walker = document.createTreeWalker(container, NodeFilter.SHOW_TEXT);
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      if (node.parentElement && node.parentElement.closest("a, code, pre")) continue;
      const parts = node.textContent.split(/(\[\d{1,3}\])/);
      if (parts.length === 1) continue;
      const frag = document.createDocumentFragment();
      for (const part of parts) {
        const m = /^\[(\d{1,3})\]$/.exec(part);
        const source = m && byNumber.get(Number(m[1]));
        const href = source && safeUrl(source.url);
        if (href) {
          const a = el("a", "cite", part);
          a.href = href; a.target = "_blank"; a.rel = "noopener noreferrer nofollow";
          a.title = source.title;
          frag.append(a);
        } else frag.append(document.createTextNode(part));
      }
      node.replaceWith(frag);
    }
  }

  // --- conversation ----------------------------------------------------------------------
  async function api(path, options) {
    // Default credentials ("same-origin"): the staff session reaches the API only on the support
    // site itself; on other sites the widget authenticates with its conversation token alone.
    const resp = await fetch(apiBase + path, options || {});
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      const error = new Error((body && body.detail) || t("widget_error_network"));
      error.status = resp.status;
      throw error;
    }
    return body;
  }

  function authHeaders() {
    return { "Content-Type": "application/json", "X-Conversation-Token": conversation.token };
  }

  async function conversationEnsure() {
    const saved = localStorage.getItem(storeKey);
    if (saved) {
      conversation = JSON.parse(saved);
      try {
        const messages = await api(`/api/conversations/${conversation.id}/messages`, { headers: authHeaders() });
        userTexts = new Map(messages.filter((m) => m.role === "user" && m.turn).map((m) => [m.turn, m.text]));
        return;
      } catch (e) {
        if (e.status !== 403 && e.status !== 404) throw e;
        localStorage.removeItem(storeKey); // gone or not ours any more: start a new one
      }
    }
    conversation = await api("/api/conversations", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ language: language }),
    });
    localStorage.setItem(storeKey, JSON.stringify({ id: conversation.id, token: conversation.token }));
  }

  // --- one turn in the log -------------------------------------------------------------
  function turnView(id) {
    let view = turns.get(id);
    if (view) return view;
    const box = el("div", "turn");
    box.dataset.turn = String(id);
    const plan = el("div", "plan");
    plan.hidden = true;
    const answer = el("div", "answer streaming");
    answer.hidden = true;
    const typing = el("div", "typing", t("widget_typing"));
    typing.hidden = true;
    typing.setAttribute("aria-hidden", "true");
    const extras = el("div", "extras");
    box.append(plan, answer, typing, extras);
    log.append(box);
    view = { id, box, plan, answer, typing, extras, raw: "", finished: false, user: null };
    turns.set(id, view);
    userLine(view);
    return view;
  }

  function userLine(view) {
    const text = userTexts.get(view.id);
    if (view.user || text === undefined) return;
    view.user = el("div", "user");
    view.user.append(el("span", "", text));
    view.box.prepend(view.user);
  }

  function scroll() { log.scrollTop = log.scrollHeight; }

  function onFrame(frame) {
    if (frame.seq !== null && frame.seq !== undefined) {
      if (frame.seq <= lastSeq) return; // already shown (replay overlap)
      lastSeq = frame.seq;
    }
    const p = frame.payload || {};
    if (frame.type === "accepted") {
      userTexts.set(frame.turn, pendingText || "");
      pendingText = null;
      const view = turnView(frame.turn);
      userLine(view);
      view.typing.hidden = view.finished;
      scroll();
      return;
    }
    if (frame.type === "pong") return;
    if (frame.type === "error" && frame.seq === null) { showError(p.message, pendingText); return; }
    if (frame.type === "handoff" || frame.type === "staff_message") { conversationEvent(frame.type, p); scroll(); return; }
    const view = turnView(frame.turn);
    switch (frame.type) {
      case "status":
        view.typing.hidden = view.finished || !["queued", "guarding", "planning", "answering"].includes(p.status);
        // A turn sent again after a worker was lost says so ("still working on your answer").
        view.typing.textContent = p.message || t("widget_typing");
        break;
      case "plan":
        view.plan.textContent = p.text || "";
        view.plan.hidden = !p.text;
        if (p.offer_handoff) view.extras.append(handoffButton(p.offer_handoff === true ? "no_answer" : p.offer_handoff));
        break;
      case "token":
        view.typing.hidden = true;
        view.raw += p.text || "";
        view.answer.hidden = false;
        view.answer.textContent = view.raw; // text only while streaming
        break;
      case "retract":
        view.raw = p.text || "";
        view.answer.textContent = view.raw;
        view.answer.hidden = !view.raw;
        break;
      case "answer":
        renderAnswer(view, p);
        break;
      case "error":
        view.typing.hidden = true;
        showError(p.message, userTexts.get(frame.turn), view.extras);
        break;
      case "done":
        view.finished = true;
        view.typing.hidden = true;
        if (staff) debugView(view);
        break;
    }
    scroll();
  }

  function renderAnswer(view, p) {
    if (p.strings) view.strings = p.strings;
    if (p.language) view.box.setAttribute("lang", p.language);
    view.answer.classList.remove("streaming");
    view.answer.hidden = false;
    view.raw = p.text || "";
    if (p.html) sanitizeInto(view.answer, p.html);
    else view.answer.textContent = view.raw;
    const sources = p.sources || [];
    linkCitations(view.answer, sources);
    view.extras.replaceChildren();
    if (p.confidence) {
      const c = el("div", "confidence", t("widget_confidence_" + p.confidence, view));
      c.dataset.level = p.confidence;
      view.extras.append(c);
    }
    if (sources.length) {
      const box = el("div", "sources");
      box.append(el("div", "", t("widget_sources", view)));
      const list = el("ol");
      for (const s of sources) {
        const item = el("li");
        item.value = s.number;
        const href = safeUrl(s.url);
        const link = el(href ? "a" : "span", "", s.title || s.url);
        if (href) { link.href = href; link.target = "_blank"; link.rel = "noopener noreferrer nofollow"; }
        if (s.excerpt) link.title = s.excerpt;
        item.append(link);
        list.append(item);
      }
      box.append(list);
      view.extras.append(box);
    }
    if ((p.limitations || []).length) {
      const lim = el("div", "limitations");
      lim.append(el("div", "", t("widget_limitations", view)));
      const list = el("ul");
      for (const text of p.limitations) list.append(el("li", "", text));
      lim.append(list);
      view.extras.append(lim);
    }
    if ((p.follow_ups || []).length) {
      const chips = el("div", "chips");
      chips.setAttribute("role", "group");
      chips.setAttribute("aria-label", t("widget_suggestions", view));
      for (const text of p.follow_ups.slice(0, 3)) {
        const chip = el("button", "chip", text);
        chip.type = "button";
        chip.addEventListener("click", () => sendMessage(text));
        chips.append(chip);
      }
      view.extras.append(chips);
    }
    if (p.offer_handoff) view.extras.append(handoffButton(p.offer_handoff === true ? "no_answer" : p.offer_handoff));
    view.extras.append(thumbs(view));
  }

  // --- a person (issue #29) -----------------------------------------------------------------
  // The control any reply may carry (a `plan` or `answer` payload's `offer_handoff`: true or the reason to send).
  function handoffButton(reason) {
    const button = el("button", "handoff", t("widget_handoff_button"));
    button.type = "button";
    button.addEventListener("click", () => handoffRequest(reason || "widget_button"));
    return button;
  }

  async function handoffRequest(reason) {
    if (!conversation) return;
    try {
      await api(`/api/conversations/${conversation.id}/handoff`, {
        method: "POST", headers: authHeaders(), body: JSON.stringify({ reason: reason }),
      });
    } catch (e) { showError(e.message); }
    // The message saying a person was asked for comes as a `handoff` event.
  }

  // Events of the conversation rather than of a turn: an owner change, a staff reply.
  function conversationEvent(type, p) {
    if (type === "handoff") {
      const note = el("div", "handoff-note", p.message || "");
      note.dataset.owner = p.owner || "";
      note.setAttribute("role", "status");
      log.append(note);
      if (p.ask_email) note.after(emailForm());
      return;
    }
    const box = el("div", "answer staff");
    box.append(el("span", "author", t("widget_staff_label").replace("{name}", p.author || "")));
    const body = el("div", "staff-text");
    if (p.html) sanitizeInto(body, p.html); else body.textContent = p.text || "";
    box.append(body);
    log.append(box);
  }

  function emailForm() {
    const box = el("form", "handoff-email");
    const field = el("input");
    field.type = "email"; field.autocomplete = "email";
    field.placeholder = t("widget_handoff_email_label"); field.setAttribute("aria-label", t("widget_handoff_email_label"));
    const submit = el("button", "", t("widget_handoff_email_send"));
    submit.type = "submit";
    const status = el("span", "feedback-status");
    status.setAttribute("role", "status");
    box.append(field, submit, status);
    box.addEventListener("submit", async (e) => {
      e.preventDefault();
      try {
        const saved = await api(`/api/conversations/${conversation.id}/contact`, {
          method: "POST", headers: authHeaders(), body: JSON.stringify({ email: field.value }),
        });
        status.textContent = t("widget_handoff_email_saved").replace("{email}", saved.email);
      } catch (err) { status.textContent = err.message; }
    });
    return box;
  }

  function thumbs(view) {
    const turnId = view.id;
    const box = el("div", "thumbs");
    const up = el("button", "up");
    const down = el("button", "down");
    up.append(launcherIcon("up", 16));
    down.append(launcherIcon("down", 16));
    const comment = el("textarea");
    const submit = el("button", "send-feedback", t("widget_feedback_send", view));
    const status = el("span", "feedback-status");
    status.setAttribute("role", "status");
    comment.hidden = true; submit.hidden = true;
    comment.setAttribute("aria-label", t("widget_feedback_comment", view));
    comment.placeholder = t("widget_feedback_comment", view);
    let rating = null;
    for (const [button, value, label] of [[up, "up", "widget_thumbs_up"], [down, "down", "widget_thumbs_down"]]) {
      button.type = "button";
      button.setAttribute("aria-label", t(label, view));
      button.setAttribute("aria-pressed", "false");
      button.addEventListener("click", async () => {
        rating = value;
        up.setAttribute("aria-pressed", String(value === "up"));
        down.setAttribute("aria-pressed", String(value === "down"));
        comment.hidden = false; submit.hidden = false;
        await feedback(view, rating, "", status);
      });
    }
    submit.type = "button";
    submit.addEventListener("click", () => feedback(view, rating, comment.value, status));
    box.append(up, down, status, comment, submit);
    return box;
  }

  async function feedback(view, rating, comment, status) {
    if (!rating) return;
    const turnId = view.id;
    try {
      await api(`/api/conversations/${conversation.id}/turns/${turnId}/feedback`, {
        method: "POST", headers: authHeaders(), body: JSON.stringify({ rating: rating, comment: comment }),
      });
      status.textContent = t("widget_feedback_thanks", view);
    } catch (e) { status.textContent = e.message; }
  }

  function showError(message, retryText, where) {
    const box = el("div", "error");
    box.setAttribute("role", "alert");
    box.append(el("span", "", (message || t("widget_error_network")) + " "));
    if (retryText) {
      const retry = el("button", "retry", t("widget_retry"));
      retry.type = "button";
      retry.addEventListener("click", () => { box.remove(); sendMessage(retryText); });
      box.append(retry);
    }
    (where || log).append(box);
    scroll();
  }

  // --- staff debug view ------------------------------------------------------------------
  async function debugView(view) {
    let data;
    try { data = await api(`/api/widget/turns/${view.id}/debug`); } catch (e) { return; }
    const details = el("details", "debug");
    details.append(el("summary", "", t("widget_debug")));
    const badges = el("div", "badges");
    const b = data.badges || {};
    const fmt = (v) => (v === null || v === undefined ? "–" : (typeof v === "number" ? v.toFixed(2) : String(v)));
    badges.append(el("span", "badge-spam", t("widget_debug_spam") + " " + fmt(b.spam_score)),
      el("span", "badge-confidence", t("widget_debug_retrieval") + " " + fmt(b.retrieval_confidence)),
      el("span", "badge-searches", t("widget_debug_searches") + " " + String(b.searches || 0)));
    details.append(badges);
    const section = (name, key, value) => {
      details.append(el("div", "", t(key)));
      details.append(el("pre", "debug-" + name, typeof value === "string" ? value : JSON.stringify(value, null, 2)));
    };
    section("analysis", "widget_debug_analysis", data.analysis || "");
    section("plan", "widget_debug_plan", data.plan);
    section("guardian", "widget_debug_guardian", data.guardian);
    section("query-traces", "widget_debug_traces", data.query_traces);
    view.box.querySelector("details.debug")?.remove();
    view.box.append(details);
  }

  // --- transport ---------------------------------------------------------------------------
  // Heartbeat: while a turn is in flight the widget pings every HEARTBEAT_MS; the server answers
  // every ping, so a socket that has been silent for SILENT_MS is dead (a server gone without a
  // close frame) and is replaced at once, resuming from lastSeq. Idle, nothing is sent.
  const HEARTBEAT_MS = 10000;
  const SILENT_MS = 25000;
  let lastHeard = Date.now();
  const turnInFlight = () => pendingText !== null || [...turns.values()].some((view) => !view.finished);

  function connect() {
    const url = `${wsBase}/ws/conversations/${conversation.id}/?token=${encodeURIComponent(conversation.token)}&last_seq=${lastSeq}`;
    const ws = new WebSocket(url);
    socket = ws;
    ws.onopen = () => {
      lastHeard = Date.now();
      conn.textContent = "";
      const queued = outbox.splice(0);
      for (const text of queued) sendMessage(text);
    };
    ws.onmessage = (e) => {
      lastHeard = Date.now();
      retryDelay = 500; // a frame came: this socket works (a socket closed at once does not reset it)
      try { onFrame(JSON.parse(e.data)); } catch (err) { /* a bad frame must not stop the stream */ }
    };
    ws.onclose = () => {
      if (socket !== ws) return; // replaced already
      conn.textContent = t("widget_reconnecting");
      // 4503: Redis or the database was away during the handshake; the usual backoff applies.
      setTimeout(connect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 5000);
    };
  }

  setInterval(() => {
    if (!socket || socket.readyState !== WebSocket.OPEN || !turnInFlight()) return;
    if (Date.now() - lastHeard > SILENT_MS) {
      const dead = socket;
      socket = null; // its late onclose must not reconnect a second time
      try { dead.close(); } catch (err) { /* already closing */ }
      conn.textContent = t("widget_reconnecting");
      connect();
      return;
    }
    try { socket.send(JSON.stringify({ type: "ping" })); } catch (err) { /* the close handler reconnects */ }
  }, HEARTBEAT_MS);

  function sendMessage(text) {
    text = (text || "").trim();
    if (!text) return;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      // Still (re)connecting: keep the message and send it once the socket is open.
      outbox.push(text);
      conn.textContent = t("widget_reconnecting");
      return;
    }
    pendingText = text;
    socket.send(JSON.stringify({ type: "message", text: text }));
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value;
    if (!text.trim()) return;
    input.value = "";
    sendMessage(text);
  });

  async function start() {
    document.body.append(host);
    try {
      const config = await api(`/api/widget/config?lang=${encodeURIComponent(wanted)}`);
      strings = config.strings; staff = config.staff; language = config.language;
      labels();
      host.setAttribute("lang", language);
      log.prepend(greeting);
      greeting.after(starting);
      assistantState(config.assistant);
      await conversationEnsure();
    } catch (e) {
      labels();
      showError(e.message || t("widget_error_network"));
      const retry = el("button", "retry", t("widget_retry") || "Retry");
      retry.type = "button";
      retry.addEventListener("click", () => { log.replaceChildren(); start(); });
      log.lastChild.append(retry);
      return;
    }
    connect(); // from seq 0 on a fresh page: the replay rebuilds the conversation
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
