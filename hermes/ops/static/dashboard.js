// The dashboard: plain DOM, no framework, no build step. Data is only ever set as
// text (transcripts hold what strangers wrote), never as HTML.
"use strict";

let csrf = "";

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = cell instanceof Node ? document.createElement("td") : el("td", cell);
    if (cell instanceof Node) td.appendChild(cell);
    tr.appendChild(td);
  }
  return tr;
}

function fill(tbody, rows, empty) {
  tbody.replaceChildren(...rows);
  if (!rows.length && empty) {
    const tr = row([empty]);
    tr.firstChild.colSpan = 9;
    tbody.appendChild(tr);
  }
}

function when(ts) {
  return ts ? new Date(ts * 1000).toLocaleString() : "-";
}

function stateCell(state) {
  return el("span", state, "state-" + String(state).replace(/\s+/g, "-"));
}

function button(label, onClick, attrs) {
  const b = el("button", label);
  b.type = "button";
  for (const [k, v] of Object.entries(attrs || {})) b.setAttribute(k, v);
  b.addEventListener("click", onClick);
  return b;
}

function showError(message) {
  const p = document.getElementById("error");
  p.textContent = message || "";
  p.hidden = !message;
}

async function api(path, method, payload) {
  const options = { method: method || "GET", headers: {} };
  if (options.method === "POST") options.headers["X-CSRF-Token"] = csrf;
  if (payload !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(payload);
  }
  const response = await fetch(path, options);
  if (response.status === 401) {
    window.location.reload(); // the login form
    throw new Error("logged out");
  }
  const body = await response.json();
  if (!response.ok && path !== "/ready") throw new Error(body.error || response.statusText);
  return body;
}

async function act(path, payload) {
  try {
    const result = await api(path, "POST", payload);
    showError("");
    return result;
  } catch (err) {
    showError(err.message);
    return null;
  }
}

// -- the actor tree and readiness, every 2 s -----------------------------------------

function treeRows(node, depth, out) {
  const name = el("span", node.name);
  name.style.paddingLeft = depth * 1.2 + "em";
  const detail = Object.entries(node.detail || {})
    .filter(([, v]) => v !== null)
    .map(([k, v]) => k + "=" + v)
    .join(" ");
  const tr = row([name, node.kind, stateCell(node.state), node.restarts, node.mailbox_depth,
    detail]);
  tr.dataset.actor = node.name;
  out.push(tr);
  for (const child of node.children) treeRows(child, depth + 1, out);
  return out;
}

async function refreshTree() {
  const data = await api("/api/tree");
  fill(document.querySelector("#tree tbody"), treeRows(data.tree, 0, []));
  document.getElementById("lag").textContent = "loop lag " + data.loop_lag.toFixed(3) + " s";
}

async function refreshReady() {
  const data = await api("/ready");
  const badge = document.getElementById("readiness");
  badge.textContent = data.ready ? "ready" : "not ready";
  badge.className = "badge " + (data.ready ? "ready" : "unready");
  const adapters = Object.entries(data.adapters || {}).map(([name, a]) => {
    const tr = row([name, stateCell(a.state),
      a.progress_age === null ? "-" : a.progress_age + " s ago", a.restarts, a.reason || ""]);
    tr.dataset.adapter = name;
    return tr;
  });
  fill(document.querySelector("#adapters tbody"), adapters);
  const o = data.outbox || {};
  document.getElementById("outbox-summary").textContent = "Outbox: " + o.depth + " waiting" +
    (o.oldest_pending_age ? ", oldest " + o.oldest_pending_age + " s" : "") + "; " + o.dead +
    " dead";
  const sch = data.scheduler || {};
  document.getElementById("scheduler-summary").textContent = "Next cron fire: " +
    when(sch.next_fire) + "; " + (sch.failing || []).length + " job(s) failing";
  document.getElementById("problems").replaceChildren(
    ...(data.problems || []).map((p) => el("li", p, "error")));
}

// -- sessions ----------------------------------------------------------------------

