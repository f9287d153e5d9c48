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
const cmpStr = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const ended = (status) => ["completed", "failed", "cancelled"].includes(status);

// ---- views ----------------------------------------------------------------

// A view renders into a fresh element; interested(type, data) says whether a
// live event should redraw it.
const views = {};

views.team = {
  title: "Team",
  async render() {
    const [bots, runs, pending, chans] = await Promise.all([
      api("/bots"), api("/runs?limit=10"), api("/questions?status=pending&limit=100"),
      api("/channels").catch(() => null), // not served by every API
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
      return h("tr", { "data-bot": b.handle },
        td("Bot", h("div", { class: "lead" }, h("b", {}, b.name || b.handle), " ", h("span", { class: "muted" }, "@" + b.handle)),
          b.model ? h("div", { class: "small muted" }, b.model) : "",
          b.fixed_prompt_tokens ? h("div", { class: b.fixed_prompt_large ? "small question" : "small muted", "data-fixed-prompt": "" },
            "fixed prompt " + num(b.fixed_prompt_tokens) + " tokens" + (b.fixed_prompt_large ? " (large: every call sends it)" : "")) : ""),
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
    if (chans && chans.items.length) {
      out.append(h("section", { id: "channels", "aria-label": "Channels" }, h("h2", {}, "Channels"), channelsTable(chans.items)));
    }
    out.append(h("h2", {}, "Recent runs"));
    out.append(runs.items.length ? runsTable(runs.items) : empty("No runs yet."));
    return out;
  },
  interested: (type) => type !== "message.posted",
};

// ago is the age of a timestamp in seconds, minutes or hours ("—" when unknown).
function ago(t) {
  const d = new Date(t);
  if (!t || isNaN(d) || d.getFullYear() < 2000) return h("span", { class: "muted" }, "—");
  const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
  const text = s < 120 ? s + " s ago" : s < 7200 ? Math.round(s / 60) + " min ago" : Math.round(s / 3600) + " h ago";
  return h("time", { datetime: d.toISOString(), title: d.toLocaleString() }, text);
}

// secs is a near timestamp to the second, past or future ("9 s ago", "in 9 s",
// minutes and hours further out), the absolute time on hover; the table's own
// 5 s redraw keeps it current.
function secs(t) {
  const d = new Date(t);
  const s = Math.round((d.getTime() - Date.now()) / 1000), a = Math.abs(s);
  const v = a < 120 ? a + " s" : a < 7200 ? Math.round(a / 60) + " min" : Math.round(a / 3600) + " h";
  return h("span", { title: d.toLocaleString() }, s > 0 ? "in " + v : v + " ago");
}

// ingressCell names the process holding the account's long-lived ingress
// (marked when it is this one), since when, and when its lease expires unless
// renewed; "—" for webhook modes and while no process holds it.
function ingressCell(g) {
  if (!g) return td("Ingress", h("span", { class: "muted" }, "—"));
  const lapsed = g.until && new Date(g.until).getTime() <= Date.now();
  const facts = [];
  if (g.since) facts.push(["taken ", secs(g.since)]);
  if (g.until) facts.push(lapsed ? ["lease lapsed ", secs(g.until)] : ["lease expires ", secs(g.until)]);
  return td("Ingress",
    h("div", {}, h("span", { class: "mono", "data-process": g.process }, g.process),
      g.this_process ? [" ", h("span", { class: "status ingress-this" }, "this process")] : ""),
    facts.length ? h("div", { class: "small" + (lapsed ? " error" : " muted") }, facts.flatMap((f, i) => i ? [" · ", ...f] : f)) : "");
}

// channelsTable shows each account's state, the process holding its ingress,
// its last traffic each way, the platform's rate limits and the undelivered
// messages of its delivery lane.
function channelsTable(items) {
  return table(["Account", "State", "Ingress", "Last in", "Last out", "Rate limited#", "Backlog#"], items.map((c) =>
    h("tr", { "data-account": c.account, class: c.state === "failing" ? "error" : c.state === "reconnecting" ? "warn" : "" },
      td("Account", h("span", { class: "lead mono" }, c.account),
        c.watchdog_ms ? h("div", { class: "small muted" }, "watchdog after " + dur(c.watchdog_ms) + " of silence") : ""),
      td("State", h("span", { class: "status channel-" + c.state }, c.state), c.detail ? h("div", { class: "small" + (c.state === "failing" ? " error" : "") }, c.detail) : ""),
      ingressCell(c.ingress),
      td("Last in", ago(c.last_in)),
      td("Last out", ago(c.last_out)),
      h("td", { class: "num", "data-label": "Rate limited" }, c.rate_limited ? num(c.rate_limited) + " × (" + dur(c.rate_limit_wait_ms) + ")" : "0"),
      h("td", { class: "num", "data-label": "Backlog" }, num(c.backlog)))));
}

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
    if (drafting.thread === Number(t.id)) feed.append(draftBox());
    out.append(items.length ? feed : empty("No messages."));
    out.append(composer(Number(t.id)));
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

// ---- try a bot: the composer, the reply being written ---------------------

// drafting is the thread whose reply the page follows while a bot writes it
// (GET /threads/ID/draft every 300 ms, shown in #draft), until the reply is
// stored or 10 minutes pass.
const drafting = { thread: 0, until: 0, seen: false, text: "", bot: "" };
const composing = { text: "", focus: false }; // kept across live redraws

function follow(thread) {
  Object.assign(drafting, { thread: Number(thread), until: Date.now() + 600000, seen: false, text: "", bot: "" });
}

function draftBox() {
  return h("div", { id: "draft", class: "msg bot draft", "aria-live": "polite", hidden: !drafting.text },
    h("div", {}, h("span", { class: "who" }, drafting.bot ? "@" + drafting.bot : "The bot"), " ", h("span", { class: "meta" }, "is writing…")),
    h("div", { class: "text" }, drafting.text));
}

setInterval(async () => {
  if (!drafting.thread) return;
  if (Date.now() > drafting.until) { drafting.thread = 0; return; }
  try {
    const d = await api("/threads/" + drafting.thread + "/draft");
    if (d.text) Object.assign(drafting, { seen: true, text: d.text, bot: d.bot || "" });
    else if (drafting.seen) { drafting.thread = 0; drafting.text = ""; redraw(); return; } // the reply is stored
    const box = document.getElementById("draft");
    if (box) box.replaceWith(draftBox());
  } catch (e) { /* the next tick tries again */ }
}, 300);

// composer is the message box under a thread (thread) or on the new chat page
// (0, with bots to choose from); Ctrl+Enter sends too.
function composer(thread, bots) {
  const status = h("p", { class: "small", role: "status" });
  const area = h("textarea", { rows: 3, "aria-label": "Message", placeholder: thread ? "Write to the bots here, @handle to address one" : "What should the bot do?",
    oninput: () => { composing.text = area.value; },
    onfocus: () => { composing.focus = true; }, onblur: () => { composing.focus = false; } });
  area.value = composing.text;
  if (composing.focus) requestAnimationFrame(() => area.focus());
  const pick = bots ? h("select", { "aria-label": "Bot", "data-control": "bot" }, bots.map((b) => h("option", { value: b.handle }, "@" + b.handle + (b.name ? " — " + b.name : "")))) : null;
  const send = h("button", { type: "submit", class: "primary", "data-act": "send" }, "Send");
  const form = h("form", { class: "composer", "aria-label": thread ? "Write in this thread" : "Start a thread",
    onsubmit: async (e) => {
      e.preventDefault();
      const text = area.value.trim();
      if (!text) return;
      send.disabled = true;
      status.className = "small";
      status.textContent = "Sending…";
      try {
        const r = await api("/chat", { method: "POST", body: thread ? { thread, text } : { bot: pick.value, text } });
        composing.text = "";
        area.value = "";
        status.textContent = r.woken.length ? "Sent to @" + r.woken.join(", @") + "." : "Sent; no bot was woken: address one with @handle.";
        follow(r.thread);
        if (!thread) location.hash = "#/threads/" + Number(r.thread);
        else redraw();
      } catch (err) {
        status.className = "small error";
        status.textContent = "Not sent: " + err.message;
      } finally { send.disabled = false; }
    } }, pick ? h("label", {}, "To ", pick) : "", area, h("div", { class: "actions" }, send, h("span", { class: "muted small" }, " Ctrl+Enter sends")), status);
  area.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); form.requestSubmit(); } });
  return form;
}

