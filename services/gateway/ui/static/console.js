/* The Odradek console: a page per hash route (#/ overview, #/topics, #/topic/<name>, #/groups), read
   from REST Proxy v3 (/v3/...) and the gateway's console views (/ui/api/...). Each view refreshes
   itself on a timer while it is shown; leaving it stops the timers. */
"use strict";

const REFRESH_MS = 5000;
const TOPICS_PER_PAGE = 50;
const GROUPS_PER_PAGE = 10;
const FEW_GROUPS = 3;  // a page of this many groups or fewer shows them opened
const RECORDS_PER_PAGE = 20;
const app = {clusterId: null, timers: [], view: 0, groupOpen: new Map()};

// ------------------------------------------------------------------ helpers

function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    element.append(child instanceof Node ? child : String(child));
  }
  return element;
}

async function getJson(url) {
  // X-Requested-With: a 401 comes without a challenge, so the browser leaves the login to the form
  const response = await fetch(url, {headers: {Accept: "application/json", "X-Requested-With": "XMLHttpRequest"}});
  if (response.status === 401) {  // authentication is on and there is no session (or it expired)
    window.location.assign("/ui/login");
    throw new Error("logging in");
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `${response.status} ${response.statusText}`);
  return body;
}

function showError(error) {
  const box = document.getElementById("error");
  box.textContent = error ? `Could not read the cluster: ${error.message || error}` : "";
  box.hidden = !error;
}

async function clusterId() {
  if (!app.clusterId) {
    const clusters = await getJson("/v3/clusters");
    app.clusterId = clusters.data[0].cluster_id;
    document.getElementById("cluster-id").textContent = `cluster ${app.clusterId}`;
  }
  return app.clusterId;
}

const v3 = async (path) => getJson(`/v3/clusters/${encodeURIComponent(await clusterId())}${path}`);
const enc = encodeURIComponent;
const fmt = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const badge = (text, kind) => h("span", {class: `badge ${kind || ""}`}, text);

function every(ms, task) {
  const view = app.view;
  const run = async () => {
    if (view !== app.view) return;
    try { await task(); showError(null); } catch (error) { showError(error); }
  };
  run();
  app.timers.push(setInterval(run, ms));
}

function pager(total, offset, size, go) {
  const last = Math.min(total, offset + size);
  return h("div", {class: "pager"},
    h("button", {type: "button", "data-page": "prev", disabled: offset <= 0, onclick: () => go(Math.max(0, offset - size))},
      "‹ Previous"),
    h("span", {class: "muted", "data-role": "range"}, total ? `${offset + 1}–${last} of ${total}` : "none"),
    h("button", {type: "button", "data-page": "next", disabled: last >= total, onclick: () => go(offset + size)},
      "Next ›"));
}

function filterBox(value, placeholder, onchange) {
  let timer = null;
  const input = h("input", {type: "search", value, placeholder, "aria-label": placeholder, oninput: (event) => {
    clearTimeout(timer);
    timer = setTimeout(() => onchange(event.target.value), 250);
  }});
  if (value) {  // the view is drawn again as the filter changes: keep typing where it was
    requestAnimationFrame(() => { input.focus(); input.setSelectionRange(value.length, value.length); });
  }
  return input;
}

function table(headers, rows, attributes) {
  return h("table", attributes || {},
    h("thead", {}, h("tr", {}, headers.map(([label, cls]) => h("th", {class: cls || null}, label)))),
    h("tbody", {}, rows));
}

// ------------------------------------------------------------------ overview

