// kubelab lab ui: draws the server's document (kubelab/lab/ui/model.py) and keeps it live.
// Every fact comes from the server; this file only turns documents into pictures and tables.
"use strict";

cytoscape.use(cytoscapeDagre);

// A node's box from its label's lines (Cytoscape deprecates sizing to the label itself).
function boxOf(fontPx) {
  const lines = (node) => String(node.data("label") || "").split("\n");
  return {
    width: (node) => Math.max(...lines(node).map((l) => l.length)) * fontPx * 0.6 + 8,
    height: (node) => lines(node).length * fontPx * 1.25 + 6,
  };
}
const BOX = boxOf(11);
const CHAIN_BOX = boxOf(7);

const STYLE = [
  { selector: "node", style: { label: "data(label)", "text-wrap": "wrap", "font-size": 11,
    "text-valign": "center", "background-color": "#dfe7ef", shape: "round-rectangle",
    width: BOX.width, height: BOX.height, padding: 6, "border-width": 1, "border-color": "#9aa8b6" } },
  { selector: ":parent", style: { "text-valign": "top", "background-opacity": 0.25,
    "font-weight": "bold" } },
  { selector: ".router", style: { "background-color": "#f3e3c3" } },
  { selector: ".control-plane", style: { "background-color": "#d8d0f0" } },
  { selector: ".worker", style: { "background-color": "#cfe3f6" } },
  { selector: ".client", style: { "background-color": "#e2f0d3" } },
  { selector: ".notready", style: { "border-color": "#c33", "border-width": 3 } },
  { selector: ".bridge", style: { "background-color": "#fff7d6", shape: "rectangle" } },
  { selector: ".balancer", style: { "background-color": "#ffe0c2", shape: "hexagon" } },
  { selector: ".pod", style: { "background-color": "#ffffff", shape: "ellipse" } },
  { selector: ".Running", style: { "border-color": "#2a8a3a", "border-width": 2 } },
  { selector: ".Pending", style: { "border-color": "#c98a00", "border-style": "dashed" } },
  { selector: ".Terminating, .Failed", style: { "border-color": "#c33", "border-style": "dotted" } },
  { selector: "edge", style: { width: 1.2, "curve-style": "bezier", label: "data(label)",
    "font-size": 8, "text-rotation": "autorotate", "line-color": "#8a96a3" } },
  { selector: ".route", style: { "line-style": "dashed", "line-color": "#6b8fbf",
    "target-arrow-shape": "triangle", "target-arrow-color": "#6b8fbf" } },
  { selector: ".backend", style: { "line-color": "#d98a3a", "target-arrow-shape": "triangle",
    "target-arrow-color": "#d98a3a" } },
  { selector: ".hop", style: { "border-color": "#e0218a", "border-width": 4 } },
  { selector: ".trace", style: { "line-color": "#e0218a", width: 3, "target-arrow-shape":
    "triangle", "target-arrow-color": "#e0218a", "z-index": 10, color: "#e0218a" } },
  { selector: ":selected", style: { "overlay-opacity": 0.15 } },
];

const ui = { doc: null, cy: null, chains: null, story: "", shape: "" };
window.kubelabUi = ui;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, v));
  children.flat().forEach((c) => node.append(c instanceof Node ? c : String(c)));
  return node;
}

// The document as Cytoscape elements: lab namespaces as compounds holding their bridges and
// pods, veths as bridge-pod edges, the underlay links, the router's routes and the balancer.
function elements(doc) {
  const items = [];
  const add = (group, data, classes) => items.push({ group, data, classes });
  for (const n of doc.nodes) {
    const ready = n.ready === null ? "" : n.ready ? " Ready" : " NotReady";
    add("nodes", { id: n.id, label: `${n.name} ${n.ip}${ready}${n.podCIDR ? "\npods " + n.podCIDR : ""}` },
      `lab-node ${n.role}${n.ready === false ? " notready" : ""}`);
    for (const b of n.bridges) {
      add("nodes", { id: `${n.id}/bridge/${b.name}`, parent: n.id, label: `${b.name} ${b.address}` }, "bridge");
    }
    if (n.error) {
      add("nodes", { id: `${n.id}/error`, parent: n.id, label: "unreadable" }, "bridge");
    }
  }
  const router = doc.nodes.find((n) => n.role === "router");
  const routerBridge = router && router.bridges.length ? `${router.id}/bridge/${router.bridges[0].name}` : router && router.id;
  for (const n of doc.nodes) {
    if (router && n !== router) {
      add("edges", { id: `link/${n.name}`, source: routerBridge, target: n.id, label: `${n.uplink} ⇄ eth0` }, "link");
    }
  }
  if (router) {
    for (const r of router.routes) {
      if (r.toward && r.destination !== "default") {
        add("edges", { id: `route/${r.destination}`, source: router.id, target: r.toward, label: `${r.destination} via ${r.via}` }, "route");
      }
    }
  }
  if (doc.balancer && router) {
    add("nodes", { id: "balancer", parent: router.id, label: `API balancer\n${doc.balancer.address}` }, "balancer");
    for (const b of doc.balancer.backends) {
      add("edges", { id: `backend/${b}`, source: "balancer", target: b, label: "6443" }, "backend");
    }
  }
  const known = new Set(doc.nodes.map((n) => n.id));
  for (const p of doc.pods) {
    const parent = known.has(`node/${p.node}`) ? `node/${p.node}` : undefined;
    add("nodes", { id: p.id, parent, label: `${p.namespace}/${p.name}\n${p.ip || "no IP"} ${p.phase}` }, `pod ${p.phase}`);
    const host = doc.nodes.find((n) => n.id === parent);
    if (host && host.bridges.length && !p.hostNetwork) {
      const bridge = `${host.id}/bridge/${host.bridges[0].name}`;
      add("edges", { id: `veth/${p.id}`, source: bridge, target: p.id, label: p.veth ? `${p.veth} ⇄ eth0` : "" }, "veth");
    }
  }
  return items;
}

