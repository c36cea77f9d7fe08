// Ferrite's dashboard. Every figure and every action goes through GUI RPC requests posted to
// /api/rpc (the daemon answers them exactly as it answers BOINC Manager); the history of job
// logs and of the client's own CPU and memory comes from /api/history.
"use strict";

const NOW_EVERY_MS = 2000;
const HISTORY_EVERY_MS = 60000;
const DAYS = 14;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
const SVG = "http://www.w3.org/2000/svg";

const app = {
  secret: sessionStorage.getItem("ferrite-secret") || "",
  projects: [],
};

// ---- small DOM helpers -------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v !== false && v !== null && v !== undefined) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c !== null && c !== undefined) el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) el.append(c instanceof Node ? c : String(c));
  return el;
}

function fill(tbody, rows, empty) {
  tbody.replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 8, class: "empty" }, empty))]));
}

// Text of a direct child element.
function child(el, tag) {
  for (const c of el.children) if (c.tagName === tag) return c.textContent.trim();
  return null;
}
function num(el, tag) { const t = child(el, tag); return t === null ? 0 : Number(t) || 0; }
function flag(el, tag) {
  for (const c of el.children) if (c.tagName === tag) return c.textContent.trim() !== "0";
  return false;
}
function kids(el, tag) { return Array.from(el.children).filter((c) => c.tagName === tag); }

function xmlText(t) {
  return String(t).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;" }[c]));
}

function duration(secs) {
  if (!(secs > 0)) return "—";
  secs = Math.round(secs);
  const d = Math.floor(secs / 86400), hh = Math.floor((secs % 86400) / 3600);
  const mm = Math.floor((secs % 3600) / 60), ss = secs % 60;
  const two = (n) => String(n).padStart(2, "0");
  return (d ? d + "d " : "") + two(hh) + ":" + two(mm) + ":" + two(ss);
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : String(Math.round(n))) + " " + units[i];
}

function dayOf(t) { return Math.floor((t - new Date(t * 1000).getTimezoneOffset() * 60) / 86400); }

// ---- talking to the daemon ---------------------------------------------------------------

function headers() {
  const hd = { "X-Ferrite-Dashboard": "1" };
  if (app.secret) hd.Authorization = "Bearer " + app.secret;
  return hd;
}

function setStatus(text, bad) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = bad ? "bad" : "";
}

async function rpc(op) {
  const r = await fetch("/api/rpc", {
    method: "POST",
    headers: Object.assign({ "Content-Type": "application/xml" }, headers()),
    body: "<boinc_gui_rpc_request>\n" + op + "\n</boinc_gui_rpc_request>\n",
  });
  if (r.status === 401) {
    document.getElementById("login").hidden = false;
    throw new Error("this needs the GUI RPC password or the token");
  }
  const doc = new DOMParser().parseFromString(await r.text(), "application/xml");
  const root = doc.documentElement;
  if (!r.ok || root.tagName !== "boinc_gui_rpc_reply") throw new Error("HTTP " + r.status);
  const err = child(root, "error");
  if (err !== null) throw new Error(err);
  return root;
}

async function act(op, what) {
  try {
    await rpc(op);
    setStatus(what + ": done");
    await refreshNow();
  } catch (e) {
    setStatus(what + ": " + e.message, true);
  }
}

// ---- now ---------------------------------------------------------------------------------

const MODES = ["", "always", "auto", "never"];

function modeRow(label, op, mode, perm, delay) {
  const sel = h("select", { "aria-label": label + " mode", class: "mode" },
    ...["always", "auto", "never"].map((m) => h("option", { value: m, selected: m === MODES[perm] }, m)));
  const dur = h("select", { "aria-label": label + " duration", class: "duration" },
    h("option", { value: "0" }, "until changed"),
    h("option", { value: "3600" }, "for 1 hour"),
    h("option", { value: "21600" }, "for 6 hours"),
    h("option", { value: "86400" }, "for 1 day"));
  const set = h("button", {
    onclick: () => act("<" + op + "><" + sel.value + "/><duration>" + dur.value + "</duration></" + op + ">",
      label + " mode " + sel.value),
  }, "Set");
  return h("tr", { "data-mode": op }, h("td", {}, label), h("td", { class: "mode" }, modeText(mode, perm, delay)),
    h("td", {}, sel, dur, set));
}

function modeText(mode, perm, delay) {
  return MODES[mode] + (delay > 0 ? " (for " + duration(delay) + ", then " + MODES[perm] + ")" : "");
}