function renderOverview(view) {
  const cards = h("div", {class: "cards", id: "health"});
  const brokers = h("div", {id: "brokers"});
  const throughput = h("div", {class: "chart", id: "throughput-chart"});
  const lag = h("div", {class: "chart", id: "lag-chart"});
  const freshness = h("div", {id: "series-status", class: "series-status", "data-state": "unknown"});
  view.append(h("h1", {}, "Cluster overview"), cards,
    h("section", {class: "panel"}, h("h2", {}, "Brokers"), brokers), freshness,
    h("div", {class: "grid2"},
      h("section", {class: "panel"}, h("h2", {}, "Messages produced per second"), throughput),
      h("section", {class: "panel"}, h("h2", {}, "Consumer lag (messages)"), lag)));
  every(REFRESH_MS, async () => {
    const [brokerList, health] = await Promise.all([v3("/brokers"), getJson("/ui/api/health")]);
    const controller = health.controller;
    const card = (label, value, bad) => h("div", {class: "card"}, h("div", {class: "label"}, label),
      h("div", {class: `value ${bad ? "bad" : ""}`}, value));
    cards.replaceChildren(
      card("Live brokers", brokerList.data.length, health.offline_broker_ids.length > 0),
      card("Active controller", controller ? h("span", {id: "controller", title: `${controller.host}:${controller.port}`},
        controller.id, h("span", {class: "sub mono"}, `${controller.host}:${controller.port}`)) : "none", !controller),
      card("Partitions", fmt(health.partitions)),
      card("Under-replicated", fmt(health.under_replicated_partitions), health.under_replicated_partitions > 0),
      card("Offline partitions", fmt(health.offline_partitions), health.offline_partitions > 0));
    const rows = brokerList.data.map((b) => h("tr", {"data-broker-id": b.broker_id},
      h("td", {class: "num"}, b.broker_id), h("td", {class: "mono"}, `${b.host}:${b.port}`),
      h("td", {}, b.rack || h("span", {class: "muted"}, "—")),
      h("td", {"data-role": "status"}, badge("alive", "ok"), " ",
        controller && b.broker_id === controller.id ? badge("controller", "info") : null)));
    for (const id of health.offline_broker_ids) {
      rows.push(h("tr", {"data-broker-id": id}, h("td", {class: "num"}, id), h("td", {class: "muted"}, "unknown"),
        h("td", {class: "muted"}, "—"), h("td", {"data-role": "status"}, badge("offline", "bad"))));
    }
    brokers.replaceChildren(table([["ID", "num"], ["Host:port"], ["Rack"], ["Status"]], rows, {class: "fit"}));
  });
  every(2000, () => drawSeries(throughput, lag, freshness));
}

// When the charts' data was last sampled; while the sampler fails, a stale banner says since when and why.
function showFreshness(freshness, sampled) {
  const at = sampled.last_sample_ms ? new Date(sampled.last_sample_ms).toLocaleTimeString() : null;
  if (sampled.stale) {
    freshness.dataset.state = "stale";
    freshness.className = "series-status stale";
    freshness.replaceChildren(badge("stale", "bad"), " ",
      at ? `Charts last sampled at ${at}` : "No sample yet",
      sampled.last_error ? h("span", {class: "sub mono", title: sampled.last_error}, ` — ${sampled.last_error}`) : "");
  } else {
    freshness.dataset.state = "fresh";
    freshness.className = "series-status";
    freshness.replaceChildren(badge("live", "ok"), " ", `Charts sampled at ${at}`);
  }
}

async function drawSeries(throughput, lag, freshness) {
  const sampled = await getJson("/ui/api/series");
  showFreshness(freshness, sampled);
  const times = sampled.points.map((p) => p.time_ms);
  const total = {name: "all topics", values: sampled.points.map((p) => p.total_rate), total: true};
  const topics = sampled.topics.map((t) => ({name: t, values: sampled.points.map((p) => p.rates[t] ?? null)}));
  lineChart(throughput, {times, series: [...topics, total], unit: "msg/s"});
  const groups = sampled.groups.map((g) => ({name: g, values: sampled.points.map((p) => p.lags[g] ?? null)}));
  lineChart(lag, {times, series: groups, unit: "messages behind"});
}

// ------------------------------------------------------------------ topics

function renderTopics(view, params) {
  const query = params.get("q") || "", offset = Number(params.get("offset") || 0);
  const go = (q, at) => { location.hash = `#/topics?q=${enc(q)}&offset=${at}`; };
  const list = h("div", {id: "topics"});
  view.append(h("h1", {}, "Topics"), h("section", {class: "panel"},
    h("div", {class: "toolbar"}, filterBox(query, "Filter topics by name", (q) => go(q, 0))), list));
  every(REFRESH_MS, async () => {
    const page = await getJson(`/ui/api/topics?q=${enc(query)}&offset=${offset}&limit=${TOPICS_PER_PAGE}`);
    const rows = page.topics.map((t) => h("tr", {"data-topic": t.name},
      h("td", {}, h("a", {href: `#/topic/${enc(t.name)}`}, t.name)),
      h("td", {class: "num", "data-col": "partitions"}, t.partitions),
      h("td", {class: "num", "data-col": "replication_factor"}, t.replication_factor),
      h("td", {class: "num", "data-col": "under_replicated"},
        t.under_replicated ? badge(t.under_replicated, "warn") : "0"),
      h("td", {class: "num", "data-col": "messages"}, fmt(t.messages))));
    const pages = () => pager(page.total, offset, TOPICS_PER_PAGE, (at) => go(query, at));
    list.replaceChildren(page.total > TOPICS_PER_PAGE ? pages() : "",
      rows.length ? table([["Name"], ["Partitions", "num"], ["Replication factor", "num"],
        ["Under-replicated", "num"], ["Messages", "num"]], rows) : h("div", {class: "empty"}, "No topics match."),
      pages());
  });
}

// ------------------------------------------------------------------ one topic

function decodeBytes(base64) {
  if (base64 === null || base64 === undefined) return {text: "null", kind: "null"};
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  try {
    return {text: new TextDecoder("utf-8", {fatal: true}).decode(bytes), kind: "text"};
  } catch {
    return {text: Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" "), kind: "hex"};
  }
}