views.chat = {
  title: "New chat",
  async render() {
    const bots = await api("/bots");
    return h("div", {}, h("h1", {}, "New chat"),
      h("p", { class: "muted" }, "Try a bot: your message starts a thread on the dashboard's console account, as the terminal's do, and the reply shows here as it is written."),
      bots.items.length ? composer(0, bots.items) : empty("No bots."));
  },
  interested: () => false,
};

function message(m, names) {
  const bot = (m.sender || "").startsWith("bot:");
  return h("div", { class: "msg" + (bot ? " bot" : ""), "data-message": m.id },
    h("div", {}, h("span", { class: "who" }, m.sender_name || names[m.sender] || m.sender),
      bot ? h("span", { class: "muted" }, " " + handle(m.sender)) : "",
      m.kind ? h("span", { class: "status" }, m.kind.replace("_", " ")) : "",
      " ", h("span", { class: "meta" }, when(m.created))),
    h("div", { class: "text" }, wrapped(m.text)));
}

// wrapped shows text with its <untrusted source="..."> wrappers (tool output,
// fetched pages) as labelled blocks instead of raw tags; the content stays text.
function wrapped(text) {
  const re = /<untrusted source="([^"]*)">([\s\S]*?)<\/untrusted>/g;
  const out = [];
  let last = 0, m;
  while ((m = re.exec(text || "")) !== null) {
    if (m.index > last) out.push(text.slice(last, m.index));
    out.push(h("div", { class: "untrusted", role: "note" },
      h("div", { class: "untrusted-label" }, "Untrusted content from " + m[1]), h("div", { class: "untrusted-text" }, m[2])));
    last = re.lastIndex;
  }
  if (last === 0) return text;
  out.push(text.slice(last));
  return out;
}

