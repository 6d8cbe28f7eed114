// a2a-edge console: every text goes in with textContent (never as HTML), so a workflow id,
// a reason or a Korean utterance is shown as written and can never become markup.
"use strict";
const TOKEN = document.querySelector('meta[name="console-token"]').content;
const $ = (sel) => document.querySelector(sel);
let selected = null;
let pending = null;
let loaded = false; // the first data has arrived: until then the page says "loading", never "none"

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(text(child)));
  }
  return node;
}

function text(value) {
  if (value === null || value === undefined) return "-";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function banner(message) {
  const b = $("#banner");
  b.textContent = message || "";
  b.hidden = !message;
}

async function getJson(url) {
  const res = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  const body = await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

function fill(tbody, rows) {
  if (rows.length) tbody.replaceChildren(...rows);
  else tbody.replaceChildren(el("tr", {}, el("td", { colspan: "7", class: "note" }, "none")));
}

function fields(dl, obj) {
  dl.replaceChildren();
  for (const [k, v] of Object.entries(obj)) {
    if (v !== null && typeof v === "object" && !Array.isArray(v) && k !== "last_sync_refusal") {
      dl.append(el("dt", {}, k), el("dd", {}, Object.entries(v).map(([a, b]) => `${a} ${text(b)}`).join(", ")));
    } else {
      dl.append(el("dt", {}, k), el("dd", {}, Array.isArray(v) ? v.map(text).join("; ") || "-" : v));
    }
  }
}

const TERMINAL = new Set(["completed", "failed", "cancelled", "rejected"]);

function workflowRow(wf) {
  const cancel = el("button", { type: "button", class: "cancel", "data-workflow-id": wf.workflow_id }, "cancel");
  cancel.addEventListener("click", (ev) => { ev.stopPropagation(); cancelWorkflow(wf.workflow_id); });
  if (TERMINAL.has(wf.status)) cancel.hidden = true;
  const row = el("tr", { "data-workflow-id": wf.workflow_id },
    el("td", { class: "mono" }, wf.workflow_id),
    el("td", { class: `status status-${wf.status}` }, wf.status),
    el("td", {}, wf.etag), el("td", { class: "mono" }, wf.turn_id),
    el("td", {}, wf.created_at), el("td", {}, wf.reason), el("td", {}, cancel));
  if (wf.workflow_id === selected) row.classList.add("selected");
  row.addEventListener("click", () => { selected = wf.workflow_id; refresh(); });
  return row;
}

function timelineRow(entry) {
  const rest = Object.entries(entry).filter(([k, v]) =>
    !["ts", "etag", "kind", "phase", "step_id", "status"].includes(k) && v !== null && text(v) !== "[]" && text(v) !== "{}");
  const what = entry.kind === "event" ? `${entry.step_id || "-"} ${entry.status || ""}` : entry.kind;
  return el("tr", { class: `phase-${entry.phase}` },
    el("td", { class: "phase" }, entry.phase), el("td", {}, entry.ts),
    el("td", {}, entry.etag === null || entry.etag === undefined ? "" : `#${entry.etag}`),
    el("td", {}, what), el("td", { class: "details" }, rest.map(([k, v]) => `${k}=${text(v)}`).join(" ")));
}

async function showTimeline() {
  if (!selected) return;
  const trace = await getJson(`/api/workflow?id=${encodeURIComponent(selected)}`);
  const wf = trace.workflow;
  $("#timeline-id").textContent = wf.workflow_id;
  $("#timeline-head").textContent =
    `status ${wf.status} · etag ${wf.etag ?? 1} · plan ${wf.plan_id || "-"} · turn ${wf.turn_id || "-"}` +
    (wf.experience ? ` · experience ${wf.experience.experience_id} [${wf.experience_state || "-"}]` : "");
  fill($("#timeline tbody"), trace.timeline.map(timelineRow));
}

function memoryView(mem) {
  $("#promotion").textContent =
    `promotion: ${mem.promotion.min_mentions} mentions on ${mem.promotion.min_days} days` +
    ` within ${mem.promotion.window_days} days`;
  const box = $("#profile");
  box.replaceChildren();
  for (const [status, items] of Object.entries(mem.by_status)) {
    box.append(el("h3", {}, `${status} (${items.length})`));
    for (const item of items) {
      const value = item.withheld
        ? el("span", { class: "withheld" }, `withheld: ${item.withheld}`)
        : el("span", { class: "value" }, text(item.value));
      const src = Object.entries(item.sources).map(([k, v]) => `${k}: ${v.join(", ") || "-"}`).join(" · ");
      box.append(el("div", { class: "item", "data-key": item.key },
        el("b", {}, item.key), " = ", value,
        el("div", { class: "note" },
          `${item.category || "-"} · confidence ${item.confidence} · ${item.mentions} mentions · ` +
          `${item.window_mentions} and ${item.evidence_days}/${mem.promotion.min_days} days in the window · ` +
          `origin ${item.origin} · ${item.person_id === "household" ? "household" : `person ${item.person_id}`}`),
        el("div", { class: "note mono" }, `provenance ${src}`)));
    }
  }
  $("#blocked").textContent = `withheld from snapshots: ${mem.blocked_categories.join(", ") || "none"}`;
  fields($("#tiers"), mem.tiers);
  const people = $("#people");  // SPEC 5.7: each person's memory, and the household's
  if (people) {
    fill(people.querySelector("tbody"), Object.entries(mem.people || {}).map(([who, c]) =>
      el("tr", { "data-person": who }, el("td", {}, who), el("td", {}, c.pairs),
        el("td", {}, c.sessions), el("td", {}, c.daily_summaries), el("td", {}, c.profile_items))));
  }
}

function syncView(sync) {
  const { dead, inbox_dead: inbox, ...rest } = sync;
  fields($("#sync"), rest);
  fill($("#sync-dead tbody"), dead.map((d) => el("tr", {}, el("td", { class: "mono" }, d.write_id),
    el("td", {}, d.kind), el("td", {}, d.attempts), el("td", {}, d.reason), el("td", {}, d.dead_at))));
  fill($("#inbox-dead tbody"), inbox.map((d) => el("tr", {}, el("td", {}, d.id),
    el("td", {}, d.received_at), el("td", {}, d.bytes), el("td", {}, d.topic), el("td", {}, d.error))));
}

function render(all) {
  fill($("#workflows tbody"), all.workflows.map(workflowRow));
  memoryView(all.memory);
  syncView(all.sync);
  const { agents, ...health } = all.health;
  fields($("#health"), health);
  fill($("#agents tbody"), (agents || []).map((a) => el("tr", { "data-agent": a.capability_id },
    el("td", {}, a.known ? a.capability_id : `${a.capability_id} (not in the catalog)`),
    el("td", { class: a.state === "online" ? "ok" : "bad" }, a.state),
    el("td", { class: "mono" }, a.boot_id || "-"), el("td", {}, a.since),
    el("td", { class: "mono" }, a.tasks.join(" ") || "-"))));
  fill($("#consent tbody"), all.consent.grants.map((g) => el("tr", {}, el("td", {}, g.scope),
    el("td", {}, g.source), el("td", {}, g.granted_at), el("td", {}, g.expires_at))));
  const svc = $("#service");
  svc.textContent = `service: ${all.health.service} (${all.health.health})`;
  svc.className = `badge ${all.health.service === "running" ? "ok" : "bad"}`;
}

function settle(error) {
  // the page's state until the first data: "loading", or "not loaded" with why (retried at the
  // next event of the stream); once loaded, a later failure only shows the banner
  if (loaded) return;
  if (!error) {
    loaded = true;
    document.body.dataset.state = "loaded";
    $("#loading").hidden = true;
    $("main").removeAttribute("aria-busy");
    return;
  }
  document.body.dataset.state = "failed";
  $("#loading").textContent = `not loaded yet (retrying): ${error}`;
  $("#service").textContent = "service: not loaded";
  for (const node of document.querySelectorAll("tr.loading td, .loading")) {
    if (node.tagName !== "TR") node.textContent = "not loaded";
  }
}

async function refresh() {
  try {
    const all = await getJson("/api/overview");
    if (!selected && all.workflows.length) selected = all.workflows[0].workflow_id;
    render(all);
    settle();
    await showTimeline();
    banner("");
  } catch (err) {
    settle(err.message);
    banner(`cannot read the robot's state: ${err.message}`);
  }
}

function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 100);
}

