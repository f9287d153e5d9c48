// openbot dashboard: plain JavaScript over the console API (/api/v1), live
// through its event stream. Every text goes in through textContent; nothing
// secret is served by the API, so nothing secret is shown here.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const main = document.getElementById("main");

// ---- helpers --------------------------------------------------------------

// h builds an element: h("a", {href: "#/"}, "text", child, ...); kids may be
// nested arrays of them.
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

// api calls /api/v1 with the session cookie; a state change carries the CSRF
// token. A 401 means the session ended: reload to show the sign-in form.
async function api(path, opts) {
  opts = opts || {};
  const headers = { Accept: "application/json" };
  if (opts.body !== undefined) headers["Content-Type"] = "application/json";
  if (opts.method && opts.method !== "GET") headers["X-CSRF-Token"] = csrf;
  const resp = await fetch("/api/v1" + path, {
    method: opts.method || "GET", headers, credentials: "same-origin",
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  if (resp.status === 401) { location.reload(); throw new APIError(401, "signed out"); }
  let data = null;
  try { data = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) throw new APIError(resp.status, (data && data.error) || resp.statusText);
  return data;
}

function rel(t) {
  const d = new Date(t);
  if (isNaN(d) || d.getFullYear() < 2000) return "";
  const s = Math.round((Date.now() - d.getTime()) / 1000);
  const a = Math.abs(s), fut = s < 0;
  let v;
  if (a < 45) v = "just now";
  else if (a < 3600) v = Math.round(a / 60) + " min";
  else if (a < 86400) v = Math.round(a / 3600) + " h";
  else if (a < 86400 * 30) v = Math.round(a / 86400) + " d";
  else return d.toLocaleDateString();
  if (v === "just now") return v;
  return fut ? "in " + v : v + " ago";
}

// when is a timestamp: relative, the absolute time on hover.
function when(t) {
  const d = new Date(t);
  if (!t || isNaN(d) || d.getFullYear() < 2000) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" }) }, rel(t));
}
setInterval(() => {
  for (const el of document.querySelectorAll("time[datetime]")) el.textContent = rel(el.getAttribute("datetime"));
}, 30000);

const num = (n) => (n || 0).toLocaleString();
function tokens(u) {
  if (!u) return 0;
  return (u.prompt_tokens || 0) + (u.completion_tokens || 0);
}
function dur(ms) {
  if (!ms || ms < 0) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  return Math.round(ms / 60000) + " min";
}
const handle = (id) => (id || "").startsWith("bot:") ? "@" + id.slice(4) : (id || "");
// Thread titles by id, for links that know only the id (filled by thread
// lists, else fetched once per page load).
const titles = new Map();
function threadLink(id, label) {
  if (!id) return "";
  id = Number(id);
  if (label) titles.set(id, Promise.resolve(label));
  const a = h("a", { href: "#/threads/" + id, title: "Thread #" + id }, label || "#" + id);
  if (!label) {
    if (!titles.has(id)) titles.set(id, api("/threads/" + id).then((t) => t.title || t.key).catch(() => null));
    titles.get(id).then((t) => { if (t) a.textContent = t; });
  }
  return a;
}
const badge = (s) => h("span", { class: "status " + s }, (s || "").replace("_", " "));
const td = (label, ...kids) => h("td", { "data-label": label }, ...kids);
function table(cols, rows) {
  return h("table", { class: "stack" },
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { class: c.endsWith("#") ? "num" : "" }, c.replace("#", ""))))),
    h("tbody", {}, rows));
}
const empty = (text) => h("p", { class: "empty" }, text);

// flash shows the result of an action above the page, across redraws, until
// the next one.
function flash(text, bad) {
  const el = document.getElementById("flash");
  el.textContent = text;
  el.classList.toggle("error", !!bad);
  el.hidden = false;
}

// confirming holds the steering buttons clicked once, by act and target, so a
// live redraw between the two clicks keeps the question.
const confirming = new Set();