function renderModes(cc) {
  const tbody = document.querySelector("#modes tbody");
  const figures = [
    ["set_run_mode", "task_mode"], ["set_gpu_mode", "gpu_mode"], ["set_network_mode", "network_mode"],
  ];
  if (tbody.children.length === figures.length) {
    // Only the modes in force change: a choice being made in the selects stays.
    for (const [op, tag] of figures) {
      const cell = tbody.querySelector("tr[data-mode=\"" + op + "\"] td.mode");
      if (cell) cell.textContent = modeText(num(cc, tag), num(cc, tag + "_perm"), num(cc, tag + "_delay"));
    }
    return;
  }
  tbody.replaceChildren(
    modeRow("Computing", "set_run_mode", num(cc, "task_mode"), num(cc, "task_mode_perm"), num(cc, "task_mode_delay")),
    modeRow("GPU", "set_gpu_mode", num(cc, "gpu_mode"), num(cc, "gpu_mode_perm"), num(cc, "gpu_mode_delay")),
    modeRow("Network", "set_network_mode", num(cc, "network_mode"), num(cc, "network_mode_perm"), num(cc, "network_mode_delay")),
  );
}

// cc_config ferrite_checkpoint_grace, as ferrite_explain tells it.
function renderCheckpointGrace(explain) {
  const el = document.getElementById("checkpoint-grace");
  const secs = num(explain, "checkpoint_grace");
  el.dataset.secs = String(secs);
  el.textContent = "Suspending at checkpoint (ferrite_checkpoint_grace): " + (secs > 0
    ? "when computing is suspended for a reason that can wait, a running task that checkpoints runs on for at most "
      + duration(secs) + " to its next checkpoint"
    : "off; every suspension stops the tasks at once");
}

function projectName(url) {
  const p = app.projects.find((x) => x.url === url);
  return p && p.name ? p.name : url;
}

function renderIdle(explain) {
  const items = [];
  for (const sp of kids(explain, "suspended")) {
    items.push(h("li", {}, h("b", {}, child(sp, "what") + ": "), "suspended — " + child(sp, "reason")));
  }
  for (const t of kids(explain, "thermal")) {
    const limit = (what) => {
      const l = num(t, what + "_limit");
      if (!(l > 0)) return null;
      const now = child(t, what + "_temp");
      return what.toUpperCase() + " " + l.toFixed(0) + " °C" + (now ? " (now " + Number(now).toFixed(0) + " °C)" : " (no sensor)");
    };
    const limits = [limit("cpu"), limit("gpu")].filter(Boolean).join(", ");
    const reason = child(t, "reason");
    items.push(h("li", { "data-thermal": reason ? "holding" : "idle" }, h("b", {}, "Temperature limits: "),
      limits + (reason ? " — " + reason : " — not acting")));
  }
  const idle = num(explain, "idle_cpus");
  if (idle > 0) items.push(h("li", {}, h("b", {}, "CPU: "), idle.toFixed(2) + " instances idle"));
  for (const f of kids(explain, "fetch")) {
    const res = child(f, "resource") || "all";
    const verdict = child(f, "verdict");
    items.push(h("li", { "data-resource": res },
      h("b", {}, res + (child(f, "project") ? " — " + projectName(child(f, "project")) : "") + ": "),
      (verdict === "request" ? "asking for work: " : "no work asked: ") + child(f, "reason")));
  }
  if (child(explain, "pending") !== null) items.push(h("li", {}, "the scheduler has not run yet"));
  // A kernel without Landlock: apps run as under the official client; say so.
  const confine = child(explain, "confine_support");
  if (confine && confine.startsWith("apps run unconfined")) items.push(h("li", {}, h("b", {}, "Apps: "), confine));
  document.getElementById("idle").replaceChildren(...(items.length ? items : [h("li", {}, "nothing is idle")]));
}

function renderProjects(ps) {
  app.projects = kids(ps, "project").map((p) => ({
    url: child(p, "master_url"),
    name: child(p, "project_name"),
    suspended: flag(p, "suspended_via_gui"),
    nomore: flag(p, "dont_request_more_work"),
    credit: num(p, "user_total_credit"),
  }));
  const rows = app.projects.map((p) => {
    const url = "<project_url>" + xmlText(p.url) + "</project_url>";
    const op = (name) => "<" + name + ">" + url + "</" + name + ">";
    const status = [p.suspended ? "suspended" : "", p.nomore ? "no new tasks" : ""].filter(Boolean).join(", ") || "active";
    return h("tr", { "data-project": p.url },
      h("td", {}, p.name || p.url), h("td", {}, status), h("td", { class: "num" }, p.credit.toFixed(0)),
      h("td", {},
        h("button", { onclick: () => act(op(p.suspended ? "project_resume" : "project_suspend"), p.name), class: "act-suspend" },
          p.suspended ? "Resume" : "Suspend"),
        h("button", { onclick: () => act(op(p.nomore ? "project_allowmorework" : "project_nomorework"), p.name), class: p.nomore ? "act-allowmore" : "act-nomore" },
          p.nomore ? "Allow new tasks" : "No new tasks"),
        h("button", { onclick: () => act(op("project_update"), p.name + " update") }, "Update")));
  });
  fill(document.querySelector("#projects tbody"), rows, "no projects attached");
}