async function cancelWorkflow(id) {
  const out = $("#cancel-result");
  out.textContent = `cancelling ${id}…`;
  try {
    const res = await fetch("/api/cancel", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Console-Token": TOKEN },
      body: JSON.stringify({ workflow_id: id }),
    });
    const body = await res.json();
    out.textContent = res.ok ? `cancelled ${(body.result.cancelled || [id]).join(", ")}` : `not cancelled: ${body.error}`;
  } catch (err) {
    out.textContent = `not cancelled: ${err.message}`;
  }
  soon();
}

async function snapshot(ev) {
  if (ev) ev.preventDefault();
  try {
    const shown = await getJson(`/api/snapshot?utterance=${encodeURIComponent($("#utterance").value)}`);
    $("#snapshot-meta").textContent = `for “${shown.utterance}” · ${shown.bytes} bytes`;
    $("#snapshot").textContent = JSON.stringify(shown.snapshot, null, 2);
  } catch (err) {
    $("#snapshot-meta").textContent = `no snapshot: ${err.message}`;
  }
}

function live() {
  const badge = $("#live");
  const stream = new EventSource("/events");
  const mark = (data) => {
    badge.textContent = data.following ? "live" : "not following the broker";
    badge.className = `badge ${data.following ? "ok" : "bad"}`;
  };
  stream.addEventListener("hello", (e) => { mark(JSON.parse(e.data)); soon(); });
  stream.addEventListener("change", (e) => { mark(JSON.parse(e.data)); soon(); });
  stream.addEventListener("tick", (e) => { mark(JSON.parse(e.data)); soon(); });
  stream.onerror = () => { badge.textContent = "console unreachable (retrying)"; badge.className = "badge bad"; };
}

function views() {
  for (const button of document.querySelectorAll("nav button")) {
    button.addEventListener("click", () => {
      for (const b of document.querySelectorAll("nav button")) b.classList.toggle("current", b === button);
      for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${button.dataset.view}`;
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  views();
  $("#snapshot-form").addEventListener("submit", snapshot);
  refresh();
  live();
});