function bytesCell(base64, role) {
  const decoded = decodeBytes(base64);
  return h("td", {class: "mono value-cell", "data-col": role, "data-kind": decoded.kind},
    decoded.kind === "text" ? decoded.text : [badge(decoded.kind), " ", decoded.kind === "hex" ? decoded.text : ""]);
}

function renderTopic(view, name, params) {
  const partitions = h("div", {id: "partitions"});
  const records = h("div", {id: "records"});
  const select = h("select", {id: "record-partition", "aria-label": "partition"});
  const offsetInput = h("input", {id: "record-offset", type: "number", min: 0, placeholder: "latest 20",
                                  "aria-label": "offset"});
  const info = h("span", {class: "muted", id: "record-range"});
  const show = (partition, offset) => {
    const query = new URLSearchParams({partition});
    if (offset !== null && offset !== "") query.set("offset", Math.max(0, offset));
    location.hash = `#/topic/${enc(name)}?${query}`;
  };
  const older = h("button", {type: "button", id: "records-older"}, "‹ Older");
  const newer = h("button", {type: "button", id: "records-newer"}, "Newer ›");
  view.append(h("h1", {}, h("a", {href: "#/topics"}, "Topics"), " / ", name),
    h("section", {class: "panel"}, h("h2", {}, "Partitions"), partitions),
    h("section", {class: "panel"}, h("h2", {}, "Records"),
      h("div", {class: "toolbar"}, h("label", {}, "Partition ", select), h("label", {}, "From offset ", offsetInput),
        h("button", {type: "button", id: "records-load",
                     onclick: () => show(select.value, offsetInput.value)}, "Show"),
        older, newer, info),
      records));
  let selectFilled = false;
  every(REFRESH_MS, async () => {
    const [layout, offsets] = await Promise.all([
      getJson(`/ui/api/topics/${enc(name)}/partitions`), v3(`/topics/${enc(name)}/offsets`)]);
    const ends = new Map(offsets.partitions.map((p) => [p.partition, p]));
    const rows = layout.partitions.map((p) => {
      const o = ends.get(p.partition) || {};
      return h("tr", {"data-partition": p.partition, class: p.under_replicated || p.offline ? "urp" : null},
        h("td", {class: "num"}, p.partition),
        h("td", {class: "num", "data-col": "leader"}, p.offline ? badge("none", "bad") : p.leader),
        h("td", {class: "mono", "data-col": "replicas"}, p.replicas.join(", ")),
        h("td", {class: "mono", "data-col": "isr"}, p.isr.join(", "), " ",
          p.under_replicated ? badge("under-replicated", "warn") : null),
        h("td", {class: "num", "data-col": "start"}, fmt(o.earliest_offset)),
        h("td", {class: "num", "data-col": "end"}, fmt(o.latest_offset)),
        h("td", {class: "num"}, fmt(o.latest_offset - o.earliest_offset)));
    });
    partitions.replaceChildren(table([["Partition", "num"], ["Leader", "num"], ["Replicas"], ["ISR"],
      ["Start offset", "num"], ["End offset", "num"], ["Messages", "num"]], rows));
    if (!selectFilled) {
      select.replaceChildren(...layout.partitions.map((p) => h("option", {value: p.partition}, p.partition)));
      select.value = params.get("partition") || "0";
      offsetInput.value = params.get("offset") || "";
      selectFilled = true;
      await showRecords(name, Number(select.value), params.get("offset"), ends, {records, info, older, newer, show});
    }
  });
}

async function showRecords(name, partition, requested, ends, {records, info, older, newer, show}) {
  const bounds = ends.get(partition) || {earliest_offset: 0, latest_offset: 0};
  const start = requested === null || requested === ""
    ? Math.max(bounds.earliest_offset, bounds.latest_offset - RECORDS_PER_PAGE) : Number(requested);
  const read = await v3(`/topics/${enc(name)}/partitions/${partition}/records?offset=${start}` +
                        `&end_offset=${start + RECORDS_PER_PAGE}`);
  const rows = read.records.map((r) => h("tr", {"data-offset": r.offset},
    h("td", {class: "num"}, r.offset),
    h("td", {class: "mono"}, new Date(r.timestamp).toISOString().replace("T", " ").replace("Z", "")),
    bytesCell(r.key, "key"), bytesCell(r.value, "value"),
    h("td", {class: "mono", "data-col": "headers"}, r.headers.map((header) =>
      h("div", {}, `${header.key}: `, decodeBytes(header.value).text)))));
  const shownEnd = read.records.length ? read.records[read.records.length - 1].offset + 1 : start;
  info.textContent = `offsets ${start}–${Math.max(start, shownEnd - 1)} · partition holds ` +
    `${read.earliest_offset}–${Math.max(read.earliest_offset, read.latest_offset - 1)}`;
  older.disabled = start <= read.earliest_offset;
  newer.disabled = start + RECORDS_PER_PAGE >= read.latest_offset;
  older.onclick = () => show(partition, Math.max(read.earliest_offset, start - RECORDS_PER_PAGE));
  newer.onclick = () => show(partition, start + RECORDS_PER_PAGE);
  records.replaceChildren(rows.length
    ? table([["Offset", "num"], ["Timestamp (UTC)"], ["Key"], ["Value"], ["Headers"]], rows, {id: "records-table"})
    : h("div", {class: "empty"}, "No records in this range."));
}