// steer is a button that changes the team: the first click asks to confirm
// ("Really …?"), the second sends it; the result (or the refusal) shows in the
// flash line, and the view redraws from the store. target names what it acts on.
function steer(label, really, act, target, send) {
  const key = act + ":" + target;
  const sure = confirming.has(key);
  const b = h("button", { type: "button", class: "steer" + (sure ? " danger" : ""), "data-act": act }, sure ? really : label);
  b.addEventListener("click", async (e) => {
    e.preventDefault();
    e.stopPropagation(); // inside a run's summary: no toggle
    if (!confirming.has(key)) {
      confirming.add(key);
      b.textContent = really;
      b.classList.add("danger");
      return;
    }
    confirming.delete(key);
    b.disabled = true;
    try {
      flash(await send());
    } catch (err) {
      flash("Not done: " + err.message, true);
    }
    redraw();
  });
  return b;
}
const ended = (status) => ["completed", "failed", "cancelled"].includes(status);

// ---- views ----------------------------------------------------------------

// A view renders into a fresh element; interested(type, data) says whether a
// live event should redraw it.
const views = {};

views.team = {
  title: "Team",
  async render() {
    const [bots, runs, pending] = await Promise.all([
      api("/bots"), api("/runs?limit=10"), api("/questions?status=pending&limit=100"),
    ]);
    const out = h("div", {}, h("h1", {}, "Team"));
    if (pending.items.length) {
      out.append(h("p", { class: "question" }, h("a", { href: "#/approvals" },
        pending.items.length + (pending.items.length === 1 ? " question waits" : " questions wait") + " for an answer →")));
    }
    const rows = bots.items.map((b) => {
      const where = [];
      for (const t of b.working_threads || []) where.push(h("div", { class: "small" }, "working in ", threadLink(t)));
      for (const t of b.parked_threads || []) where.push(h("div", { class: "small" }, "waiting in ", threadLink(t)));
      return h("tr", {},
        td("Bot", h("div", { class: "lead" }, h("b", {}, b.name || b.handle), " ", h("span", { class: "muted" }, "@" + b.handle)),
          b.model ? h("div", { class: "small muted" }, b.model) : ""),
        td("Now", badge(b.paused ? "paused" : b.status), where),
        td("Queue", num(b.queue_depth)),
        td("Runs today", num(b.runs_today)),
        td("Tokens today", num(tokens(b.usage_today))),
        td("", b.paused
          ? steer("Resume", "Really resume @" + b.handle + "?", "resume", b.handle, () =>
            api("/bots/" + encodeURIComponent(b.handle) + "/resume", { method: "POST" }).then(() => "@" + b.handle + " resumed"))
          : steer("Pause", "Really pause @" + b.handle + "?", "pause", b.handle, () =>
            api("/bots/" + encodeURIComponent(b.handle) + "/pause", { method: "POST" }).then(() => "@" + b.handle + " paused: it starts no new run"))));
    });
    out.append(bots.items.length ? table(["Bot", "Now", "Queue", "Runs today", "Tokens today", ""], rows) : empty("No bots."));
    out.append(h("h2", {}, "Recent runs"));
    out.append(runs.items.length ? runsTable(runs.items) : empty("No runs yet."));
    return out;
  },
  interested: (type) => type !== "message.posted",
};

function runsTable(items) {
  return table(["Run", "Bot", "Thread", "Status", "Tokens#", "Took#", "Started"], items.map((r) =>
    h("tr", { class: r.status === "failed" ? "error" : "" },
      td("Run", h("a", { href: "#/threads/" + Number(r.thread) + "/run/" + Number(r.id) }, "#" + r.id)),
      td("Bot", handle(r.bot)),
      td("Thread", threadLink(r.thread)),
      td("Status", badge(r.status), r.error ? h("div", { class: "small error" }, r.error) : ""),
      h("td", { class: "num", "data-label": "Tokens" }, num(tokens(r.usage))),
      h("td", { class: "num", "data-label": "Took" }, dur(r.duration_ms)),
      td("Started", when(r.started || r.created)))));
}

