// esjet console: plain JavaScript, no build step. Every view is a function
// of the JSON the node serves under /console/api/; it polls while shown, so
// a saga's timeline moves without a reload. All text goes in with
// textContent (never as HTML).
"use strict";

const API = "/console/api";
const main = document.getElementById("main");
const statusBox = document.getElementById("status");
let timer = null;   // the current view's poll
let viewToken = 0;  // bumps on every route change; stale polls stop

// el builds an element: el("a", {href: "#"}, "text", child…).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// With http.auth the node wants a credential on every request. A client
// certificate the browser presents itself; a bearer token the user pastes
// once, kept in this tab's sessionStorage and sent as Authorization — never
// a cookie, which a browser would also send with another site's requests.
const TOKEN_KEY = "esjet-console-token";

function headers(extra) {
  const h = Object.assign({Accept: "application/json"}, extra);
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

async function answer(r) {
  const body = await r.json().catch(() => ({}));
  if (r.status === 401) askToken(body.error && body.error.message);
  if (!r.ok) throw Object.assign(new Error((body.error && body.error.message) || r.statusText), {status: r.status, code: body.error && body.error.code});
  return body;
}

async function getJSON(path) {
  return answer(await fetch(API + path, {headers: headers()}));
}

// postJSON sends data as application/json: the node refuses a write in any
// other content type.
async function postJSON(path, data) {
  return answer(await fetch(API + path, {method: "POST", headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(data)}));
}

// askToken replaces the view with a form for the token (once: later 401s
// of the same view's polls leave it be).
function askToken(message) {
  if (document.getElementById("token-form")) return;
  viewToken++;
  clearTimeout(timer);
  const input = el("input", {type: "password", id: "token-input", autocomplete: "off", required: true});
  const form = el("form", {id: "token-form"},
    el("h1", {tabindex: "-1"}, "Sign in"),
    el("p", {}, message || "This node requires a credential."),
    el("p", {}, "Paste an operator token (esjet http-token --role operator makes one). It stays in this tab until you close it."),
    el("label", {for: "token-input"}, "Token"), input,
    el("div", {class: "buttons"}, el("button", {type: "submit"}, "Use token")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  });
  main.replaceChildren(form);
  input.focus();
}

function say(text) {
  statusBox.textContent = text;
  clearTimeout(say.t);
  say.t = setTimeout(() => { statusBox.textContent = ""; }, 4000);
}

function fmtBytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function fmtAge(ns) {
  const s = ns / 1e9;
  if (s < 1) return "0 s";
  if (s < 120) return s.toFixed(0) + " s";
  if (s < 7200) return (s / 60).toFixed(0) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function fmtTime(t) { return t ? new Date(t).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "—"; }
function num(n) { return el("td", {class: "num"}, String(n)); }

const fateClass = {
  "done": "b-ok", "dead": "b-bad", "failed": "b-bad", "discarded": "b-neutral",
  "in flight": "b-warn", "pending": "b-info", "scheduled": "b-info", "not relayed": "b-warn",
  "relayed": "b-neutral", "not inspected": "b-neutral",
};
function badge(text, cls) { return el("span", {class: "badge " + (cls || "b-neutral")}, text); }
function fateBadge(f) { return el("span", {class: "badge " + (fateClass[f] || "b-neutral"), "data-fate": f}, f); }

// poll runs fn now and then every ms (or what fn returns) while the view is current.
function poll(fn, ms) {
  const token = viewToken;
  const live = document.getElementById("live");
  const tick = async () => {
    if (token !== viewToken) return;
    let next = ms;
    try {
      const r = await fn();
      if (typeof r === "number") next = r;
      live.textContent = "live · updated " + new Date().toLocaleTimeString();
    } catch (e) {
      if (token !== viewToken) return;
      live.textContent = "not updating: " + e.message;
    }
    if (token === viewToken) timer = setTimeout(tick, next);
  };
  tick();
}

// ---------- router ----------

function route() {
  viewToken++;
  clearTimeout(timer);
  const parts = location.hash.replace(/^#\/?/, "").split("?")[0].split("/").filter(Boolean).map(decodeURIComponent);
  const section = parts[0] || "overview";
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  }
  main.replaceChildren();
  if (section === "aggregates" && parts.length >= 3) timelineView(parts[1], parts.slice(2).join("/"));
  else if (section === "aggregates" && parts.length === 2) idsView(parts[1]);
  else if (section === "aggregates") typesView();
  else if (section === "dlq" && parts.length >= 2) letterView(parts[1]);
  else if (section === "dlq") dlqView();
  else overviewView();
}

// heading puts the view's title first and moves focus to it, so a keyboard
// or screen-reader user lands on the new content.
function heading(text) {
  const h = el("h1", {tabindex: "-1", id: "view-title"}, text);
  main.append(h);
  if (route.moved) h.focus();
  document.title = text + " · esjet console";
  return h;
}

// ---------- overview ----------

let prevOverview = null;

function overviewView() {
  heading("Overview");
  const body = el("div");
  main.append(body);
  poll(async () => {
    const ov = await getJSON("/overview");
    document.getElementById("namespace").textContent = "namespace " + ov.namespace;
    body.replaceChildren(...renderOverview(ov, prevOverview));
    prevOverview = ov;
  }, 3000);
}

function renderOverview(ov, prev) {
  const prevBy = {};
  const dt = prev ? (new Date(ov.time) - new Date(prev.time)) / 1000 : 0;
  if (prev) for (const s of prev.streams) prevBy[s.name] = s;
  const relay = ov.relay;
  const dead = ov.kinds.reduce((n, k) => n + k.dead, 0);
  const inflight = ov.kinds.reduce((n, k) => n + k.in_flight, 0);
  const cards = el("div", {class: "cards"},
    card("Relay", relay.unrelayed === 0 ? "up to date" : relay.unrelayed + " behind",
      relay.unrelayed === 0 ? "every decision's commands are in OUTBOX" : "oldest waiting " + fmtAge(relay.oldest_age_ns)),
    card("In flight", inflight, "commands a worker holds"),
    card("Dead letters", dead, dead ? "see Outbox & DLQ" : "none"),
    card("Decisions", relay.events_last_seq, "last EVENTS sequence"));
  const streams = el("table", {id: "streams"},
    el("caption", {class: "muted"}, "Rates are measured between two refreshes of this page."),
    el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "Stream or bucket"), el("th", {scope: "col"}, "Kept"), el("th", {scope: "col", class: "num"}, "Messages"),
      el("th", {scope: "col", class: "num"}, "Rate /s"), el("th", {scope: "col", class: "num"}, "Size"),
      el("th", {scope: "col", class: "num"}, "Subjects"), el("th", {scope: "col", class: "num"}, "Consumers"), el("th", {scope: "col"}, "Last write"))),
    el("tbody", {}, ov.streams.map(s => {
      const p = prevBy[s.name];
      const rate = p && dt > 0 ? Math.max(0, (s.last_seq - p.last_seq) / dt).toFixed(1) : "—";
      return el("tr", {}, el("th", {scope: "row"}, s.bucket ? el("span", {}, s.bucket, " ", badge(s.store === "objects" ? "objects" : "KV", "b-neutral")) : s.name),
        el("td", {title: s.retention.why}, s.retention.kept), num(s.messages), num(rate), num(fmtBytes(s.bytes)), num(s.subjects), num(s.consumers), el("td", {}, fmtTime(s.last_time)));
    })));
  const relayTable = el("dl", {class: "kv", id: "relay"},
    el("dt", {}, "Relay consumer"), el("dd", {}, relay.relay_consumer ? "present" : "none yet (nothing relayed)"),
    el("dt", {}, "Unrelayed decisions"), el("dd", {}, String(relay.unrelayed)),
    el("dt", {}, "Pending / ack pending"), el("dd", {}, relay.pending + " / " + relay.ack_pending),
    el("dt", {}, "Ack floor"), el("dd", {}, "EVENTS seq " + relay.ack_floor + " of " + relay.events_last_seq),
    el("dt", {}, "Oldest unrelayed"), el("dd", {}, relay.oldest_seq ? "seq " + relay.oldest_seq + ", " + fmtAge(relay.oldest_age_ns) + " old" : "—"));
  const kinds = kindsTable(ov.kinds, ov);
  const healthCls = {green: "b-ok", yellow: "b-warn", red: "b-bad"};
  const proj = ov.projections.length
    ? el("table", {id: "projections"}, el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "Read model"), el("th", {scope: "col"}, "Health"),
        el("th", {scope: "col", class: "num"}, "Behind (decisions)"), el("th", {scope: "col", class: "num"}, "Behind (s)"), el("th", {scope: "col", class: "num"}, "Parked events"))),
        el("tbody", {}, ov.projections.map(p => el("tr", {}, el("th", {scope: "row"}, p.name),
          el("td", {}, p.health ? badge(p.health, healthCls[p.health]) : "—", p.reason ? " " + p.reason : ""),
          num(p.behind), num(p.lag_seconds.toFixed(1)), num(p.parked)))))
    : el("p", {class: "muted"}, ov.projections_note || "no read models");
  const refused = (ov.refused || []).length
    ? [el("h2", {}, "Refused: written by a newer build"),
       el("p", {class: "error", id: "refused"}, "This node does not read these messages (an envelope or event schema version it does not know); their aggregates are refused here until it is upgraded. Every other aggregate is served."),
       el("table", {}, el("thead", {}, el("tr", {}, el("th", {scope: "col", class: "num"}, "Seq"), el("th", {scope: "col"}, "Subject"), el("th", {scope: "col"}, "Why"))),
         el("tbody", {}, ov.refused.map(r => el("tr", {}, num(r.seq), el("td", {}, el("code", {}, r.subject)), el("td", {class: "error"}, r.reason)))))]
    : [];
  const newer = (ov.workers || []).reduce((n, w) => n + (w.waiting_for_newer_worker || 0), 0);
  const waiting = newer
    ? [el("p", {class: "error", id: "waiting-newer"}, newer + " command" + (newer === 1 ? "" : "s") + " waiting for a newer worker: their schema is newer than the workers that received them understand. They run, counting no attempt, once a node that understands them serves their kind.")]
    : [];
  return [cards, ...refused, ...waiting, el("h2", {}, "Streams and buckets"), streams, el("h2", {}, "Relay lag"), relayTable,
    el("h2", {}, "Workers per kind"), kinds, el("h2", {}, "Projection lag"), proj];
}