function layout() {
  ui.cy.layout({ name: "dagre", rankDir: "TB", nodeSep: 18, rankSep: 40, animate: false }).run();
  ui.cy.fit(undefined, 20);
}

function render(doc) {
  ui.doc = doc;
  document.getElementById("lab-name").textContent = doc.lab;
  const status = document.getElementById("api-status");
  status.className = "status " + (doc.api.reachable ? "ok" : "down");
  status.textContent = doc.api.reachable
    ? "API answering"
    : `API unreachable since ${doc.api.since || "start"}: ${doc.api.message} (reconnecting; showing the last state seen)`;
  document.getElementById("counts").textContent =
    `${doc.nodes.length} namespaces, ${doc.pods.length} pods, ${doc.services.length} services`;
  const wanted = elements(doc);
  const ids = new Set(wanted.map((e) => e.data.id));
  ui.cy.batch(() => {
    ui.cy.elements().filter((e) => !ids.has(e.id()) && !e.hasClass("trace")).remove();
    for (const item of wanted) {
      const found = ui.cy.getElementById(item.data.id);
      if (found.length && found.isNode() === (item.group === "nodes") && (found.isEdge() || (found.data("parent") || undefined) === item.data.parent)) {
        found.data(item.data);
        const keep = found.hasClass("hop") ? " hop" : "";
        found.classes(item.classes + keep);
      } else {
        found.remove();
        ui.cy.add(item);
      }
    }
  });
  const shape = [...ids].sort().join(",");
  if (shape !== ui.shape) {
    ui.shape = shape;
    layout();
  }
  renderServices(doc);
  renderPlaces(doc);
}

function renderServices(doc) {
  const body = document.querySelector("#services tbody");
  body.replaceChildren(...doc.services.map((s) => {
    const ports = s.ports.map((p) => `${p.port}${p.nodePort ? ":" + p.nodePort : ""}/${p.protocol}`).join(", ");
    const endpoints = s.endpoints.map((e) => el("div", { class: e.ready ? "ready" : "notready" },
      `${e.address} ${e.pod ? e.pod.replace(/^pod\//, "") : ""} ${e.node ? "on " + e.node : ""}${e.ready ? "" : " (not ready)"}`));
    const button = el("button", { type: "button" }, "chains");
    button.addEventListener("click", () => showChains(`${s.namespace}/${s.name}`));
    return el("tr", { "data-service": `${s.namespace}/${s.name}` },
      el("td", {}, `${s.namespace}/${s.name}`), el("td", {}, s.type), el("td", {}, s.clusterIP),
      el("td", {}, ports), el("td", {}, s.loadBalancerIPs.join(", ")),
      el("td", { class: "endpoints" }, endpoints.length ? endpoints : "none"), el("td", {}, button));
  }));
  const select = document.getElementById("chain-node");
  const nodes = doc.nodes.filter((n) => n.kubernetes).map((n) => n.name);
  if ([...select.options].map((o) => o.value).join() !== nodes.join()) {
    const chosen = select.value;
    select.replaceChildren(...nodes.map((n) => el("option", { value: n }, n)));
    if (nodes.includes(chosen)) select.value = chosen;
  }
}

function renderPlaces(doc) {
  const places = ["client", ...doc.nodes.filter((n) => n.role !== "router").map((n) => `node/${n.name}`),
    ...doc.pods.map((p) => `pod/${p.namespace}/${p.name}`),
    ...doc.services.flatMap((s) => s.ports.map((p) => `svc/${s.namespace}/${s.name}:${p.port}`))];
  document.getElementById("places").replaceChildren(...places.map((p) => el("option", { value: p })));
}