// clock is a step's time of day, seconds included, the date on hover.
function clock(t) {
  const d = new Date(t);
  if (!t || isNaN(d) || d.getFullYear() < 2000) return "";
  return h("time", { class: "clock", datetime: d.toISOString(), title: d.toLocaleString() },
    d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" }));
}

function timeline(d) {
  const steps = d.timeline || [];
  if (!steps.length) return h("p", { class: "muted small" }, "No steps recorded.");
  return h("ol", { class: "timeline" }, steps.map((s) => {
    switch (s.kind) {
      case "model_call":
        return h("li", { "data-kind": "model_call" }, clock(s.at), " ", h("span", { class: "kind" }, "Model call"), " ",
          h("span", { class: "meta" }, [s.model, num(s.prompt_tokens) + " in / " + num(s.completion_tokens) + " out",
            dur(s.duration_ms), s.tool_calls ? s.tool_calls + " tool call" + (s.tool_calls === 1 ? "" : "s") : "",
            s.retries ? s.retries + " retries" : "", s.finish_reason].filter(Boolean).join(" · ")),
          s.cost_micros !== undefined ? [" · ", h("span", { class: "cost" }, money(s.cost_micros, d.currency || ""))] : "",
          s.error ? h("div", { class: "error small" }, s.error) : "");
      case "tool":
        return h("li", { "data-kind": "tool", "data-tool": s.tool }, clock(s.at), " ",
          h("span", { class: "kind" }, "Tool "), h("code", {}, s.tool), " ",
          h("span", { class: "meta" }, [dur(s.duration_ms), s.done ? "" : s.not_run ? "not run: " + s.not_run : "no result yet"].filter(Boolean).join(" · ")),
          h("div", { class: "label" }, "Arguments"), h("pre", { class: "args" }, pretty(s.args)),
          s.done ? [h("div", { class: "label" }, "Result" + (s.result_bytes ? " (" + num(s.result_bytes) + " bytes)" : "")),
            h("pre", { class: "result" + (s.error ? " error" : "") }, wrapped(s.result))] : "");
      case "status": {
        const q = s.question;
        return h("li", { "data-kind": "status", "data-tool": q && q.tool ? q.tool : null }, clock(s.at), " ", h("span", { class: "kind" }, "Status "), badge(s.status),
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

// asker says who asked for the work a question is about and where: their
// names from the thread's people, the thread and its platforms.
const threadInfo = new Map();
function asker(q) {
  const ids = q.askers || [];
  const el = h("div", { class: "meta asker" }, ids.length ? "Asked for by " + ids.join(", ") : "");
  if (!threadInfo.has(q.thread)) threadInfo.set(q.thread, api("/threads/" + Number(q.thread)).catch(() => null));
  threadInfo.get(q.thread).then((t) => {
    if (!t) return;
    const names = {};
    for (const p of t.people || []) names[p.id] = p.name;
    el.replaceChildren(ids.length ? "Asked for by " + ids.map((id) => names[id] ? names[id] + " (" + id + ")" : id).join(", ") + " · " : "",
      "in ", threadLink(t.id, t.title || t.key), (t.platforms || []).length ? " on " + t.platforms.join(", ") : "");
  });
  return el;
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
    asker(q),
    h("div", { class: "meta" }, "asked ", when(q.created),
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

// money renders micro-units as an amount with two decimals and the currency;
// a spend below a cent shows as "< 0.01", the exact amount on hover (cost).
function money(micros, currency) {
  const m = micros || 0;
  const text = m > 0 && m < 5000 ? "< 0.01" : (m / 1e6).toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  return h("span", { class: "money", title: cost(m) + " " + currency }, text + " " + currency);
}

const palette = ["#2457c5", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#c2255c", "#5c940d", "#364fc7", "#a61e4d", "#495057", "#087f5b", "#868e96"];

// views.usage charts the usage ledger (one entry per model call, priced with
// cost.prices) over a chosen range, per day or hour (UTC), by bot, model,
// thread or channel, with today's budgets, the totals and a CSV export; then by llm profile and
// model with the provider, the models that answered, the key labels and the
// calls a backup profile served (GET /usage?by=model, the last 30 days).
views.usage = {
  title: "Usage",
  state: null,
  async render() {
    const day = 86400000;
    const iso = (t) => new Date(t).toISOString().slice(0, 10);
    const st = this.state || (this.state = { from: iso(Date.now() - 6 * day), to: iso(Date.now()), step: "day", by: "bot" });
    const params = "since=" + st.from + "T00:00:00Z&until=" + new Date(Date.parse(st.to + "T00:00:00Z") + day).toISOString().replace(/\.\d+Z$/, "Z") +
      "&step=" + st.step + "&by=" + st.by;
    const [sp, byModel] = await Promise.all([api("/spend?" + params), api("/usage?by=model&limit=100")]);
    const cur = sp.currency;
    const set = (k) => (e) => { st[k] = e.target.value; redraw(); };
    const sel = (k, label, opts) => h("label", {}, label + " ", h("select", { "data-control": k, onchange: set(k) },
      opts.map(([v, t]) => h("option", { value: v, selected: st[k] === v }, t))));
    const out = h("div", {}, h("h1", {}, "Usage"),
      h("form", { class: "bar spend-controls", onsubmit: (e) => e.preventDefault() },
        h("label", {}, "From ", h("input", { type: "date", value: st.from, max: st.to, "data-control": "from", onchange: set("from") })),
        h("label", {}, "to ", h("input", { type: "date", value: st.to, min: st.from, "data-control": "to", onchange: set("to") })),
        sel("step", "per", [["day", "day"], ["hour", "hour"]]),
        sel("by", "by", [["bot", "bot"], ["model", "model"], ["thread", "thread"], ["channel", "channel"]]),
        h("a", { class: "button", href: "/api/v1/spend?" + params + "&format=csv", download: "", "data-act": "csv" }, "Download CSV")));
    if (sp.budgets.length) {
      out.append(h("h2", {}, "Budgets today (UTC)"), h("div", { class: "budgets" }, sp.budgets.map((b) => {
        const limit = b.limit_micros || b.limit_tokens, spent = b.limit_micros ? b.spent_micros : b.spent_tokens;
        const words = b.limit_micros ? [money(b.spent_micros, cur), " of ", money(b.limit_micros, cur)]
          : [num(b.spent_tokens) + " of " + num(b.limit_tokens) + " tokens"];
        return h("div", { class: "budget", "data-budget": b.name },
          h("div", {}, h("b", {}, b.name.replace(/ today$/, "")), ": ", words, " today"),
          h("meter", { min: 0, max: limit, value: Math.min(spent, limit), low: limit * 0.8, high: limit * 0.95, optimum: 0, "aria-label": b.name + " budget used" }));
      })));
    }
    const total = sp.totals.reduce((t, u) => ({ calls: t.calls + u.model_calls, prompt: t.prompt + u.prompt_tokens, cached: t.cached + u.cached_tokens,
      out: t.out + u.completion_tokens, cost: t.cost + u.cost_micros }), { calls: 0, prompt: 0, cached: 0, out: 0, cost: 0 });
    const share = (c, p) => p ? Math.round(100 * c / p) + "%" : "—";
    out.append(h("p", { class: "usage-total" }, "Total: ", money(total.cost, cur), " for " + num(total.calls) + " model call" + (total.calls === 1 ? "" : "s") + ", " +
      num(total.prompt + total.out) + " tokens; cache hits " + share(total.cached, total.prompt) + " of input."));
    out.append(h("h2", {}, "Cost per " + st.step + " by " + st.by + " (" + cur + ")"));
    out.append(sp.series.length ? spendChart(sp) : empty("No model calls in this range."));
    const first = st.by[0].toUpperCase() + st.by.slice(1);
    out.append(h("p", { class: "muted" }, "Model calls recorded in the usage ledger, priced with cost.prices. Input tokens include the cached ones; " +
      "cache hits are their share."));
    out.append(sp.totals.length ? table([first, "Model calls#", "Input tokens#", "Cached#", "Cache hits#", "Output tokens#", "Cost#"], sp.totals.map((u) => h("tr", {},
      td(first, h("span", { class: "lead" }, st.by === "bot" ? handle("bot:" + u.label) : st.by === "thread" ? threadLink(u.key, u.label) : u.label)),
      h("td", { class: "num", "data-label": "Model calls" }, num(u.model_calls)),
      h("td", { class: "num", "data-label": "Input tokens" }, num(u.prompt_tokens)),
      h("td", { class: "num", "data-label": "Cached" }, num(u.cached_tokens)),
      h("td", { class: "num", "data-label": "Cache hits" }, share(u.cached_tokens, u.prompt_tokens)),
      h("td", { class: "num", "data-label": "Output tokens" }, num(u.completion_tokens)),
      h("td", { class: "num", "data-label": "Cost" }, money(u.cost_micros, cur))))) : "");
    const modelCells = (u) => [td("Provider", u.provider || "-"), td("Served by", (u.served || []).join(", ") || "-"),
      td("Keys", (u.keys || []).join(", ") || "-"), h("td", { class: "num", "data-label": "Fallbacks" }, num(u.fallbacks || 0))];
    out.append(h("h2", {}, "Providers, keys and fallbacks (last 30 days)"),
      h("p", { class: "muted" }, "Fallbacks counts the calls a backup profile of a bot's chain served."),
      byModel.items.length ? table(["Profile/model", "Provider", "Served by", "Keys", "Fallbacks#", "Model calls#", "Cost#"], byModel.items.map((u) => h("tr", { "data-model": u.key },
        td("Profile/model", h("span", { class: "lead" }, u.key)), ...modelCells(u),
        h("td", { class: "num", "data-label": "Model calls" }, num(u.model_calls)),
        h("td", { class: "num", "data-label": "Cost" }, money(u.cost_micros, cur))))) : empty("No usage."));
    return out;
  },
  interested: (type) => type === "run.finished",
};

// spendChart draws the series of GET /api/v1/spend with uPlot (vendored,
// served from the binary), UTC on the time axis; its legend lists the values
// under the cursor.
function spendChart(sp) {
  const el = h("div", { class: "chart", role: "img", "aria-label": "Cost per " + sp.step + " by " + sp.by + ": " +
    sp.totals.slice(0, 5).map((t) => t.label + " " + (t.cost_micros / 1e6).toFixed(2)).join(", ") + " " + sp.currency });
  if (typeof uPlot === "undefined") return el;
  const width = Math.max(280, Math.min(main.clientWidth - 8, 1060));
  // One series: a bar per bucket; more: lines, which do not hide each other.
  const bars = sp.series.length === 1 && uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.7, 48] }) : undefined;
  const stamp = (v) => new Date(v * 1000).toISOString().replace("T", " ").slice(5, sp.step === "day" ? 10 : 16);
  const half = (sp.step === "day" ? 86400 : 3600) / 2;
  const every = Math.max(1, Math.ceil(sp.buckets.length / (width / (sp.step === "day" ? 56 : 96))));
  const decimals = (vals) => Math.min(6, Math.max(2, vals.length > 1 ? Math.ceil(-Math.log10(Math.abs(vals[1] - vals[0]) || 1)) : 2));
  const data = [sp.buckets, ...sp.series.map((s) => s.cost_micros.map((m) => m / 1e6))];
  new uPlot({
    width, height: 260, tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
    scales: { x: { time: true, range: () => [sp.buckets[0] - half, sp.buckets[sp.buckets.length - 1] + half] },
      y: { range: (u, lo, hi) => [0, hi > 0 ? hi * 1.1 : 0.01] } },
    series: [{ value: (u, v) => v == null ? "—" : stamp(v) + " UTC" }, ...sp.series.map((s, i) => ({
      label: s.label, stroke: palette[i % palette.length], fill: palette[i % palette.length] + "33", width: 2,
      paths: bars, points: { show: !bars, size: 5 },
      value: (u, v) => v == null ? "—" : v.toFixed(v > 0 && v < 0.01 ? 4 : 2),
    }))],
    axes: [{ values: (u, vals) => vals.map(stamp), splits: () => sp.buckets.filter((_, i) => i % every === 0) },
      { values: (u, vals) => { const d = decimals(vals); return vals.map((v) => v.toFixed(d)); }, size: 64 }],
  }, data, el);
  return el;
}

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

// views.config shows the running configuration (secrets masked by the
// server) and the last reload's report; the Reload button re-reads the file
// and shows every changed key, applied or needing a restart.
views.config = {
  title: "Config",
  async render() {
    const c = await api("/config");
    const out = h("div", {}, h("h1", {}, "Config"),
      h("p", { class: "muted" }, "The running configuration, read from ", h("span", { class: "mono" }, c.path),
        ". Secrets are masked. Edit the file, then reload: every changed key is applied or named as needing a restart."));
    const status = h("div", { class: "reload-report", role: "status" });
    const btn = h("button", { type: "button", class: "primary", "data-act": "reload", onclick: async () => {
      btn.disabled = true;
      status.replaceChildren(h("p", { class: "muted" }, "Reloading…"));
      try {
        const rep = await api("/reload", { method: "POST" });
        flash(reloadSummary(rep));
        redraw();
      } catch (e) {
        flash("Not reloaded: the running configuration is kept.", true);
        status.replaceChildren(h("pre", { class: "error" }, e.message));
        btn.disabled = false;
      }
    } }, "Reload the config file");
    out.append(h("div", { class: "bar" }, btn), status);
    if (c.last_reload) status.replaceChildren(reloadReport(c.last_reload));
    out.append(h("h2", {}, "Running configuration"));
    out.append(table(["Key", "Value"], (c.config || []).map((e) => h("tr", { "data-key": e.key },
      td("Key", h("span", { class: "mono" }, e.key)),
      td("Value", e.value.includes("\n") ? h("pre", { class: "args" }, e.value) : h("span", { class: "mono" }, e.value))))));
    return out;
  },
  interested: () => false,
};

// views.people: who may talk to the bots. Pending pairing codes with a button
// that lets the person in, the people with their roles and identities (remove
// one), and the channel policies stored from chat, the CLI, the API or the
// form here (PUT /policies; Edit fills the form from a row, Remove deletes
// one). The form is kept across live redraws (this.form, dropped on navigation).
views.people = {
  title: "People",
  async render() {
    const [pp, pols, bots, chans] = await Promise.all([api("/people"), api("/policies"), api("/bots"),
      api("/channels").catch(() => null)]); // not served by every API
    if (!this.form) this.form = policyForm();
    const form = this.form, focused = form.contains(document.activeElement) ? document.activeElement : null;
    form.querySelector("#policy-bots").replaceChildren(...bots.items.map((b) => h("option", { value: b.handle })));
    form.querySelector("#policy-accounts").replaceChildren(...(chans ? chans.items : []).map((c) => h("option", { value: c.account })));
    const out = h("div", {}, h("h1", {}, "People"),
      h("p", { class: "muted" }, "Owners approve anything and let people in; members may talk to the bots. " +
        "An unknown person who DMs a bot gets a pairing code: let them in here, with /pair CODE in chat, or with openbot pair CODE."));
    out.append(h("h2", {}, "Waiting for a pairing"));
    out.append(pp.pending.length ? table(["Code", "Who", "Account", "Expires"], pp.pending.map((c) =>
      h("tr", { "data-code": c.code },
        td("Code", h("span", { class: "mono" }, c.code)),
        td("Who", c.name || c.actor, c.name ? h("div", { class: "small muted mono" }, c.actor) : ""),
        td("Account", c.account),
        td("Expires", when(c.expires), " ", steer("Let in", "Really let " + (c.name || c.actor) + " in?", "pair", c.code, () =>
          api("/people/pair", { method: "POST", body: { code: c.code } }).then((x) => (x.name || x.identities[0]) + " is in, as " + x.role)))))) : empty("No pairing code is waiting."));
    out.append(h("h2", {}, "People"));
    out.append(pp.people.length ? table(["Person", "Role", "Identities", "Added"], pp.people.map((x) =>
      h("tr", { "data-person": x.id },
        td("Person", h("b", {}, x.name || x.id)),
        td("Role", badge(x.role)),
        td("Identities", (x.identities || []).map((i) => h("div", { class: "mono small" }, i))),
        td("Added", when(x.added), x.added_by ? h("div", { class: "small muted" }, "by " + x.added_by) : "", " ",
          steer("Remove", "Really remove " + (x.name || x.id) + "?", "revoke", x.id, () =>
            api("/people/" + encodeURIComponent(x.id), { method: "DELETE" }).then(() => (x.name || x.id) + " removed")))))) : empty("Nobody is stored yet; owners from the config are not listed here."));
    out.append(h("h2", {}, "Channel policies set from chat, the CLI or here"));
    const rows = Object.entries(pols).sort(([a], [b]) => cmpStr(a, b)).map(([where, p]) => {
      const [acct, channel] = splitWhere(where);
      const rules = [];
      if (p.mode) rules.push("mode " + p.mode);
      if (p.members) rules.push("members " + p.members + (p.listed && p.listed.length ? " (" + p.listed.join(", ") + ")" : ""));
      if (p.default_bot) rules.push("default bot @" + p.default_bot);
      if (p.tools_removed && p.tools_removed.length) rules.push("without " + p.tools_removed.join(", "));
      if (p.tools_added && p.tools_added.length) rules.push("with " + p.tools_added.join(", "));
      if (p.approvers && p.approvers.length) rules.push("approvers " + p.approvers.join(", "));
      const b = p.budget || {};
      if (b.tokens || b.cost_micros) rules.push("budget a day: " + [b.tokens ? num(b.tokens) + " tokens" : "", b.cost_micros ? (b.cost_micros / 1e6).toFixed(2) : ""].filter(Boolean).join(", "));
      if (p.fetch) rules.push("fetch: " + [p.fetch.allow_domains ? "allowed " + (p.fetch.allow_domains.join(", ") || "none") : "", p.fetch.unlisted ? "unlisted " + p.fetch.unlisted : ""].filter(Boolean).join(", "));
      if (p.instructions) rules.push("instructions: " + p.instructions);
      return h("tr", { "data-policy": where },
        td("Channel", h("span", { class: "mono" }, where)),
        td("Policy", rules.length ? rules.map((r) => h("div", {}, r)) : h("span", { class: "muted" }, "the defaults (mention_only, everyone)")),
        td("Set", when(p.set), p.set_by ? h("div", { class: "small muted" }, "by " + p.set_by) : ""),
        td("", h("button", { type: "button", class: "steer", "data-act": "edit-policy", onclick: () => fillPolicy(form, acct, channel, p) }, "Edit"), " ",
          steer("Remove", "Really remove the policy of " + where + "?", "unpolicy", where, () =>
            api("/policies?" + new URLSearchParams({ account: acct, channel }), { method: "DELETE" }).then(() => "The policy of " + where + " is removed; the config's applies there again"))));
    });
    out.append(rows.length ? table(["Channel", "Policy", "Set", ""], rows) : empty("None stored; the config's policies apply."));
    out.append(h("h2", {}, "Set a channel's policy"), form);
    if (focused) requestAnimationFrame(() => focused.focus());
    return out;
  },
  interested: (type) => type === "activity",
};

// splitWhere splits a policy's key, "<account> <channel>", into its two names.
function splitWhere(where) {
  const i = where.indexOf(" ");
  return i < 0 ? [where, ""] : [where.slice(0, i), where.slice(i + 1)];
}

// policyForm is the form that sets a channel's policy (PUT /policies), the
// whole policy at once: empty fields take the defaults. A refusal (a bad
// value, not an owner) shows under it and changes nothing.
function policyForm() {
  const field = (label, input, wide) => h("label", { class: wide ? "wide" : "" }, label, input);
  const text = (name, placeholder, list) => h("input", { type: "text", name, placeholder, list, autocomplete: "off" });
  const pick = (name, first, opts) => h("select", { name }, h("option", { value: "" }, first), opts.map((o) => h("option", { value: o }, o)));
  const status = h("p", { class: "small", role: "status" });
  const save = h("button", { type: "submit", class: "primary", "data-act": "save-policy" }, "Save policy");
  const form = h("form", { id: "policy", class: "policy-form", "aria-label": "Set a channel's policy" },
    h("datalist", { id: "policy-accounts" }), h("datalist", { id: "policy-bots" }),
    field("Account", text("account", "slack/acme", "policy-accounts")),
    field("Channel", text("channel", "T012:C345, or * for all")),
    field("Mode", pick("mode", "mention_only (default)", ["mention_only", "open", "disabled"])),
    field("Members", pick("members", "everyone (default)", ["everyone", "paired", "listed"])),
    field("Listed people", text("listed", "slack:T012:U345, …")),
    field("Default bot", text("default_bot", "the account's", "policy-bots")),
    field("Tools removed", text("tools_removed", "shell, http_*")),
    field("Tools added", text("tools_added", "none")),
    field("Approvers", text("approvers", "the bots' own")),
    field("Tokens a day", h("input", { type: "number", name: "budget_tokens", min: 0, step: 1, placeholder: "no limit" })),
    field("Cost a day", h("input", { type: "number", name: "budget_cost", min: 0, step: 0.01, placeholder: "no limit" })),
    field("Fetch: allowed domains", text("allow_domains", "the bots' own")),
    field("Fetch: other hosts", pick("unlisted", "the bots' own", ["read", "ask", "refuse"])),
    field("Instructions added", text("instructions", "none"), true),
    h("div", { class: "actions" }, save,
      h("button", { type: "reset", onclick: () => { status.textContent = ""; } }, "Clear")),
    status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = (n) => form.elements[n].value.trim();
    const list = (n) => v(n).split(",").map((x) => x.trim()).filter(Boolean);
    const body = {}, budget = {}, fetch = {};
    for (const k of ["mode", "members", "instructions"]) if (v(k)) body[k] = v(k);
    if (v("default_bot")) body.default_bot = v("default_bot").replace(/^@/, "");
    for (const k of ["listed", "tools_removed", "tools_added", "approvers"]) if (list(k).length) body[k] = list(k);
    if (v("budget_tokens")) budget.tokens = Number(v("budget_tokens"));
    if (v("budget_cost")) budget.cost_micros = Math.round(Number(v("budget_cost")) * 1e6);
    if (Object.keys(budget).length) body.budget = budget;
    if (list("allow_domains").length) fetch.allow_domains = list("allow_domains");
    if (v("unlisted")) fetch.unlisted = v("unlisted");
    if (Object.keys(fetch).length) body.fetch = fetch;
    const where = v("account") + " " + v("channel");
    document.getElementById("flash").hidden = true; // an earlier result is not this one's
    save.disabled = true;
    status.className = "small";
    status.textContent = "Saving…";
    try {
      await api("/policies?" + new URLSearchParams({ account: v("account"), channel: v("channel") }), { method: "PUT", body });
      status.textContent = "";
      flash("The policy of " + where + " is saved");
      redraw();
    } catch (err) {
      status.className = "small error";
      status.textContent = "Not saved: " + err.message;
    } finally { save.disabled = false; }
  });
  return form;
}

// fillPolicy puts a stored policy into the form, to change it.
function fillPolicy(form, acct, channel, p) {
  const b = p.budget || {}, f = p.fetch || {};
  const values = {
    account: acct, channel, mode: p.mode, members: p.members, listed: (p.listed || []).join(", "),
    default_bot: p.default_bot, tools_removed: (p.tools_removed || []).join(", "), tools_added: (p.tools_added || []).join(", "),
    approvers: (p.approvers || []).join(", "), instructions: p.instructions, budget_tokens: b.tokens,
    budget_cost: b.cost_micros ? b.cost_micros / 1e6 : "", allow_domains: (f.allow_domains || []).join(", "), unlisted: f.unlisted,
  };
  for (const [k, x] of Object.entries(values)) form.elements[k].value = x || "";
  form.querySelector('[role="status"]').textContent = "";
  form.scrollIntoView({ block: "start" });
  form.elements.mode.focus();
}

function reloadSummary(rep) {
  const ch = rep.changes || [];
  const restart = ch.filter((c) => c.status !== "applied").length;
  if (!ch.length && !(rep.done || []).length) return "Reloaded: nothing changed.";
  return "Reloaded: " + (ch.length - restart) + " key(s) applied, " + restart + " need(s) a restart.";
}

// reloadReport lists every key a reload found changed with what it did.
function reloadReport(rep) {
  const ch = rep.changes || [], done = rep.done || [];
  return h("section", { class: "card", "aria-label": "Last reload" },
    h("h2", {}, "Last reload ", h("span", { class: "meta" }, when(rep.at))),
    ch.length ? table(["Changed key", "Result"], ch.map((c) => h("tr", { "data-key": c.key, class: c.status === "applied" ? "" : "warn" },
      td("Changed key", h("span", { class: "mono" }, c.key)),
      td("Result", h("span", { class: "status " + (c.status === "applied" ? "applied" : "restart") }, c.status))))) : "",
    done.length ? h("ul", { class: "small" }, done.map((d) => h("li", {}, d))) : "",
    !ch.length && !done.length ? h("p", {}, "Nothing changed.") : "");
}

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
  views.people.form = null; // a new page, an empty policy form
  Object.assign(composing, { text: "", focus: false }); // a new page, an empty box
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
  if (type === "message.posted" && data && Number(data.thread) === drafting.thread && String(data.sender || "").startsWith("bot:")) {
    Object.assign(drafting, { thread: 0, text: "" }); // the reply is stored: the feed shows it
  }
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

// The Team page's channels change without a store event: their table alone
// is redrawn every 5 s (it holds no control, so no focus is lost).
setInterval(async () => {
  const sec = document.getElementById("channels");
  if (!sec || document.hidden) return;
  try {
    const chans = await api("/channels");
    const old = sec.querySelector("table");
    if (old && document.contains(old)) old.replaceWith(channelsTable(chans.items));
  } catch (e) { /* the next tick tries again */ }
}, 5000);

window.addEventListener("hashchange", navigate);
navigate();
refreshPending();
live();