function card(k, v, note) {
  return el("div", {class: "card"}, el("div", {class: "k"}, k), el("div", {class: "v"}, String(v)), el("div", {class: "muted"}, note));
}

function kindsTable(kinds, ov) {
  if (!kinds.length) return el("p", {class: "muted"}, "No command has been issued yet.");
  const flow = {};
  for (const w of (ov && ov.workers) || []) flow[w.kind] = w;
  return el("table", {id: "kinds"},
    el("thead", {}, el("tr", {}, ["Kind", "Health", "In OUTBOX", "Pending", "In flight", "Scheduled", "Done", "Failed", "Dead", "Workers pulling", "Flow"].map(
      (h, i) => el("th", {scope: "col", class: i > 1 && i < 10 ? "num" : null}, h)))),
    el("tbody", {}, kinds.map(k => el("tr", {"data-kind": k.kind},
      el("th", {scope: "row"}, el("a", {href: "#/dlq?kind=" + encodeURIComponent(k.kind), title: "OUTBOX and dead letters of " + k.kind}, el("code", {}, k.kind))),
      el("td", {}, k.stalled ? badge("stalled: no worker pulling", "b-bad") : k.dead ? badge("dead letters", "b-bad") : k.pulling ? badge("served", "b-ok") : badge("idle", "b-neutral")),
      num(k.messages), num(k.pending), num(k.in_flight), num(k.scheduled), num(k.done), num(k.failed),
      el("td", {class: "num"}, k.dead ? el("a", {href: "#/dlq?kind=" + encodeURIComponent(k.kind)}, String(k.dead)) : "0"),
      num(k.waiting), flowCell(k.kind, flow[k.kind], ov && ov.allow_actions)))));
}