function taskState(r, at) {
  const st = num(r, "state");
  if (flag(r, "got_server_ack")) return "reported";
  if (st === 3 || st === 7) return "error";
  if (st === 6) return "aborted";
  if (flag(r, "ready_to_report") || st === 5) return "ready to report";
  if (st === 4) return "uploading";
  if (st < 2) return "downloading";
  if (flag(r, "suspended_via_gui")) return "suspended";
  const p = app.projects.find((x) => x.url === child(r, "project_url"));
  if (p && p.suspended) return "project suspended";
  if (at && num(at, "active_task_state") === 1) return "running";
  return at ? "waiting" : "ready";
}

function renderTasks(results) {
  const rows = kids(results, "result").map((r) => {
    const at = kids(r, "active_task")[0];
    const name = child(r, "name");
    const url = child(r, "project_url");
    const state = taskState(r, at);
    // As BOINC Manager: the app's report while it has a process record, else 0 before
    // and 100 % after computing (uploading, errors and aborts included).
    const frac = at ? num(at, "fraction_done") : (num(r, "state") >= 3 ? 1 : 0);
    const target = "<project_url>" + xmlText(url) + "</project_url><name>" + xmlText(name) + "</name>";
    const suspended = flag(r, "suspended_via_gui");
    const active = !["error", "aborted", "ready to report", "reported", "uploading"].includes(state);
    return h("tr", { "data-task": name, "data-state": state },
      h("td", {}, projectName(url)), h("td", { class: "name" }, name), h("td", { class: "state" }, state),
      h("td", {}, h("progress", { max: "1", value: String(frac) }), " " + (frac * 100).toFixed(1) + "%"),
      h("td", { class: "num" }, duration(at ? num(at, "elapsed_time") : num(r, "final_elapsed_time"))),
      h("td", { class: "num" }, active ? duration(num(r, "estimated_cpu_time_remaining")) : "—"),
      h("td", {}, new Date(num(r, "report_deadline") * 1000).toLocaleString()),
      h("td", {}, active ? [
        h("button", {
          class: suspended ? "act-resume" : "act-suspend",
          onclick: () => act("<" + (suspended ? "resume_result" : "suspend_result") + ">" + target + "</" +
            (suspended ? "resume_result" : "suspend_result") + ">", name),
        }, suspended ? "Resume" : "Suspend"),
        h("button", {
          class: "act-abort",
          onclick: () => { if (confirm("Abort task " + name + "? Its work so far is lost.")) act("<abort_result>" + target + "</abort_result>", name + " abort"); },
        }, "Abort"),
      ].reduce((f, b) => (f.append(b, " "), f), document.createDocumentFragment()) : ""));
  });
  fill(document.querySelector("#tasks tbody"), rows, "no tasks");
}

function renderTransfers(ft) {
  const rows = kids(ft, "file_transfer").map((f) => {
    const pfx = kids(f, "persistent_file_xfer")[0];
    const fx = kids(f, "file_xfer")[0];
    const size = num(f, "nbytes");
    const done = fx ? num(fx, "bytes_xferred") : (pfx ? num(pfx, "last_bytes_xferred") : 0);
    const up = flag(f, "is_upload") || child(f, "direction") === "upload" || (pfx && flag(pfx, "is_upload"));
    const backoff = pfx ? num(pfx, "next_request_time") - Date.now() / 1000 : 0;
    return h("tr", {},
      h("td", {}, projectName(child(f, "project_url"))), h("td", { class: "name" }, child(f, "name")),
      h("td", {}, up ? "upload" : "download"),
      h("td", {}, h("progress", { max: String(size || 1), value: String(done) })),
      h("td", { class: "num" }, bytes(size)),
      h("td", {}, fx ? "active" : backoff > 0 ? "retry in " + duration(backoff) : "queued"));
  });
  fill(document.querySelector("#transfers tbody"), rows, "no transfers");
}