async function openTranscript(id) {
  const data = await api("/api/sessions/" + encodeURIComponent(id));
  document.getElementById("transcript-title").textContent =
    (data.session.title || data.session.id) + " (" + data.session.source + ")";
  const items = data.messages.map((m) => {
    const li = el("li");
    li.appendChild(el("span", m.role === "tool" ? "tool " + (m.tool_name || "") : m.role,
      "role"));
    li.appendChild(el("span", m.content || (m.tool_calls ? JSON.stringify(m.tool_calls) : "")));
    if (m.undone_at) {  // /undo took it out of what the model sees; the transcript keeps it
      li.classList.add("undone");
      li.appendChild(el("span", "undone", "note"));
    }
    return li;
  });
  document.getElementById("transcript-messages").replaceChildren(...items);
  document.getElementById("transcript").hidden = false;
}

function sessionLink(id) {
  const a = el("a", id);
  a.dataset.session = id;
  a.addEventListener("click", () => openTranscript(id).catch((e) => showError(e.message)));
  return a;
}

async function refreshSessions() {
  const q = document.getElementById("session-search").value.trim();
  const data = await api("/api/sessions" + (q ? "?q=" + encodeURIComponent(q) : ""));
  const rows = q
    ? data.map((h) => row([sessionLink(h.session), h.role, h.snippet, when(h.timestamp)]))
    : data.map((s) => row([sessionLink(s.id), s.source, s.title || "",
      when(s.last_activity_at || s.started_at)]));
  fill(document.querySelector("#sessions tbody"), rows, q ? "no matches" : "no sessions");
}

// -- cron ----------------------------------------------------------------------------

let historyOf = null;

async function showHistory(job) {
  historyOf = job;
  const history = await api("/api/cron/" + encodeURIComponent(job.id) + "/runs");
  document.getElementById("cron-history-title").textContent = "Runs of " + job.name;
  fill(document.getElementById("cron-runs"),
    history.runs.map(({ run: r }) =>
      row([r.fence, when(r.started_at), stateCell(r.status), r.error || ""])),
    "no runs yet");
  document.getElementById("cron-history").hidden = false;
}

async function cronAction(job, action) {
  const done = await act("/api/cron/" + encodeURIComponent(job.id) + "/" + action);
  if (done) {
    await refreshCron();
    await showHistory(job);
  }
}

async function refreshCron() {
  const jobs = await api("/api/cron");
  const rows = jobs.map((job) => {
    const skills = job.skills && job.skills.length ? " (skills: " + job.skills.join(", ") + ")" : "";
    const name = el("a", job.name + skills);
    name.addEventListener("click", () => showHistory(job).catch((e) => showError(e.message)));
    const buttons = el("span");
    buttons.append(
      button("Run", () => cronAction(job, "run"), { "data-job": job.id, "data-action": "run" }),
      job.state === "paused"
        ? button("Resume", () => cronAction(job, "resume"),
          { "data-job": job.id, "data-action": "resume" })
        : button("Pause", () => cronAction(job, "pause"),
          { "data-job": job.id, "data-action": "pause" }));
    const tr = row([name, job.schedule_display, stateCell(job.state), when(job.next_run_at),
      job.failure_streak ? job.failure_streak + " in a row" : "", job.last_status || "-",
      buttons]);
    tr.dataset.job = job.id;
    return tr;
  });
  fill(document.querySelector("#cron tbody"), rows, "no cron jobs");
  if (historyOf) {
    const still = jobs.find((j) => j.id === historyOf.id);
    if (still) await showHistory(still);
  }
}

// -- outbox and pairing ------------------------------------------------------------

async function refreshOutbox() {
  const rows = (await api("/api/outbox")).map((r) => {
    const retry = ["dead", "unknown"].includes(r.state)
      ? button("Retry", async () => { if (await act("/api/outbox/" + r.id + "/retry")) {
        await refreshOutbox(); } }, { "data-row": r.id })
      : el("span");
    const tr = row([r.id, r.to, r.kind, stateCell(r.state), r.attempts,
      r.error ? r.text + " [" + r.error + "]" : r.text, retry]);
    tr.dataset.row = r.id;
    return tr;
  });
  fill(document.querySelector("#outbox tbody"), rows, "nothing waiting, nothing dead");
}

// What the scan found in the project files (AGENTS.md) the prompts loaded: those lines
// were left out of the prompt; the owner mends the file.
async function refreshContext() {
  const rows = (await api("/api/context")).map((f) =>
    row([f.path, f.where, f.kind, f.what]));
  fill(document.querySelector("#context tbody"), rows, "the scan flagged nothing");
}