// flowCell shows a kind's pause (who, why, the oldest waiting command) and
// rate limit, with pause and resume when actions are on.
function flowCell(kind, f, actions) {
  f = f || {kind};
  const td = el("td", {class: "flow"});
  if (f.paused) {
    td.append(badge("paused", "b-warn"), " by " + f.by + (f.reason ? ": " + f.reason : ""),
      f.oldest_age_seconds ? el("span", {class: "muted"}, " · oldest waiting " + fmtAge(f.oldest_age_seconds * 1e9)) : "");
  } else if (f.rate) {
    td.append(el("span", {class: "muted"}, f.rate + "/s (burst " + f.burst + ")"));
  }
  if (f.waiting_for_newer_worker) {
    td.append(" ", badge(f.waiting_for_newer_worker + " waiting for a newer worker", "b-warn"));
  }
  if (!actions) return td;
  const pause = !f.paused;
  td.append(" ", el("button", {type: "button", class: pause ? "danger" : "primary", "data-action": pause ? "pause" : "resume", onclick: () => confirmAction({
    title: pause ? "Pause " + kind + "?" : "Resume " + kind + "?",
    text: pause
      ? "Every node's workers of " + kind + " stop pulling: calls in flight finish, the waiting commands stay in OUTBOX untouched (no attempt counted) until a resume. The record names you."
      : "Every node's workers of " + kind + " pull again, from where they stopped.",
    ok: pause ? "Pause" : "Resume", reason: pause,
    run: reason => postJSON("/workers/" + encodeURIComponent(kind) + "/" + (pause ? "pause" : "resume"), {reason}),
  }).then(rep => { if (rep) say(kind + (pause ? " paused" : " resumed") + " by " + rep.by); }, err => say(err.message))}, pause ? "Pause…" : "Resume"));
  return td;
}