async function refreshNow() {
  try {
    const [cc, ps, res, ft, ex] = await Promise.all([
      rpc("<get_cc_status/>"), rpc("<get_project_status/>"), rpc("<get_results/>"),
      rpc("<get_file_transfers/>"), rpc("<ferrite_explain/>"),
    ]);
    const ccs = kids(cc, "cc_status")[0];
    if (ccs) renderModes(ccs);
    renderProjects(kids(ps, "projects")[0] || ps);
    renderTasks(kids(res, "results")[0] || res);
    renderTransfers(kids(ft, "file_transfers")[0] || ft);
    renderIdle(kids(ex, "ferrite_explain")[0] || ex);
    renderCheckpointGrace(kids(ex, "ferrite_explain")[0] || ex);
    document.body.dataset.loaded = "now";
    setStatus("updated " + new Date().toLocaleTimeString());
  } catch (e) {
    setStatus(e.message, true);
  }
}

// ---- history -----------------------------------------------------------------------------

function lastDays() {
  const today = dayOf(Date.now() / 1000);
  return Array.from({ length: DAYS }, (_, i) => today - DAYS + 1 + i);
}

function dayLabel(d) {
  const t = new Date(d * 86400000);
  return (t.getUTCMonth() + 1) + "/" + t.getUTCDate();
}

// A stacked bar chart: one bar per day, one colour per series.
function barChart(id, title, unit, days, series) {
  const W = 420, H = 180, L = 44, B = 22, T = 8;
  const totals = days.map((_, i) => series.reduce((a, sr) => a + (sr.values[i] || 0), 0));
  const max = Math.max(...totals, 0) || 1;
  const bw = (W - L) / days.length;
  const svg = s("svg", { viewBox: "0 0 " + W + " " + (H + B + T), role: "img", "aria-label": title, class: "chart" });
  svg.append(s("line", { x1: L, y1: T, x2: L, y2: H + T, stroke: "#888" }),
    s("line", { x1: L, y1: H + T, x2: W, y2: H + T, stroke: "#888" }),
    s("text", { x: L - 4, y: T + 10, "text-anchor": "end", class: "axis" }, fmtAxis(max)),
    s("text", { x: L - 4, y: H + T, "text-anchor": "end", class: "axis" }, "0"));
  days.forEach((d, i) => {
    let y = H + T;
    series.forEach((sr, k) => {
      const v = sr.values[i] || 0;
      if (v <= 0) return;
      const hgt = (v / max) * H;
      y -= hgt;
      svg.append(s("rect", { x: L + i * bw + 1, y, width: Math.max(bw - 2, 1), height: hgt, fill: COLORS[k % COLORS.length], class: "bar" },
        s("title", {}, dayLabel(d) + " " + sr.name + ": " + fmtAxis(v) + " " + unit)));
    });
    if (i % 3 === 0 || i === days.length - 1) {
      svg.append(s("text", { x: L + i * bw + bw / 2, y: H + T + 16, "text-anchor": "middle", class: "axis" }, dayLabel(d)));
    }
  });
  const legend = h("ul", { class: "legend" }, ...series.map((sr, k) =>
    h("li", {}, s("svg", { width: 10, height: 10 }, s("rect", { width: 10, height: 10, fill: COLORS[k % COLORS.length] })), " " + sr.name)));
  document.getElementById(id).replaceChildren(h("figcaption", {}, title + " (" + unit + ")"), svg, legend);
}