// ------------------------------------------------------------------ consumer groups

function groupPanel(g, openByDefault) {
  const open = app.groupOpen.has(g.group_id) ? app.groupOpen.get(g.group_id) : openByDefault;
  const members = g.members.length
    ? table([["Client id"], ["Host"], ["Member id"], ["Assigned partitions"]],
      g.members.map((m) => h("tr", {"data-member": m.member_id},
        h("td", {"data-col": "client_id"}, m.client_id), h("td", {class: "mono"}, m.host),
        h("td", {class: "mono muted"}, m.member_id),
        h("td", {class: "mono", "data-col": "assignment"},
          m.assignment.map((a) => `${a.topic}-${a.partition}`).join(", ") || "—"))))
    : h("div", {class: "empty"}, "No active members.");
  const lags = g.lags.length
    ? table([["Topic"], ["Partition", "num"], ["Committed", "num"], ["Log end", "num"], ["Lag", "num"], ["Consumer"]],
      g.lags.map((l) => h("tr", {"data-lag": `${l.topic}-${l.partition}`},
        h("td", {}, h("a", {href: `#/topic/${enc(l.topic)}`}, l.topic)), h("td", {class: "num"}, l.partition),
        h("td", {class: "num"}, fmt(l.current_offset)), h("td", {class: "num"}, fmt(l.log_end_offset)),
        h("td", {class: "num", "data-col": "lag"}, fmt(l.lag)), h("td", {}, l.client_id || "—"))))
    : h("div", {class: "empty"}, "No committed offsets.");
  const kind = g.state === "Stable" ? "ok" : g.state === "Empty" ? "" : "warn";
  return h("details", {class: "panel group", "data-group": g.group_id, open,
                       ontoggle: (event) => app.groupOpen.set(g.group_id, event.target.open)},
    h("summary", {}, h("span", {class: "id"}, g.group_id), badge(g.state, kind),
      h("span", {class: "muted"}, `${g.members.length} member${g.members.length === 1 ? "" : "s"}`),
      h("span", {class: "muted"}, `${g.lags.length} partition${g.lags.length === 1 ? "" : "s"}`),
      h("span", {class: "lag"}, "total lag ", h("strong", {"data-role": "total-lag"}, fmt(g.total_lag)))),
    members, lags);
}

function renderGroups(view, params) {
  const query = params.get("q") || "", offset = Number(params.get("offset") || 0);
  const go = (q, at) => { location.hash = `#/groups?q=${enc(q)}&offset=${at}`; };
  const list = h("div", {id: "groups"});
  view.append(h("h1", {}, "Consumer groups"),
    h("div", {class: "toolbar"}, filterBox(query, "Filter groups by id", (q) => go(q, 0))), list);
  every(REFRESH_MS, async () => {
    const page = await getJson(`/ui/api/groups?q=${enc(query)}&offset=${offset}&limit=${GROUPS_PER_PAGE}`);
    const panels = page.groups.map((g) => groupPanel(g, page.groups.length <= FEW_GROUPS));
    const pages = () => pager(page.total, offset, GROUPS_PER_PAGE, (at) => go(query, at));
    list.replaceChildren(page.total > GROUPS_PER_PAGE ? pages() : "",
      ...(panels.length ? panels : [h("div", {class: "empty"}, "No consumer groups match.")]), pages());
  });
}

// ------------------------------------------------------------------ routing

function route() {
  app.timers.forEach(clearInterval);
  app.timers = [];
  app.view += 1;
  const [path, search] = (location.hash.slice(1) || "/").split("?");
  const params = new URLSearchParams(search || "");
  const view = document.getElementById("view");
  view.replaceChildren();
  const section = path.startsWith("/topic") ? "topics" : path.startsWith("/groups") ? "groups" : "overview";
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === section));
  if (path.startsWith("/topic/")) renderTopic(view, decodeURIComponent(path.slice("/topic/".length)), params);
  else if (path === "/topics") renderTopics(view, params);
  else if (path === "/groups") renderGroups(view, params);
  else renderOverview(view);
}

window.addEventListener("hashchange", route);
clusterId().catch(showError);
route();