// ---------- aggregates ----------

async function typesView() {
  heading("Aggregates");
  const types = await getJSON("/aggregates");
  main.append(el("p", {}, "Pick a type to list its aggregates, or open one by id."),
    el("ul", {id: "types"}, types.map(t => el("li", {}, el("a", {href: "#/aggregates/" + encodeURIComponent(t.type)}, t.type),
      el("span", {class: "muted"}, " — commands: " + t.commands.join(", "))))));
}

function idsView(type) {
  heading("Aggregates of type " + type);
  const input = el("input", {type: "text", id: "id-filter", "aria-describedby": "id-hint", autocomplete: "off"});
  const form = el("form", {class: "inline", onsubmit: e => {
    e.preventDefault();
    if (input.value.trim()) location.hash = "#/aggregates/" + encodeURIComponent(type) + "/" + encodeURIComponent(input.value.trim());
  }}, el("label", {for: "id-filter"}, "Id"), input, el("button", {type: "submit", class: "primary"}, "Open"),
    el("span", {id: "id-hint", class: "muted"}, "type an id and press Enter; the list below filters as you type"));
  const list = el("div");
  main.append(el("p", {}, el("a", {href: "#/aggregates"}, "← all types")), form, list);
  let filter = "";
  input.addEventListener("input", () => { filter = input.value.trim(); });
  poll(async () => {
    const ids = await getJSON("/aggregates/" + encodeURIComponent(type) + "?prefix=" + encodeURIComponent(filter));
    list.replaceChildren(
      el("p", {class: "muted"}, ids.total + " aggregate(s)" + (ids.total > ids.ids.length ? ", first " + ids.ids.length + " shown" : "")),
      el("table", {id: "ids"}, el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "Id"), el("th", {scope: "col", class: "num"}, "Decisions"))),
        el("tbody", {}, ids.ids.map(i => el("tr", {}, el("td", {}, el("a", {href: "#/aggregates/" + encodeURIComponent(type) + "/" + encodeURIComponent(i.id)}, i.id)), num(i.decisions))))));
  }, 3000);
}