async function getJson(url, options) {
  const response = await fetch(url, options);
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function showChains(service) {
  ui.chainService = service;
  const node = document.getElementById("chain-node").value;
  document.getElementById("chains-title").textContent = `${service} on ${node}`;
  const message = document.getElementById("chains-message");
  try {
    const graph = await getJson(`api/chains?service=${encodeURIComponent(service)}&node=${encodeURIComponent(node)}`);
    message.textContent = graph.chains.length ? "" : "no rules name this Service on this node";
    message.className = "";
    const shape = JSON.stringify(graph);
    if (shape === ui.chainShape) return;
    ui.chainShape = shape;
    ui.chains.elements().remove();
    ui.chains.add(graph.chains.map((c) => ({ group: "nodes", data: { id: c.name,
      label: [c.name, ...c.rules.slice(0, 6).map((r) => r.length > 70 ? r.slice(0, 67) + "…" : r),
        ...(c.rules.length > 6 ? [`… ${c.rules.length - 6} more`] : [])].join("\n") } })));
    ui.chains.add(graph.jumps.map((j, i) => ({ group: "edges", data: { id: `j${i}`, source: j.from, target: j.to, label: "" } })));
    ui.chains.layout({ name: "dagre", rankDir: "LR", nodeSep: 10, rankSep: 30, animate: false }).run();
    ui.chains.fit(undefined, 10);
  } catch (error) {
    message.textContent = `chains of ${service}: ${error.message}`;
    message.className = "error";
  }
}

async function showStory(podId) {
  const [, namespace, name] = podId.split("/");
  document.getElementById("story-title").textContent = `of pod ${namespace}/${name}`;
  const box = document.getElementById("story");
  box.replaceChildren("reading…");
  try {
    const steps = await getJson(`api/story?pod=${encodeURIComponent(namespace + "/" + name)}`);
    box.replaceChildren(el("ol", {}, steps.map((s) => el("li", {},
      `${(s.time || "").slice(11, 23)} ${s.actor}: ${s.step} ${s.object} `,
      el("span", { class: "rule" }, [s.detail, s.cause && `(because ${s.cause})`].filter(Boolean).join(" "))))));
    box.scrollIntoView({ block: "nearest" });
  } catch (error) {
    box.replaceChildren(el("p", { class: "error" }, error.message));
  }
}

function hopId(namespace) {
  return namespace.startsWith("pod ") ? `pod/${namespace.slice(4)}` : `node/${namespace}`;
}

async function runTrace(event) {
  event.preventDefault();
  const source = document.getElementById("trace-source").value.trim();
  const destination = document.getElementById("trace-destination").value.trim();
  const box = document.getElementById("trace-result");
  box.replaceChildren(`tracing ${source} → ${destination}…`);
  ui.cy.elements(".trace").remove();
  ui.cy.elements(".hop").removeClass("hop");
  try {
    const trace = await getJson("api/trace", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ source, destination }) });
    const ids = trace.hops.map((h) => hopId(h.namespace));
    ids.forEach((id) => ui.cy.getElementById(id).addClass("hop"));
    const drawn = ids.filter((id) => ui.cy.getElementById(id).length);
    for (let i = 1; i < drawn.length; i++) {
      if (drawn[i] !== drawn[i - 1]) {
        ui.cy.add({ group: "edges", data: { id: `trace/${i}`, source: drawn[i - 1], target: drawn[i], label: String(i) }, classes: "trace" });
      }
    }
    ui.trace = trace;
    box.replaceChildren(
      el("p", {}, el("span", { class: "verdict" }, trace.verdict), ` ${trace.where} ${trace.why} `, trace.endpoint ? `endpoint ${trace.endpoint}` : ""),
      el("ol", { id: "trace-hops" }, trace.hops.map((h) => el("li", {},
        `${h.namespace} ${h.iif ? "in " + h.iif : ""} ${h.oif ? "out " + h.oif : ""} ${h.route}`,
        ...h.nat.map((n) => el("div", { class: "rule" }, n)),
        ...h.rules.map((r) => el("div", { class: "rule" }, `${r.chain}: ${r.rule} → ${r.verdict} ${r.origin}`))))));
  } catch (error) {
    box.replaceChildren(el("p", { class: "error" }, error.message));
  }
}

function connect() {
  const events = new EventSource("api/events");
  events.onmessage = (message) => render(JSON.parse(message.data));
  events.onerror = () => {
    const status = document.getElementById("api-status");
    status.className = "status down";
    status.textContent = "lost the ui server (retrying)";
  };
}

ui.cy = cytoscape({ container: document.getElementById("topology"), style: STYLE });
ui.chains = cytoscape({ container: document.getElementById("chains-graph"), style: [
  { selector: "node", style: { label: "data(label)", "text-wrap": "wrap", "font-size": 7, "text-halign": "center",
    "text-valign": "center", shape: "round-rectangle", width: CHAIN_BOX.width, height: CHAIN_BOX.height, padding: 4,
    "background-color": "#f4f6f8", "border-width": 1, "border-color": "#9aa8b6", "font-family": "monospace" } },
  { selector: "edge", style: { "curve-style": "bezier", "target-arrow-shape": "triangle", width: 1 } },
] });
ui.cy.on("tap", "node.pod", (event) => showStory(event.target.id()));
document.getElementById("trace-form").addEventListener("submit", runTrace);
document.getElementById("chain-node").addEventListener("change", () => ui.chainService && showChains(ui.chainService));
// The chains follow the proxy's syncs: read again while a Service is chosen.
setInterval(() => ui.chainService && showChains(ui.chainService), 2000);
connect();