// A line chart over time.
function lineChart(id, title, unit, points) {
  const W = 420, H = 180, L = 44, B = 22, T = 8;
  const fig = document.getElementById(id);
  if (points.length < 2) {
    fig.replaceChildren(h("figcaption", {}, title + " (" + unit + ")"), h("p", { class: "empty" }, "collecting samples…"));
    return;
  }
  const t0 = points[0][0], t1 = points[points.length - 1][0];
  const max = Math.max(...points.map((p) => p[1]), 0) || 1;
  const x = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (W - L);
  const y = (v) => T + H - (v / max) * H;
  const svg = s("svg", { viewBox: "0 0 " + W + " " + (H + B + T), role: "img", "aria-label": title, class: "chart" });
  svg.append(s("line", { x1: L, y1: T, x2: L, y2: H + T, stroke: "#888" }),
    s("line", { x1: L, y1: H + T, x2: W, y2: H + T, stroke: "#888" }),
    s("text", { x: L - 4, y: T + 10, "text-anchor": "end", class: "axis" }, fmtAxis(max)),
    s("text", { x: L - 4, y: H + T, "text-anchor": "end", class: "axis" }, "0"),
    s("polyline", { points: points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "), fill: "none", stroke: COLORS[0], "stroke-width": 2, class: "line" }),
    s("text", { x: L, y: H + T + 16, class: "axis" }, new Date(t0 * 1000).toLocaleTimeString()),
    s("text", { x: W, y: H + T + 16, "text-anchor": "end", class: "axis" }, new Date(t1 * 1000).toLocaleTimeString()));
  fig.replaceChildren(h("figcaption", {}, title + " (" + unit + ")"), svg);
}

function fmtAxis(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + "k";
  return v >= 10 ? v.toFixed(0) : v.toFixed(2);
}

async function refreshHistory() {
  try {
    if (!app.projects.length) {
      const ps = await rpc("<get_project_status/>");
      renderProjects(kids(ps, "projects")[0] || ps);
    }
    const urls = app.projects.map((p) => p.url);
    const [hr, stats, xfer] = await Promise.all([
      fetch("/api/history?urls=" + encodeURIComponent(urls.join(" ")), { headers: headers() }).then((r) => {
        if (!r.ok) throw new Error("history: HTTP " + r.status);
        return r.json();
      }),
      rpc("<get_statistics/>"), rpc("<get_daily_xfer_history/>"),
    ]);
    const days = lastDays();
    const idx = (d) => days.indexOf(d);
    const perProject = (col, scale) => urls.map((u) => {
      const values = days.map(() => 0);
      for (const row of hr.job_logs[u] || []) {
        const i = idx(dayOf(row[0]));
        if (i >= 0) values[i] += col === null ? 1 : row[col] / scale;
      }
      return { name: projectName(u), values };
    });
    barChart("chart-tasks", "Tasks done per day", "tasks", days, perProject(null, 1));
    barChart("chart-cpu", "CPU time per day", "hours", days, perProject(1, 3600));
    barChart("chart-elapsed", "Run time (CPU or GPU task) per day", "hours", days, perProject(2, 3600));

    const statsRoot = kids(stats, "statistics")[0] || stats;
    const credit = kids(statsRoot, "project_statistics").map((ps) => {
      const values = days.map(() => 0);
      const daily = kids(ps, "daily_statistics").map((d) => [dayOf(num(d, "day") + 43200), num(d, "host_total_credit")])
        .sort((a, b) => a[0] - b[0]);
      for (let k = 1; k < daily.length; k++) {
        const i = idx(daily[k][0]);
        if (i >= 0) values[i] += Math.max(daily[k][1] - daily[k - 1][1], 0);
      }
      return { name: projectName(child(ps, "master_url")), values };
    });
    barChart("chart-credit", "Credit granted per day (this host)", "credit", days, credit);

    const xroot = kids(xfer, "daily_xfers")[0] || xfer;
    const up = days.map(() => 0), down = days.map(() => 0);
    for (const dx of kids(xroot, "dx")) {
      const i = idx(num(dx, "when"));
      if (i >= 0) { up[i] += num(dx, "up") / 1e6; down[i] += num(dx, "down") / 1e6; }
    }
    barChart("chart-bytes", "Bytes transferred per day (all projects)", "MB", days,
      [{ name: "download", values: down }, { name: "upload", values: up }]);

    const u = hr.usage || [];
    const cpu = [];
    for (let k = 1; k < u.length; k++) {
      const dt = u[k][0] - u[k - 1][0];
      if (dt > 0) cpu.push([u[k][0], Math.max(u[k][1] - u[k - 1][1], 0) / dt * 100]);
    }
    lineChart("chart-client-cpu", "The client's own CPU use", "% of one core", cpu);
    lineChart("chart-client-mem", "The client's own memory (RSS)", "MB", u.map((p) => [p[0], p[2] / 1e6]));
    document.body.dataset.history = "loaded";
  } catch (e) {
    setStatus(e.message, true);
  }
}

// ---- start -------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    app.secret = document.getElementById("secret").value.trim();
    sessionStorage.setItem("ferrite-secret", app.secret);
    document.getElementById("login").hidden = true;
    refreshNow();
    refreshHistory();
  });
  document.getElementById("suspend-all").addEventListener("click",
    () => act("<set_run_mode><never/><duration>0</duration></set_run_mode>", "suspend all"));
  document.getElementById("suspend-at-checkpoint").addEventListener("click",
    () => act("<set_run_mode><never/><duration>0</duration><ferrite_at_checkpoint/></set_run_mode>",
      "suspend all at the next checkpoints"));
  document.getElementById("resume-all").addEventListener("click",
    () => act("<set_run_mode><restore/><duration>0</duration></set_run_mode>", "resume all"));
  refreshNow().then(refreshHistory);
  setInterval(refreshNow, NOW_EVERY_MS);
  setInterval(refreshHistory, HISTORY_EVERY_MS);
});