function timelineView(type, id) {
  heading(type + " " + id);
  const body = el("div");
  main.append(el("p", {}, el("a", {href: "#/aggregates/" + encodeURIComponent(type)}, "← all " + type + " aggregates")), body);
  // Re-render only when something changed, so focus and open <details> stay put.
  let last = "";
  const open = new Set();
  body.addEventListener("toggle", e => { if (e.target.id) { if (e.target.open) open.add(e.target.id); else open.delete(e.target.id); } }, true);
  poll(async () => {
    let tl;
    try {
      tl = await getJSON("/aggregates/" + encodeURIComponent(type) + "/" + encodeURIComponent(id));
    } catch (e) {
      if (e.status === 404) { body.replaceChildren(el("p", {class: "notice bad"}, e.message)); return 2000; }
      throw e;
    }
    const key = JSON.stringify(tl);
    if (key !== last) {
      last = key;
      const focused = document.activeElement && document.activeElement.id;
      body.replaceChildren(...renderTimeline(tl));
      for (const d of body.querySelectorAll("details[id]")) if (open.has(d.id)) d.open = true;
      if (focused && focused !== "view-title") { const f = document.getElementById(focused); if (f) f.focus(); }
    }
    return tl.open > 0 ? 1000 : 5000;
  }, 1000);
}

function renderTimeline(tl) {
  const state = tl.state || {};
  const status = state && typeof state === "object" ? state.status : "";
  const statusCls = {confirmed: "b-ok", cancelled: "b-bad", rejected: "b-bad"}[status] || "b-info";
  const summary = el("div", {class: "cards"},
    el("div", {class: "card"}, el("div", {class: "k"}, "Status"), el("div", {class: "v", id: "state-status"}, status ? badge(status, statusCls) : "—")),
    card("Version", tl.version, "last event's aggregate version"),
    card("Decisions", tl.decisions.length, "log seq " + tl.seq),
    card("Open commands", tl.open, tl.open ? "updating every second" : "all settled; updating every 5 s"));
  const stateBox = el("details", {id: "state-json"}, el("summary", {}, "Current state (JSON)"), el("pre", {}, JSON.stringify(state, null, 2)));
  const list = el("ol", {class: "timeline", id: "timeline"}, tl.decisions.map((d, i) => renderDecision(d, i)));
  const out = [summary, stateBox, el("h2", {}, "Timeline")];
  if (tl.uninspected) out.push(el("p", {class: "muted"}, tl.uninspected + " older command(s) not inspected: esjet outbox <command id> tells their fate."));
  out.push(list);
  return out;
}

function renderDecision(d, i) {
  const head = el("div", {class: "dhead"},
    el("strong", {}, d.events.map(e => e.type).join(", ")),
    el("span", {class: "muted"}, "v" + d.events[0].version + (d.events.length > 1 ? "–" + d.events[d.events.length - 1].version : "") + " · log seq " + d.seq + " · " + fmtTime(d.time)),
    d.outcome_of ? el("span", {}, "outcome ", badge(d.outcome_of.outcome, d.outcome_of.outcome === "done" ? "b-ok" : "b-bad"), " of ", el("code", {}, d.outcome_of.command_id)) : null);
  const events = el("details", {id: "ev-" + d.seq}, el("summary", {}, d.events.length + " event(s)"),
    el("ul", {class: "events"}, d.events.map(e => el("li", {}, el("code", {}, e.type), " v" + e.version, e.data ? el("pre", {}, JSON.stringify(e.data, null, 2)) : null))));
  const li = el("li", {class: d.outcome_of ? "outcome" : null, "data-seq": d.seq}, head, events);
  if (d.commands.length) {
    li.append(el("table", {class: "commands"},
      el("thead", {}, el("tr", {}, el("th", {scope: "col"}, "Command issued"), el("th", {scope: "col"}, "Kind"), el("th", {scope: "col"}, "Fate"), el("th", {scope: "col"}, "Detail"), el("th", {scope: "col"}, "Outcome back"))),
      el("tbody", {}, d.commands.map(c => renderCommand(c)))));
  }
  return li;
}