views.threads = {
  title: "Threads",
  q: "",
  async render() {
    const q = this.q;
    const out = h("div", {}, h("h1", {}, "Threads"));
    const input = h("input", { type: "search", placeholder: "Search titles, keys and messages", value: q, "aria-label": "Search threads" });
    const form = h("form", { class: "bar", onsubmit: (e) => { e.preventDefault(); this.q = input.value.trim(); redraw(true); } },
      input, h("button", { type: "submit" }, "Search"));
    out.append(form);
    const list = h("div");
    out.append(list);
    const load = async (cursor) => {
      const p = await api("/threads?limit=50" + (q ? "&q=" + encodeURIComponent(q) : "") + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      const rows = p.items.map((t) => h("tr", { class: t.pending_questions ? "warn" : "" },
        td("Thread", h("div", { class: "lead" }, threadLink(t.id, t.title || t.key)), t.title ? h("div", { class: "small muted mono" }, t.key) : ""),
        td("Where", (t.platforms || []).join(", ")),
        h("td", { class: "num", "data-label": "Messages" }, num(t.messages)),
        td("Waiting", t.pending_questions ? badge("pending") : ""),
        td("Updated", when(t.updated))));
      if (!cursor) list.replaceChildren(rows.length ? table(["Thread", "Where", "Messages#", "Waiting", "Updated"], rows) : empty(q ? "No thread matches." : "No threads yet."));
      else list.querySelector("tbody").append(...rows);
      list.querySelector(".more")?.remove();
      if (p.next) list.append(h("button", { class: "more", onclick: () => load(p.next) }, "More"));
    };
    await load("");
    return out;
  },
  interested: (type) => type === "message.posted" || type.startsWith("question.") || type === "run.started",
};

// The thread view: messages and runs in time order; a run is a collapsible
// timeline of its model calls, tool calls with their results and status
// changes. Open runs stay open across live redraws.
views.thread = {
  title: "Thread",
  open: new Set(),
  runs: new Set(),
  async render(id, focusRun) {
    if (focusRun) this.open.add(Number(focusRun));
    const [t, pending] = await Promise.all([api("/threads/" + id), api("/questions?status=pending&limit=100")]);
    let msgs = t.messages_page.items, next = t.messages_page.next;
    for (let i = 0; next && i < 20; i++) { // up to ~1000 messages
      const p = await api("/threads/" + id + "/messages?limit=50&after=" + encodeURIComponent(msgs[msgs.length - 1].id));
      msgs = msgs.concat(p.items);
      next = p.next;
    }
    t.runs = t.runs || []; // a thread no run has touched yet
    this.runs = new Set(t.runs.map((r) => r.id));
    const details = {};
    await Promise.all(t.runs.filter((r) => this.open.has(r.id)).map(async (r) => { details[r.id] = await api("/runs/" + r.id); }));
    const names = {};
    for (const p of t.people || []) names[p.id] = p.name;
    const questions = pending.items.filter((q) => q.thread === t.id);

    const out = h("div", {});
    out.append(h("h1", {}, t.title || t.key));
    out.append(h("p", { class: "meta" },
      h("span", { class: "mono" }, t.key), " · ", (t.platforms || []).join(", "), " · ",
      (t.people || []).map((p) => p.name || handle(p.id)).join(", "), " · started ", when(t.created)));
    const bots = (t.people || []).filter((p) => (p.id || "").startsWith("bot:"));
    if (bots.length) {
      out.append(h("p", { class: "meta" }, bots.map((p) => {
        const bot = p.id.slice(4);
        return [steer("Stop @" + bot + " here", "Really stop @" + bot + " in this thread?", "stop", bot + "@" + t.id, () =>
          api("/threads/" + Number(t.id) + "/stop", { method: "POST", body: { bot } })
            .then((r) => "stopped: " + (r.runs || []).length + " run(s) cancelled, " + (r.items || 0) + " queued item(s) dropped")), " "];
      })));
    }
    const todos = Object.entries(t.todos || {}).filter(([, l]) => l && l.length);
    for (const [bot, list] of todos) {
      out.append(h("details", {}, h("summary", { class: "meta" }, "To-do of " + handle(bot) + " (" + list.length + ")"),
        h("ul", {}, list.map((it) => h("li", {}, (it.status === "done" ? "✓ " : it.status === "in_progress" ? "▸ " : "○ ") + it.text)))));
    }
    const items = msgs.map((m) => ({ at: new Date(m.created), k: 0, m }))
      .concat(t.runs.map((r) => ({ at: new Date(r.created), k: 1, r })))
      .sort((a, b) => (a.at - b.at) || (a.k - b.k));
    const feed = h("div", { class: "feed" });
    for (const it of items) {
      if (it.m) feed.append(message(it.m, names));
      else {
        feed.append(this.run(it.r, details[it.r.id]));
        for (const q of questions.filter((q) => q.run === it.r.id)) feed.append(questionCard(q, true));
      }
    }
    for (const q of questions.filter((q) => !this.runs.has(q.run))) feed.append(questionCard(q, true));
    out.append(items.length ? feed : empty("No messages."));
    return out;
  },
  run(r, d) {
    const el = h("details", { class: "run", "data-run": r.id, open: this.open.has(r.id) },
      h("summary", {}, h("b", {}, "Run #" + r.id), " by ", handle(r.bot), " · ", badge(r.status),
        r.usage && r.usage.model_calls ? " · " + r.usage.model_calls + " model call" + (r.usage.model_calls === 1 ? "" : "s") : "",
        tokens(r.usage) ? " · " + num(tokens(r.usage)) + " tokens" : "",
        r.duration_ms ? " · " + dur(r.duration_ms) : "", " · ", when(r.started || r.created),
        ended(r.status) ? "" : [" ", steer("Cancel run", "Really cancel run #" + r.id + "?", "cancel", r.id, () =>
          api("/runs/" + Number(r.id) + "/cancel", { method: "POST" }).then((x) => "run #" + Number(x.id) + " " + x.status))]),
      r.error ? h("p", { class: "error small" }, r.error) : "",
      d ? timeline(d) : h("p", { class: "muted small" }, "Loading…"));
    let loaded = !!d; // drawn open with its timeline: the first toggle event needs no fetch
    el.addEventListener("toggle", async () => {
      if (!el.open) { this.open.delete(r.id); return; }
      this.open.add(r.id);
      if (loaded) { loaded = false; return; }
      try {
        const detail = await api("/runs/" + r.id);
        el.lastChild.replaceWith(timeline(detail));
      } catch (e) { el.lastChild.replaceWith(h("p", { class: "error" }, e.message)); }
    });
    return el;
  },
  interested(type, data, id) {
    if (!data) return false;
    if (String(data.thread) === String(id)) return true;
    return (type === "run.step") && this.runs.has(data.run);
  },
};

function message(m, names) {
  const bot = (m.sender || "").startsWith("bot:");
  return h("div", { class: "msg" + (bot ? " bot" : ""), "data-message": m.id },
    h("div", {}, h("span", { class: "who" }, m.sender_name || names[m.sender] || m.sender),
      bot ? h("span", { class: "muted" }, " " + handle(m.sender)) : "",
      m.kind ? h("span", { class: "status" }, m.kind.replace("_", " ")) : "",
      " ", h("span", { class: "meta" }, when(m.created))),
    h("div", { class: "text" }, m.text));
}

function timeline(d) {
  const steps = d.timeline || [];
  if (!steps.length) return h("p", { class: "muted small" }, "No steps recorded.");
  return h("ol", { class: "timeline" }, steps.map((s) => {
    switch (s.kind) {
      case "model_call":
        return h("li", { "data-kind": "model_call" }, h("span", { class: "kind" }, "Model call"), " ",
          h("span", { class: "meta" }, [s.model, num(s.prompt_tokens) + " in / " + num(s.completion_tokens) + " out",
            dur(s.duration_ms), s.tool_calls ? s.tool_calls + " tool call" + (s.tool_calls === 1 ? "" : "s") : "",
            s.retries ? s.retries + " retries" : "", s.finish_reason].filter(Boolean).join(" · ")),
          s.error ? h("div", { class: "error small" }, s.error) : "");
      case "tool":
        return h("li", { "data-kind": "tool", "data-tool": s.tool },
          h("span", { class: "kind" }, "Tool "), h("code", {}, s.tool), " ",
          h("span", { class: "meta" }, [dur(s.duration_ms), s.done ? "" : s.not_run ? "not run: " + s.not_run : "no result yet"].filter(Boolean).join(" · ")),
          h("div", { class: "label" }, "Arguments"), h("pre", { class: "args" }, pretty(s.args)),
          s.done ? [h("div", { class: "label" }, "Result" + (s.result_bytes ? " (" + num(s.result_bytes) + " bytes)" : "")),
            h("pre", { class: "result" + (s.error ? " error" : "") }, s.result)] : "");
      case "status": {
        const q = s.question;
        return h("li", { "data-kind": "status", "data-tool": q && q.tool ? q.tool : null }, h("span", { class: "kind" }, "Status "), badge(s.status),
          q && q.tool ? [h("div", {}, "Asks approval to run ", h("code", {}, q.tool), q.decision ? h("span", { class: "meta" }, " — " + q.decision) : ""),
            ...approvalDetails(q)] : "",
          q && !q.tool ? h("div", { class: "small" }, "Asks: " + q.text, q.decision ? " — " + q.decision : "") : "",
          s.error ? h("div", { class: "error small" }, s.error) : "");
      }
      default:
        return h("li", { "data-kind": s.kind }, h("span", { class: "kind" }, s.kind), " ", h("span", { class: "meta" }, when(s.at)),
          s.payload ? h("pre", {}, JSON.stringify(s.payload, null, 2)) : "");
    }
  }));
}

function pretty(s) {
  if (s === undefined || s === null) return "";
  if (typeof s !== "string") return JSON.stringify(s, null, 2);
  try { return JSON.stringify(JSON.parse(s), null, 2); } catch (e) { return s; }
}

// approvalDetails is what an approval asks to run, as every platform shows it:
// the warnings about the call, the shell command as it will run (or the tool's
// arguments as JSON), whole, and what the call can reach.
function approvalDetails(q) {
  const long = (s) => s.length > 2000 ? h("div", { class: "meta" }, num(s.length) + " characters: scroll to read them all") : "";
  return [
    (q.warnings || []).map((w) => h("p", { class: "warning", role: "alert" }, "⚠ " + w)),
    q.command ? [h("div", { class: "label" }, "Command"), h("pre", { class: "args command" }, q.command), long(q.command)]
      : q.args ? [h("div", { class: "label" }, "Arguments"), h("pre", { class: "args" }, pretty(q.args)), long(pretty(q.args))] : "",
    q.reach ? h("div", { class: "meta reach" }, "Reach: " + q.reach) : "",
  ].flat(Infinity);
}

// questionCard shows a question with its answer controls.
function questionCard(q, inThread) {
  const status = h("p", { class: "small", role: "status" });
  const send = async (body, btns) => {
    btns.forEach((b) => { b.disabled = true; });
    status.textContent = "Sending…";
    try {
      await api("/questions/" + q.id + "/answer", { method: "POST", body });
      status.textContent = "Answered.";
      refreshPending();
      redraw();
    } catch (e) {
      status.className = "small error";
      status.textContent = e.status === 403 ? "Refused: " + e.message + " (the console answers as admin.identity, which must be an approver)" : e.message;
      btns.forEach((b) => { b.disabled = false; });
    }
  };
  const actions = h("div", { class: "actions" });
  const btns = [];
  if (q.kind === "approval") {
    btns.push(h("button", { class: "primary", "data-answer": "approve", onclick: () => send({ decision: "approve" }, btns) }, "Approve"));
    btns.push(h("button", { "data-answer": "reject", onclick: () => send({ decision: "reject" }, btns) }, "Reject"));
  } else if (q.choices && q.choices.length) {
    q.choices.forEach((c, i) => btns.push(h("button", { onclick: () => send({ choice: i }, btns) }, c)));
  } else {
    const input = h("input", { type: "text", placeholder: "Your answer", "aria-label": "Answer" });
    btns.push(h("button", { class: "primary", onclick: () => input.value.trim() && send({ text: input.value.trim() }, btns) }, "Send"));
    actions.append(input);
  }
  actions.append(...btns);
  const wide = (q.command || pretty(q.args) || "").length > 300; // a long command gets the page's width
  return h("div", { class: "card question" + (wide ? " wide" : ""), "data-question": q.id },
    h("h3", {}, handle(q.bot), q.kind === "approval" ? " asks to run " : " asks", q.tool ? h("code", {}, q.tool) : ""),
    q.text && q.kind !== "approval" ? h("p", {}, q.text) : "",
    q.kind === "approval" ? approvalDetails(q) : "",
    h("div", { class: "meta" }, inThread ? "" : ["in ", threadLink(q.thread), " · "], "asked ", when(q.created),
      q.expires && new Date(q.expires).getFullYear() > 2000 ? [" · expires ", when(q.expires)] : ""),
    actions, status);
}

views.approvals = {
  title: "Approvals",
  async render() {
    const [pending, decided] = await Promise.all([api("/questions?status=pending&limit=100"), api("/questions?status=decided&limit=30")]);
    const out = h("div", {}, h("h1", {}, "Approvals"));
    out.append(pending.items.length ? h("div", { class: "cards" }, pending.items.map((q) => questionCard(q, false))) : empty("Nothing waits for an answer."));
    out.append(h("h2", {}, "Decided"));
    out.append(decided.items.length ? table(["Question", "Bot", "Thread", "Decision", "When"], decided.items.map((q) =>
      h("tr", {},
        td("Question", q.tool ? ["Run ", h("code", {}, q.tool)] : q.text),
        td("Bot", handle(q.bot)),
        td("Thread", threadLink(q.thread)),
        td("Decision", q.decision || q.status, q.answered_via ? h("span", { class: "muted small" }, " via " + q.answered_via) : ""),
        td("When", when(q.answered_at || q.created))))) : empty("No decided questions."));
    return out;
  },
  interested: (type) => type.startsWith("question."),
};

views.activity = {
  title: "Activity",
  level: "",
  async render() {
    const out = h("div", {}, h("h1", {}, "Activity"));
    const sel = h("select", { "aria-label": "Level", onchange: () => { this.level = sel.value; redraw(true); } },
      ["", "info", "warn", "error"].map((l) => h("option", { value: l, selected: l === this.level }, l ? "Level: " + l : "All levels")));
    out.append(h("div", { class: "bar" }, sel));
    const list = h("div");
    out.append(list);
    const load = async (cursor) => {
      const p = await api("/activity?limit=100" + (this.level ? "&level=" + this.level : "") + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
      const rows = p.items.map((a) => h("tr", { class: a.level === "error" ? "error" : a.level === "warn" ? "warn" : "" },
        td("When", when(a.at)),
        td("Event", h("span", { class: "mono" }, a.event)),
        td("What", a.summary),
        td("Thread", threadLink(a.thread))));
      if (!cursor) list.replaceChildren(rows.length ? table(["When", "Event", "What", "Thread"], rows) : empty("No activity."));
      else list.querySelector("tbody").append(...rows);
      list.querySelector(".more")?.remove();
      if (p.next) list.append(h("button", { class: "more", onclick: () => load(p.next) }, "More"));
    };
    await load("");
    return out;
  },
  interested: (type) => type !== "run.step" && type !== "message.posted" && type !== "bot.status",
};

// cost renders micro-units of the prices' currency (the API's cost_micros) as
// an amount with at most six decimals, trailing zeros kept to two, as the CLI
// and /usage do (core.FormatMicros); /api/v1 does not name the currency.
function cost(micros) {
  let m = micros || 0;
  const sign = m < 0 ? "-" : "";
  m = Math.abs(m);
  let frac = String(m % 1e6).padStart(6, "0").replace(/0+$/, "");
  while (frac.length < 2) frac += "0";
  return sign + Math.floor(m / 1e6).toLocaleString() + "." + frac;
}

// views.usage sums the usage ledger (one entry per model call, priced with
// the shipped prices and cost.prices) by bot, by llm profile and model (with
// the provider, the models that answered, the key labels and the calls a
// backup profile served) and by UTC day over the API's default window, 30 days.
views.usage = {
  title: "Usage",
  async render() {
    const [byDay, byBot, byModel] = await Promise.all([api("/usage?by=day&limit=31"), api("/usage?by=bot&limit=100"), api("/usage?by=model&limit=100")]);
    const rows = (items, label, link, extra) => items.map((u) => h("tr", {},
      td(label, h("span", { class: "lead" }, link ? link(u.key) : u.key)),
      ...(extra ? extra(u) : []),
      h("td", { class: "num", "data-label": "Model calls" }, num(u.model_calls)),
      h("td", { class: "num", "data-label": "Runs" }, num(u.runs)),
      h("td", { class: "num", "data-label": "Input tokens" }, num(u.prompt_tokens)),
      h("td", { class: "num", "data-label": "Cached" }, num(u.cached_tokens)),
      h("td", { class: "num", "data-label": "Output tokens" }, num(u.completion_tokens)),
      h("td", { class: "num", "data-label": "Cost" }, cost(u.cost_micros))));
    const cols = (first, ...more) => [first, ...more, "Model calls#", "Runs#", "Input tokens#", "Cached#", "Output tokens#", "Cost#"];
    const modelCells = (u) => [td("Provider", u.provider || "-"), td("Served by", (u.served || []).join(", ") || "-"),
      td("Keys", (u.keys || []).join(", ") || "-"), h("td", { class: "num", "data-label": "Fallbacks" }, num(u.fallbacks || 0))];
    const total = byBot.items.reduce((t, u) => ({ calls: t.calls + (u.model_calls || 0), tokens: t.tokens + tokens(u), cost: t.cost + (u.cost_micros || 0) }),
      { calls: 0, tokens: 0, cost: 0 });
    return h("div", {}, h("h1", {}, "Usage"),
      h("p", { class: "muted" }, "Model calls recorded in the usage ledger in the last 30 days. Runs counts the runs that made them; " +
        "input tokens include the cached ones; cost is priced with the shipped prices and cost.prices, in their currency. " +
        "Fallbacks counts the calls a backup profile of a bot's chain served."),
      h("p", { class: "usage-total" }, "Total: " + num(total.calls) + " model call" + (total.calls === 1 ? "" : "s") + ", " +
        num(total.tokens) + " tokens, cost " + cost(total.cost) + (byBot.next ? " (first 100 bots)" : "")),
      h("h2", {}, "By bot"), byBot.items.length ? table(cols("Bot"), rows(byBot.items, "Bot", handle)) : empty("No usage."),
      h("h2", {}, "By model"), byModel.items.length ?
        table(cols("Profile/model", "Provider", "Served by", "Keys", "Fallbacks#"), rows(byModel.items, "Profile/model", null, modelCells)) : empty("No usage."),
      h("h2", {}, "By day (UTC)"), byDay.items.length ? table(cols("Day"), rows(byDay.items, "Day")) : empty("No usage."));
  },
  interested: (type) => type === "run.finished",
};

// views.memory lists one bot's memories with where each came from,
// and edits or deletes one through PUT and DELETE /api/v1/memories/{id}. While
// a note is being edited, live events do not redraw the view.
views.memory = {
  title: "Memory",
  editing: false,
  async render(handle) {
    const bots = await api("/bots");
    handle = handle || (bots.items[0] && bots.items[0].handle);
    const out = h("div", {}, h("h1", {}, "Memory"),
      h("p", { class: "bots" }, bots.items.map((b) => [h("a", { href: "#/memory/" + encodeURIComponent(b.handle), class: b.handle === handle ? "on" : "" }, "@" + b.handle), " "])));
    if (!handle) return out;
    const mems = await api("/bots/" + encodeURIComponent(handle) + "/memories");
    this.editing = false;
    const source = (m) => [m.source, m.run ? h("span", { class: "muted" }, " (run #" + Number(m.run) + ")") : ""];
    const rows = mems.items.map((m) => {
      const text = h("div", { class: "memory-text" }, m.text);
      const cell = td("Note", text);
      const edit = h("button", { type: "button", "data-act": "edit", onclick: () => {
        this.editing = true;
        const area = h("textarea", { rows: 3 }, m.text);
        const save = h("button", { type: "button", "data-act": "save", onclick: async () => {
          try {
            await api("/memories/" + Number(m.id), { method: "PUT", body: { text: area.value } });
            this.editing = false;
            redraw();
          } catch (e) { cell.append(h("p", { class: "error" }, "Could not save: " + e.message)); }
        } }, "Save");
        const cancel = h("button", { type: "button", class: "link", onclick: () => { this.editing = false; redraw(); } }, "Cancel");
        cell.replaceChildren(area, h("div", {}, save, " ", cancel));
      } }, "Edit");
      const del = h("button", { type: "button", "data-act": "delete", onclick: async () => {
        if (del.dataset.sure !== "yes") { this.editing = true; del.dataset.sure = "yes"; del.textContent = "Really delete"; return; }
        try {
          await api("/memories/" + Number(m.id), { method: "DELETE" });
          this.editing = false;
          redraw();
        } catch (e) { cell.append(h("p", { class: "error" }, "Could not delete: " + e.message)); }
      } }, "Delete");
      return h("tr", { "data-memory": Number(m.id) },
        h("td", { class: "num", "data-label": "#" }, "#" + Number(m.id)),
        cell, td("Source", source(m)), td("Updated", when(m.updated)), td("", edit, " ", del));
    });
    out.append(h("p", { class: "muted" }, "@" + handle + "'s notes, kept across threads; reflection and the bot's manage_memory tool write them."));
    out.append(rows.length ? table(["#", "Note", "Source", "Updated", ""], rows) : empty("No memories."));
    return out;
  },
  interested(type) { return !this.editing && type === "activity"; },
};

// ---- routing and live updates ----------------------------------------------

let current = null; // {view, args}
let drawing = false, again = false, timer = 0;

function parse() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  if (parts[0] === "threads" && parts[1]) return { name: "thread", view: views.thread, args: [parts[1], parts[2] === "run" ? parts[3] : undefined] };
  if (parts[0] === "memory") return { name: "memory", view: views.memory, args: [parts[1] ? decodeURIComponent(parts[1]) : undefined] };
  const name = views[parts[0]] && parts[0] !== "thread" ? parts[0] : "team";
  return { name, view: views[name], args: [] };
}

// redraw renders the current view again; fresh (a new page) shows it from the
// top, otherwise the scroll position is kept.
async function redraw(fresh) {
  if (drawing) { again = true; return; }
  drawing = true;
  const cur = current;
  try {
    const el = await cur.view.render(...cur.args);
    if (cur !== current) return;
    const y = window.scrollY;
    main.replaceChildren(el);
    if (!fresh) window.scrollTo(0, y);
    else if (cur.args[1]) document.querySelector('[data-run="' + Number(cur.args[1]) + '"]')?.scrollIntoView({ block: "start" });
    document.title = cur.view.title + " · openbot";
  } catch (e) {
    if (cur === current) main.replaceChildren(h("p", { class: "error" }, e.status === 404 ? "Not found." : "Could not load: " + e.message));
  } finally {
    drawing = false;
    if (again) { again = false; redraw(); }
  }
}

function navigate() {
  current = parse();
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("on", a.dataset.nav === (current.name === "thread" ? "threads" : current.name));
  if (current.name === "thread") views.thread.open = new Set();
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  document.getElementById("flash").hidden = true; // a result belongs to the page it was shown on
  confirming.clear();
  redraw(true);
}

async function refreshPending() {
  try {
    const p = await api("/questions?status=pending&limit=100");
    const el = document.getElementById("pending");
    el.hidden = !p.items.length;
    el.textContent = p.items.length + (p.next ? "+" : "");
  } catch (e) { /* shown by the view */ }
}

function onEvent(type, data) {
  if (type.startsWith("question.")) refreshPending();
  if (!current || !current.view.interested.call(current.view, type, data, current.args[0])) return;
  clearTimeout(timer);
  timer = setTimeout(() => redraw(), 250);
}

function live() {
  const dot = document.getElementById("live");
  const es = new EventSource("/api/v1/events");
  es.onopen = () => { dot.classList.add("on"); dot.title = "Live updates: on"; };
  es.onerror = () => {
    dot.classList.remove("on");
    dot.title = "Live updates: reconnecting";
    if (es.readyState === EventSource.CLOSED) { // refused (signed out?): check, retry later
      api("/").catch(() => {});
      setTimeout(live, 5000);
    }
  };
  for (const t of ["message.posted", "run.started", "run.step", "run.finished", "question.asked", "question.decided", "bot.status", "activity"]) {
    es.addEventListener(t, (ev) => {
      let data = null;
      try { data = JSON.parse(ev.data); } catch (e) { /* ignore */ }
      onEvent(t, data);
    });
  }
}

window.addEventListener("hashchange", navigate);
navigate();
refreshPending();
live();