// Approving takes the code the user was sent (as `hermes pairing approve` does): a
// stranger picks their own display name, so the list's names prove nothing.
async function approveByCode(event) {
  event.preventDefault();
  const platform = document.getElementById("pairing-platform").value;
  const code = document.getElementById("pairing-code");
  const owner = document.getElementById("pairing-owner");
  if (!platform || !code.value.trim()) {
    showError("Type the code the user was sent.");
    return;
  }
  if (await act("/api/pairing/" + encodeURIComponent(platform) + "/approve",
    { code: code.value, owner: owner.checked })) {
    code.value = "";
    owner.checked = false;
    await refreshPairing();
  }
}

async function denyRequest(p) {
  const path = "/api/pairing/" + encodeURIComponent(p.platform) + "/" +
    encodeURIComponent(p.user_id) + "/deny";
  if (await act(path)) await refreshPairing();
}

function platformChoices(platforms) {
  const select = document.getElementById("pairing-platform");
  const chosen = select.value;
  select.replaceChildren(...platforms.map((name) => {
    const option = el("option", name);
    option.value = name;
    return option;
  }));
  if (platforms.includes(chosen)) select.value = chosen;
}

async function refreshPairing() {
  const data = await api("/api/pairing");
  platformChoices([...new Set(data.pending.map((p) => p.platform))].sort());
  fill(document.querySelector("#pairing tbody"), data.pending.map((p) => {
    const ids = { "data-user": p.user_id, "data-platform": p.platform };
    const deny = button("Deny", () => denyRequest(p), { ...ids, "data-action": "deny" });
    const hint = el("span", p.code_hint + "*".repeat(Math.max(0, 8 - p.code_hint.length)),
      "hint");
    const tr = row([p.platform, hint, p.user_id, p.user_name || "",
      Math.round(p.age / 60) + " min ago", deny]);
    tr.dataset.platform = p.platform;
    tr.dataset.user = p.user_id;
    return tr;
  }), "no pending requests");
  fill(document.querySelector("#approved tbody"), data.approved.map((a) => {
    const tr = row([a.platform, a.user_id, a.user_name || "", a.owner ? "owner" : "",
      when(a.approved_at)]);
    tr.dataset.approved = a.platform + ":" + a.user_id;
    return tr;
  }), "nobody yet");
}

// -- approvals -----------------------------------------------------------------------

async function decide(a, action) {
  if (await act("/api/approvals/" + encodeURIComponent(a.id) + "/" + action)) {
    await refreshApprovals();
  }
}

async function refreshApprovals() {
  const rows = (await api("/api/approvals")).map((a) => {
    const ids = { "data-approval": a.id };
    const actions = el("span");
    actions.append(
      button("Approve", () => decide(a, "approve"), { ...ids, "data-action": "approve" }),
      button("Always", () => decide(a, "always"), { ...ids, "data-action": "always" }),
      button("Deny", () => decide(a, "deny"), { ...ids, "data-action": "deny" }));
    const who = (a.user_name ? a.user_name + " " : "") + "(" + a.platform + " " + a.user_id + ")";
    const tr = row([a.id, el("code", a.command), a.cwd, who, when(a.expires_at), actions]);
    tr.dataset.approval = a.id;
    return tr;
  });
  fill(document.querySelector("#approvals tbody"), rows, "nothing waits for approval");
}

// -- the loop ------------------------------------------------------------------------

function every(seconds, fn) {
  const run = () => fn().catch((e) => showError(e.message));
  run();
  setInterval(run, seconds * 1000);
}

async function start() {
  csrf = (await api("/api/session")).csrf;
  document.getElementById("logout").addEventListener("click", async () => {
    await act("/logout");
    window.location.reload();
  });
  document.getElementById("pairing-approve-form").addEventListener("submit", approveByCode);
  document.getElementById("session-search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    refreshSessions().catch((e) => showError(e.message));
  });
  every(2, async () => { await refreshTree(); await refreshReady(); });
  every(5, refreshCron);
  every(5, refreshOutbox);
  every(10, refreshContext);
  every(5, refreshPairing);
  every(2, refreshApprovals);
  refreshSessions().catch((e) => showError(e.message));
}

document.addEventListener("DOMContentLoaded", () => start().catch((e) => showError(e.message)));