function renderCommand(c) {
  const info = c.info || {};
  const reported = (info.reported || []).map(o => badge(o.outcome + " (seq " + o.seq + ")", o.outcome === "done" ? "b-ok" : "b-bad"));
  const dead = (info.dead || []);
  const detail = el("td", {}, c.detail || "");
  if (dead.length) {
    detail.append(" ", el("a", {href: "#/dlq/" + dead[dead.length - 1].seq}, "open dead letter " + dead[dead.length - 1].seq));
  }
  for (const a of c.history || []) {
    detail.append(el("div", {class: "muted"}, a.action + " by " + a.by + " at " + fmtTime(a.at) + (a.reason ? ": " + a.reason : "")));
  }
  if (info.receipt) {
    detail.append(el("details", {id: "rc-" + c.id}, el("summary", {}, "receipt"), el("pre", {}, JSON.stringify(info.receipt, null, 2))));
  }
  if (info.late_effect) detail.append(el("div", {class: "error"}, "late effect: done after the aggregate was told it failed"));
  return el("tr", {"data-command": c.id}, el("td", {}, el("code", {}, c.id)), el("td", {}, el("code", {}, c.kind)),
    el("td", {}, fateBadge(c.fate)), detail, el("td", {}, reported.length ? reported : (c.report ? "—" : "not asked")));
}

// ---------- OUTBOX and DLQ ----------

function dlqView() {
  const kind = new URLSearchParams(location.hash.split("?")[1] || "").get("kind") || "";
  heading(kind ? "Outbox & DLQ: " + kind : "Outbox & DLQ");
  const kindsBox = el("div");
  const lettersBox = el("div");
  // (Node.append writes a null as the text "null": leave it out instead.)
  main.append(el("h2", {}, "Commands per kind"), kindsBox, el("h2", {}, "Dead letters" + (kind ? " of " + kind : "")),
    ...(kind ? [el("p", {}, el("a", {href: "#/dlq"}, "← every kind"))] : []), lettersBox);
  poll(async () => {
    const [ov, dl] = await Promise.all([getJSON("/overview"), getJSON("/dlq" + (kind ? "?kind=" + encodeURIComponent(kind) : ""))]);
    kindsBox.replaceChildren(kindsTable(ov.kinds, ov));
    lettersBox.replaceChildren(dl.letters.length ? lettersTable(dl.letters) : el("p", {id: "no-letters"}, "No dead letters."),
      dl.allow_actions ? "" : el("p", {class: "muted"}, "Retry and discard are off on this node (console.allow_actions: false); esjet dlq does them from a shell."));
  }, 3000);
}

function lettersTable(letters) {
  return el("table", {id: "letters"},
    el("thead", {}, el("tr", {}, ["DLQ seq", "Command", "Kind", "Error", "Attempts", "Dead at", "Aggregate"].map(h => el("th", {scope: "col"}, h)))),
    el("tbody", {}, letters.map(l => el("tr", {"data-letter": l.seq},
      el("td", {}, el("a", {href: "#/dlq/" + l.seq}, "letter " + l.seq)),
      el("td", {}, el("code", {}, l.command_id)), el("td", {}, el("code", {}, l.kind)),
      el("td", {class: "error"}, l.error), num(l.attempts), el("td", {}, fmtTime(l.dead_at)),
      el("td", {}, l.aggregate_type ? el("a", {href: "#/aggregates/" + encodeURIComponent(l.aggregate_type) + "/" + encodeURIComponent(l.aggregate_id)}, l.aggregate_type + " " + l.aggregate_id) : "—")))));
}

function letterView(seq) {
  heading("Dead letter " + seq);
  const body = el("div");
  main.append(el("p", {}, el("a", {href: "#/dlq"}, "← all dead letters")), body);
  let last = "";
  poll(async () => {
    const d = await getJSON("/dlq/" + encodeURIComponent(seq));
    const key = JSON.stringify(d);
    if (key !== last) { last = key; body.replaceChildren(...renderLetter(d, seq)); }
  }, 3000);
}

function renderLetter(d, seq) {
  const out = [];
  const cmd = d.command || {};
  if (d.settled) {
    out.push(el("p", {class: "notice", id: "settled"}, "Settled, no longer a dead letter: " + d.settled.action + " by " + d.settled.by + " at " + fmtTime(d.settled.at) +
      (d.settled.reason ? " — reason: " + d.settled.reason : "") + (d.settled.new_outbox_seq ? " — re-driven to OUTBOX seq " + d.settled.new_outbox_seq : "")));
  }
  out.push(el("dl", {class: "kv", id: "letter"},
    el("dt", {}, "Command"), el("dd", {}, el("code", {}, d.command_id)),
    el("dt", {}, "Kind"), el("dd", {}, el("code", {}, d.kind)),
    el("dt", {}, "Error"), el("dd", {class: "error"}, d.error || "—"),
    el("dt", {}, "Attempts"), el("dd", {}, String(d.attempts)),
    el("dt", {}, "Worker"), el("dd", {}, d.worker || "—"),
    el("dt", {}, "Dead at"), el("dd", {}, fmtTime(d.dead_at)),
    el("dt", {}, "Aggregate"), el("dd", {}, d.aggregate_type ? el("a", {href: "#/aggregates/" + encodeURIComponent(d.aggregate_type) + "/" + encodeURIComponent(d.aggregate_id)}, d.aggregate_type + " " + d.aggregate_id + " (v" + d.aggregate_version + ")") : "—"),
    el("dt", {}, "Outcome back"), el("dd", {}, (cmd.reported || []).length ? cmd.reported.map(o => badge(o.outcome + " at seq " + o.seq, o.outcome === "done" ? "b-ok" : "b-bad")) : "none recorded")));
  out.push(el("details", {}, el("summary", {}, "Payload"), el("pre", {}, JSON.stringify(d.payload, null, 2))));
  out.push(el("h2", {}, "Attempts and errors"));
  const rows = (d.history || []).map(a => el("tr", {}, el("td", {}, "letter " + a.dlq_seq), num(a.attempts), el("td", {class: "error"}, a.error),
    el("td", {}, a.action + " by " + a.by + " at " + fmtTime(a.at) + (a.reason ? ": " + a.reason : ""))));
  if (!d.settled) rows.push(el("tr", {}, el("td", {}, "letter " + d.seq + " (this one)"), num(d.attempts), el("td", {class: "error"}, d.error), el("td", {}, "dead")));
  out.push(el("table", {id: "attempts"}, el("thead", {}, el("tr", {}, ["Dead letter", "Attempts", "Last error", "Then"].map(h => el("th", {scope: "col"}, h)))), el("tbody", {}, rows)));
  if (d.settled) return out;
  if (!d.allow_actions) {
    out.push(el("p", {class: "notice"}, "Retry and discard are off on this node. Set console.allow_actions: true (ESJET_CONSOLE_ALLOW_ACTIONS=true) to act here, or run esjet dlq retry " + d.command_id + " from a shell."));
    return out;
  }
  const result = el("div", {id: "action-result", role: "alert"});
  const retry = (afterFailed) => confirmAction({
    title: afterFailed ? "Retry anyway?" : "Retry this dead letter?",
    text: afterFailed
      ? "The aggregate was already told " + d.kind + "_failed and may have compensated. Re-drive " + d.command_id + " anyway? If it succeeds now, its effect is one the aggregate no longer expects."
      : "Send " + d.command_id + " back to OUTBOX (same command id, new message id). Its failed receipt is cleared and an audit record names you.",
    ok: afterFailed ? "Retry anyway" : "Retry",
    run: () => postJSON("/dlq/" + d.seq + "/retry", {command_id: d.command_id, after_failed: afterFailed}),
  }).then(rep => {
    if (!rep) return;
    result.replaceChildren(el("p", {class: "notice"}, "Re-driven to OUTBOX as " + rep.msg_id + " (audit: retried by " + rep.by + "). ",
      el("a", {href: "#/aggregates/" + encodeURIComponent(d.aggregate_type) + "/" + encodeURIComponent(d.aggregate_id)}, "Follow it on the timeline")));
    say("Dead letter " + d.seq + " retried");
  }, err => {
    if (err.code === "reported_failure") {
      result.replaceChildren(el("div", {class: "notice bad", id: "refused"}, el("p", {}, "Refused: " + err.message),
        el("button", {type: "button", id: "retry-anyway", class: "danger", onclick: () => retry(true)}, "Retry anyway…")));
      document.getElementById("retry-anyway").focus();
    } else {
      result.replaceChildren(el("p", {class: "notice bad"}, err.message));
    }
  });
  const discard = () => confirmAction({
    title: "Discard this dead letter?",
    text: "Settle " + d.command_id + " for good: it is not run again. The letter stays in the DLQ with an audit record carrying your reason.",
    ok: "Discard", reason: true,
    run: reason => postJSON("/dlq/" + d.seq + "/discard", {command_id: d.command_id, reason}),
  }).then(rep => {
    if (!rep) return;
    result.replaceChildren(el("p", {class: "notice"}, "Discarded (audit record by " + rep.by + ")."));
    say("Dead letter " + d.seq + " discarded");
  }, err => result.replaceChildren(el("p", {class: "notice bad"}, err.message)));
  out.push(el("h2", {}, "Actions"), el("div", {class: "actions"},
    el("button", {type: "button", id: "retry", class: "primary", onclick: () => retry(false)}, "Retry…"),
    el("button", {type: "button", id: "discard", class: "danger", onclick: discard}, "Discard…")), result);
  return out;
}

// confirmAction asks in a modal dialog (focus moves into it, Esc cancels)
// and runs opts.run on OK. It resolves to run's result, or null when
// cancelled; it rejects with run's error.
function confirmAction(opts) {
  const dlg = document.getElementById("confirm");
  const form = document.getElementById("confirm-form");
  const reasonRow = document.getElementById("confirm-reason-row");
  const reason = document.getElementById("confirm-reason");
  const errBox = document.getElementById("confirm-error");
  document.getElementById("confirm-title").textContent = opts.title;
  document.getElementById("confirm-text").textContent = opts.text;
  document.getElementById("confirm-ok").textContent = opts.ok;
  reasonRow.hidden = !opts.reason;
  reason.value = "";
  reason.required = !!opts.reason;
  errBox.textContent = "";
  const opener = document.activeElement;
  return new Promise((resolve, reject) => {
    const onSubmit = async e => {
      const ok = e.submitter && e.submitter.value === "ok";
      e.preventDefault();
      if (!ok) { finish(); resolve(null); return; }
      if (opts.reason && !reason.value.trim()) { errBox.textContent = "Say why: the reason is kept in the audit record."; reason.focus(); return; }
      try {
        const rep = await opts.run(reason.value.trim());
        finish(); resolve(rep);
      } catch (err) { finish(); reject(err); }
    };
    const onCancel = () => { finish(); resolve(null); };
    const finish = () => {
      form.removeEventListener("submit", onSubmit);
      dlg.removeEventListener("cancel", onCancel);
      if (dlg.open) dlg.close();
      if (opener && document.contains(opener)) opener.focus();
    };
    form.addEventListener("submit", onSubmit);
    dlg.addEventListener("cancel", onCancel);
    dlg.showModal();
    (opts.reason ? reason : document.getElementById("confirm-cancel")).focus();
  });
}

window.addEventListener("hashchange", () => { route.moved = true; route(); });
route();
