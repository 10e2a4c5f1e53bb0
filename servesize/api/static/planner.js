/* servesize planner: the page half. Reads the form, calls the JSON endpoints of this server,
 * draws what plannerlib.js turns the answers into. Every figure's data is kept in
 * window.__charts[name] ({columns, rows}) for its CSV/JSON download (and for tests). */
(function () {
  "use strict";
  const L = window.PlannerLib;
  const form = document.getElementById("planner"); // absent from an offline report
  const charts = {}; // name -> Chart instance
  const ran = new Set();
  const pending = {}; // kind -> AbortController
  window.__charts = {};
  window.__responses = {};

  const COLORS = {
    weights: "#1f77b4",
    activations: "#ff7f0e",
    non_torch: "#8c564b",
    cuda_graphs: "#9467bd",
    reserve: "#7f7f7f",
    kv_cache: "#2ca02c",
    unallocated: "#c7c7c7",
    state: "#17becf",
  };
  const SHADES = ["#1f77b4", "#4a90c8", "#76aad8", "#a2c4e6", "#c9ddf1", "#3b6e99"];

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) node.append(child);
    return node;
  }

  function fmt(value, digits = 3) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return String(value);
    return Number.isInteger(value) ? value.toLocaleString("en") : value.toPrecision(digits);
  }

  async function getAll(path) {
    const items = [];
    let offset = 0;
    while (offset !== null && offset !== undefined) {
      const response = await fetch(`${path}?limit=500&offset=${offset}`);
      if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
      const page = await response.json();
      items.push(...page.items);
      offset = page.next_offset;
    }
    return items;
  }

  function readState() {
    const state = {};
    for (const key of Object.keys(L.DEFAULTS)) {
      const field = form.elements[key];
      if (!field) continue;
      state[key] = field.type === "checkbox" ? (field.checked ? "on" : "") : field.value;
    }
    return state;
  }

  function writeState(state) {
    for (const [key, value] of Object.entries(state)) {
      const field = form.elements[key];
      if (!field) continue;
      if (field.type === "checkbox") field.checked = value === "on";
      else {
        if (field.tagName === "SELECT" && ![...field.options].some((o) => o.value === value)) {
          field.append(el("option", { value, text: value }));
        }
        field.value = value;
      }
    }
    syncMode();
  }

  function syncMode() {
    const closed = form.elements.mode.value === "concurrency";
    form.elements.rate.closest("label").classList.toggle("dim", closed);
    form.elements.concurrency.closest("label").classList.toggle("dim", !closed);
  }

  function updateUrl() {
    const query = L.encodeState(readState(), [...ran]);
    history.replaceState(null, "", query ? `?${query}` : location.pathname);
    document.getElementById("share").href = `?${query}`;
  }

  function clearErrors() {
    for (const node of document.querySelectorAll("[data-error-for]")) node.textContent = "";
    for (const node of form.querySelectorAll(".invalid")) node.classList.remove("invalid");
  }

  function showProblem(problem) {
    const byField = L.problemFieldErrors(problem);
    for (const [field, messages] of Object.entries(byField)) {
      const target = document.querySelector(`[data-error-for="${field}"]`) || document.getElementById("form-error");
      target.textContent = messages.join("; ");
      const input = document.getElementById(`f-${field}`);
      if (input) input.classList.add("invalid");
    }
  }

  function status(kind, content) {
    const box = document.querySelector(`[data-status="${kind}"]`);
    box.replaceChildren(...(content ? [content] : []));
  }

  async function run(kind) {
    if (kind === "compare") return runCompare();
    clearErrors();
    let body;
    try {
      body = L.buildRequests(readState())[kind];
    } catch (error) {
      showProblem({ errors: [{ pointer: "/model/hf_config", detail: `not JSON: ${error.message}` }] });
      return;
    }
    if (pending[kind]) pending[kind].abort();
    const section = document.getElementById(`s-${kind}`);
    section.hidden = false;
    if (jobs && jobs.wanted(kind)) return jobs.run(kind, body);
    const controller = new AbortController();
    pending[kind] = controller;
    const cancel = el("button", { type: "button", class: "cancel", text: "Cancel" });
    cancel.addEventListener("click", () => controller.abort());
    status(kind, el("span", { class: "spinner", "data-kind": kind }, el("i"), " working… ", cancel));
    const path = PATHS[kind];
    try {
      const response = await fetch(kind === "sizing" ? `${path}?manifests=true` : path, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      const answer = await response.json();
      if (!response.ok) {
        status(kind, el("p", { class: "problem", text: `${answer.status} ${answer.title}: ${answer.detail}` }));
        showProblem(answer);
        return;
      }
      status(kind, reportLink(kind, body));
      window.__responses[kind] = answer;
      RENDER[kind](answer, body);
      ran.add(kind);
      updateUrl();
    } catch (error) {
      const text = error.name === "AbortError" ? "cancelled" : `failed: ${error.message}`;
      status(kind, el("p", { class: "problem", text }));
    } finally {
      if (pending[kind] === controller) delete pending[kind];
    }
  }

  /* Background jobs with progress and cancel when the form holds a key (plannerjobs.js; absent
   * from an offline report). */
  const jobs = window.PlannerJobs
    ? window.PlannerJobs.create({
        el,
        status,
        showProblem,
        pending,
        finish(kind, result, body) {
          status(kind, reportLink(kind, body));
          window.__responses[kind] = result;
          RENDER[kind](result, body);
          ran.add(kind);
          updateUrl();
        },
      })
    : null;

  const PATHS = { memory: "/v1/memory", capacity: "/v1/slo/capacity", simulate: "/v1/simulate", sizing: "/v1/sizing" };

  function save(name, text, type) {
    const blob = new Blob([text], { type });
    const a = el("a", { href: URL.createObjectURL(blob), download: name });
    document.body.append(a);
    a.click();
    a.remove();
  }

  /* "HTML report": the same request with ?format=html, saved as one file that opens offline. */
  function reportLink(kind, body) {
    const link = el("a", { href: "#", class: "report", "data-kind": kind, text: "HTML report" });
    link.addEventListener("click", async (event) => {
      event.preventDefault();
      link.textContent = "HTML report (writing…)";
      try {
        const response = await fetch(`${PATHS[kind]}?format=html`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "text/html" },
          body: JSON.stringify(body),
        });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        save(`servesize-${kind}-report.html`, await response.text(), "text/html");
        link.textContent = "HTML report";
      } catch (error) {
        link.textContent = `HTML report (failed: ${error.message})`;
      }
    });
    return link;
  }

  /* Compare: the form's simulation on each listed deployment, same traffic and seed. */
  async function runCompare() {
    clearErrors();
    let items;
    try {
      items = L.compareBodies(readState());
    } catch (error) {
      showProblem({ errors: [{ pointer: "/model/hf_config", detail: `not JSON: ${error.message}` }] });
      return;
    }
    if (!items.length) {
      document.querySelector('[data-error-for="compare"]').textContent = "list at least one deployment, e.g. h100-sxm:tp1";
      return;
    }
    if (pending.compare) pending.compare.abort();
    const controller = new AbortController();
    pending.compare = controller;
    document.getElementById("s-compare").hidden = false;
    const cancel = el("button", { type: "button", class: "cancel", text: "Cancel" });
    cancel.addEventListener("click", () => controller.abort());
    const answers = [];
    try {
      for (const [i, item] of items.entries()) {
        status("compare", el("span", { class: "spinner", "data-kind": "compare" }, el("i"), ` ${i + 1} of ${items.length}: ${item.label}… `, cancel));
        const response = await fetch(PATHS.simulate, {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json" },
          body: JSON.stringify(item.body),
          signal: controller.signal,
        });
        const answer = await response.json();
        if (!response.ok) {
          const text = `${item.label}: ${answer.status} ${answer.title}: ${answer.detail}`;
          status("compare", el("p", { class: "problem", text }));
          document.querySelector('[data-error-for="compare"]').textContent = text;
          return;
        }
        answers.push(answer);
      }
      status("compare", null);
      window.__responses.compare = answers;
      renderCompare(items, answers);
      ran.add("compare");
      updateUrl();
    } catch (error) {
      const text = error.name === "AbortError" ? "cancelled" : `failed: ${error.message}`;
      status("compare", el("p", { class: "problem", text }));
    } finally {
      if (pending.compare === controller) delete pending.compare;
    }
  }

  function renderCompare(items, answers) {
    const table = L.compareTable(items, answers);
    keep("compare", table);
    const grid = document.getElementById("compare-table");
    grid.replaceChildren(el("tr", {}, ...table.columns.map((c) => el("th", { text: c }))));
    for (const row of table.rows) grid.append(el("tr", {}, ...row.map((v) => el("td", { text: fmt(v) }))));
    const col = (c) => table.rows.map((r) => r[table.columns.indexOf(c)]);
    draw("compare", {
      type: "bar",
      data: {
        labels: col("deployment"),
        datasets: [
          { label: "TTFT p95 (s)", data: col("ttft_p95_s"), backgroundColor: "#1f77b4" },
          { label: "TPOT p95 (s)", data: col("tpot_p95_s"), backgroundColor: "#ff7f0e", yAxisID: "y2" },
        ],
      },
      options: { scales: { y: axis("TTFT (s)", { beginAtZero: true }), y2: axis("TPOT (s)", { position: "right", beginAtZero: true }) } },
    });
    const best = table.rows.filter((r) => r[9]).sort((a, b) => b[7] - a[7])[0];
    document.getElementById("compare-summary").textContent = best
      ? `Most output tokens/s per GPU among the stable runs: ${best[0]} (${fmt(best[7])}).`
      : "No deployment kept up with this traffic.";
  }

  function keep(name, table) {
    window.__charts[name] = table;
    for (const box of document.querySelectorAll(`.downloads[data-table="${name}"]`)) {
      box.replaceChildren(download(name, "csv"), " ", download(name, "json"));
    }
  }

  function download(name, format) {
    const link = el("a", { href: "#", class: "download", "data-format": format, text: format.toUpperCase() });
    link.addEventListener("click", (event) => {
      event.preventDefault();
      const table = window.__charts[name];
      const text =
        format === "csv"
          ? L.toCsv(table)
          : JSON.stringify(table.rows.map((row) => Object.fromEntries(table.columns.map((c, i) => [c, row[i]]))), null, 2);
      save(`servesize-${name}.${format}`, text, format === "csv" ? "text/csv" : "application/json");
    });
    return link;
  }

  function draw(name, config) {
    if (charts[name]) charts[name].destroy();
    const canvas = document.getElementById(`chart-${name}`);
    config.options = { animation: false, responsive: true, maintainAspectRatio: false, ...config.options };
    charts[name] = new window.Chart(canvas, config);
    const points = config.data.datasets.reduce((n, d) => n + d.data.length, 0);
    canvas.dataset.points = String(points);
  }

  const axis = (title, extra) => ({ title: { display: true, text: title }, ...extra });

  function renderMemory(memory) {
    const ledger = L.ledgerTable(memory);
    keep("ledger", ledger);
    const seen = {};
    draw("ledger", {
      type: "bar",
      data: {
        labels: ["per GPU"],
        datasets: ledger.rows.map(([name, category, , gib, formula]) => {
          seen[category] = (seen[category] || 0) + 1;
          const color = category === "weights" ? SHADES[(seen[category] - 1) % SHADES.length] : COLORS[category] || "#bcbd22";
          return { label: name, data: [gib], backgroundColor: color, formula };
        }),
      },
      options: {
        indexAxis: "y",
        scales: { x: axis("GiB", { stacked: true, max: memory.device_total_bytes / 1024 ** 3 }), y: { stacked: true } },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12 } },
          tooltip: {
            callbacks: {
              label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.x.toFixed(2)} GiB`,
              afterLabel: (ctx) => ctx.dataset.formula,
            },
          },
        },
      },
    });
    const kv = L.kvBudgetTable(memory);
    keep("kv", kv);
    draw("kv", {
      type: "line", // context lengths double from point to point: evenly spaced categories
      data: {
        labels: kv.rows.map(([t]) => t.toLocaleString("en")),
        datasets: [{ label: "max concurrency", data: kv.rows.map(([, c]) => c), borderColor: "#2ca02c", backgroundColor: "#2ca02c" }],
      },
      options: { scales: { x: axis("context length (tokens)"), y: axis("concurrent requests", { type: "logarithmic" }) } },
    });
    document.getElementById("memory-summary").textContent =
      `${memory.fits ? "Fits" : "Does not fit"} on ${memory.hardware} (${memory.engine} ${memory.engine_version}): ` +
      `${fmt(memory.kv_capacity_tokens)} KV tokens, ${fmt(memory.max_concurrency)} requests of ${fmt(memory.max_model_len)} tokens.` +
      (memory.reasons.length ? " " + memory.reasons.join("; ") : "");
  }

  /* A series' prediction interval as two edge lines, the space between them filled; none
   * when no point has one. */
  function bandDatasets(table, column, color) {
    const idx = (c) => table.columns.indexOf(c);
    const rows = table.rows.filter((r) => r[idx(`${column}_low`)] !== null && r[idx(`${column}_high`)] !== null);
    if (!rows.length) return [];
    const edge = (side) => rows.map((r) => ({ x: r[0], y: r[idx(`${column}_${side}`)] }));
    const shade = `${color}26`; // #rrggbb + alpha 0.15
    return [
      { label: `${column} 80 % interval`, band: true, data: edge("low"), showLine: true, pointRadius: 0, borderWidth: 0, borderColor: shade, backgroundColor: shade, fill: false },
      { label: `${column} 80 % interval (high)`, band: true, data: edge("high"), showLine: true, pointRadius: 0, borderWidth: 0, borderColor: shade, backgroundColor: shade, fill: "-1" },
    ];
  }

  const withoutBandEdges = { labels: { filter: (item, data) => !/\(high\)$/.test(data.datasets[item.datasetIndex].label) } };

  function latencyChart(name, table, columns, limit, max, label) {
    const idx = (c) => table.columns.indexOf(c);
    const xs = table.rows.map((r) => r[0]);
    const datasets = columns.flatMap(([column, color]) => [
      {
        label: column,
        data: table.rows.filter((r) => r[idx(column)] !== null).map((r) => ({ x: r[0], y: r[idx(column)] })),
        showLine: true,
        borderColor: color,
        backgroundColor: color,
      },
      ...bandDatasets(table, column, color),
    ]);
    if (limit && xs.length) {
      datasets.push({ label: "SLO", data: [{ x: Math.min(...xs), y: limit }, { x: Math.max(...xs, max || 0), y: limit }], showLine: true, borderDash: [6, 4], borderColor: "#d62728", pointRadius: 0 });
    }
    if (max) {
      const top = Math.max(limit || 0, ...datasets.flatMap((d) => d.data.map((p) => p.y)));
      datasets.push({ label: "max", data: [{ x: max, y: 0 }, { x: max, y: top }], showLine: true, borderDash: [2, 3], borderColor: "#000", pointRadius: 0 });
    }
    draw(name, { type: "scatter", data: { datasets }, options: { plugins: { legend: withoutBandEdges }, scales: { x: axis(label), y: axis("seconds", { beginAtZero: true }) } } });
  }

  function throughputChart(table, label) {
    const idx = (c) => table.columns.indexOf(c);
    const series = (column) => table.rows.filter((r) => r[idx(column)] !== null).map((r) => ({ x: r[0], y: r[idx(column)] }));
    const datasets = [
      { label: "throughput (req/s)", data: series("throughput_requests_per_s"), showLine: true, borderColor: "#2ca02c", backgroundColor: "#2ca02c" },
      ...bandDatasets(table, "throughput_requests_per_s", "#2ca02c"),
      { label: "goodput (req/s)", data: series("goodput_requests_per_s"), showLine: true, borderColor: "#17becf", backgroundColor: "#17becf" },
    ];
    if (table.band) {
      const top = Math.max(1, ...datasets.flatMap((d) => d.data.map((p) => p.y)));
      const [low, high] = table.band;
      datasets.push({ label: "max rate interval", data: [{ x: low, y: top }, { x: high, y: top }], showLine: true, fill: "origin", pointRadius: 0, borderColor: "rgba(214,39,40,0.3)", backgroundColor: "rgba(214,39,40,0.12)" });
    }
    draw("throughput", { type: "scatter", data: { datasets }, options: { plugins: { legend: withoutBandEdges }, scales: { x: axis(label), y: axis("requests/s", { beginAtZero: true }) } } });
  }

  function histogramChart(name, table, label, color) {
    keep(`${name.replace("-hist", "")}_histogram`, table);
    draw(name, {
      type: "bar",
      data: {
        labels: table.rows.map((r) => ((r[0] + r[1]) / 2).toPrecision(3)),
        datasets: [{ label, data: table.rows.map((r) => r[2]), backgroundColor: color, barPercentage: 1, categoryPercentage: 1 }],
      },
      options: { scales: { x: axis("seconds (bin centre)"), y: axis("count", { beginAtZero: true }) } },
    });
  }

  function renderCapacity(capacity, body) {
    const table = L.latencyTable(capacity);
    keep("latency", table);
    const label = table.columns[0] === "concurrency" ? "concurrent clients" : "requests/s per replica";
    latencyChart("ttft", table, [["ttft_p50_s", "#1f77b4"], ["ttft_p95_s", "#ff7f0e"], ["ttft_p99_s", "#9467bd"]], body.slo.ttft_s && body.slo.ttft_s.p95, table.max, label);
    latencyChart("tpot", table, [["tpot_p50_s", "#1f77b4"], ["tpot_p95_s", "#ff7f0e"], ["tpot_p99_s", "#9467bd"]], body.slo.tpot_s && body.slo.tpot_s.p95, table.max, label);
    throughputChart(table, label);
    document.getElementById("capacity-summary").textContent =
      `Highest load meeting the SLO on one replica: ${fmt(table.max)} ${label}; binding: ${capacity.binding_constraint}` +
      (capacity.knee_rate_per_s ? `; knee at ${fmt(capacity.knee_rate_per_s)}/s` : "") + ".";
  }

  function renderSimulate(sim) {
    const table = L.simulationTable(sim);
    keep("simulation", table);
    const col = (c) => table.rows.map((r) => ({ x: r[0], y: r[table.columns.indexOf(c)] }));
    draw("sim", {
      type: "scatter",
      data: {
        datasets: [
          { label: "queue length", data: col("queue_length"), showLine: true, pointRadius: 0, borderColor: "#d62728" },
          { label: "running batch", data: col("running_batch"), showLine: true, pointRadius: 0, borderColor: "#1f77b4" },
          { label: "KV utilisation", data: col("kv_utilization"), showLine: true, pointRadius: 0, borderColor: "#2ca02c", yAxisID: "y2" },
          ...(table.columns.includes("preemptions")
            ? [{ label: "preemptions (since the previous sample)", data: col("preemptions"), showLine: true, stepped: "before", pointRadius: 0, borderColor: "#9467bd", backgroundColor: "#9467bd" }]
            : []),
        ],
      },
      options: { scales: { x: axis("time (s)"), y: axis("requests", { beginAtZero: true }), y2: axis("KV used", { position: "right", min: 0, max: 1 }) } },
    });
    const hist = sim.histograms || {};
    histogramChart("ttft-hist", L.histogramTable(hist.ttft_s), "requests", "#1f77b4");
    histogramChart("itl-hist", L.histogramTable(hist.itl_s), "tokens", "#ff7f0e");
    const grid = document.getElementById("simulate-percentiles");
    const stats = ["mean", "p50", "p90", "p95", "p99"];
    grid.replaceChildren(el("tr", {}, el("th", { text: "" }), ...stats.map((s) => el("th", { text: s }))));
    for (const metric of ["ttft_s", "itl_s", "tpot_s", "e2e_s"]) {
      if (!sim[metric]) continue;
      grid.append(el("tr", {}, el("th", { text: metric }), ...stats.map((s) => el("td", { text: fmt(sim[metric][s]) }))));
    }
    document.getElementById("simulate-summary").textContent =
      `${sim.stable ? "Stable" : "Unstable"}: ${sim.stability_reason}. ${fmt(sim.completed)} completed, ${fmt(sim.failed)} failed; ` +
      `${fmt(sim.throughput_output_tokens_per_s)} output tokens/s.`;
  }

  /* Mean output tokens of a request's length: a number, a distribution's mean, or the
   * endpoint's default (256). */
  function meanTokens(length) {
    if (typeof length === "number") return length;
    if (length && typeof length.mean_tokens === "number") return length.mean_tokens;
    if (length && typeof length.tokens === "number") return length.tokens;
    if (length && typeof length.low_tokens === "number") return (length.low_tokens + length.high_tokens) / 2;
    return 256;
  }

  function renderSizing(sizing, body) {
    const plans = L.plansTable(sizing);
    keep("plans", plans);
    const table = document.getElementById("plans-table");
    table.replaceChildren(el("tr", {}, ...plans.columns.map((c) => el("th", { text: c }))));
    for (const row of plans.rows) table.append(el("tr", {}, ...row.map((v) => el("td", { text: fmt(v) }))));
    const outputTokens = meanTokens(body.traffic && body.traffic.output_tokens);
    const pareto = L.paretoTable(sizing, outputTokens);
    keep("pareto", pareto);
    const point = (r) => ({ x: r[2], y: r[3], label: r[1] });
    draw("pareto", {
      type: "scatter",
      data: {
        datasets: [
          { label: "plans", data: pareto.rows.map(point), backgroundColor: "#1f77b4" },
          { label: "Pareto front", data: pareto.rows.filter((r) => r[4]).map(point).sort((a, b) => a.x - b.x), showLine: true, borderColor: "#ff7f0e", backgroundColor: "#ff7f0e" },
        ],
      },
      options: {
        scales: { x: axis("output tokens/s per user"), y: axis("output tokens/s per GPU") },
        plugins: { tooltip: { callbacks: { label: (ctx) => `${ctx.raw.label}: ${ctx.raw.x.toFixed(1)} tok/s/user, ${ctx.raw.y.toFixed(1)} tok/s/GPU` } } },
      },
    });
    keep("rejected", L.rejectedTable(sizing));
    const groups = L.rejectedGroups(sizing);
    const rejected = document.getElementById("rejected");
    rejected.replaceChildren(...(groups.length ? [] : [el("p", { text: "None." })]));
    for (const group of groups) {
      const list = el("ul", {}, ...group.items.map((r) => el("li", { text: `${r.candidate}: ${r.detail}` })));
      rejected.append(el("details", { "data-reason": group.reason }, el("summary", { text: `${group.reason} (${group.count})` }), list));
    }
    const launch = document.getElementById("launch");
    launch.replaceChildren();
    for (const item of L.launchCommands(sizing)) {
      const copy = el("button", { type: "button", class: "copy", text: "Copy" });
      copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(item.command));
      launch.append(el("div", { class: "command" }, el("span", { text: `plan ${item.rank}, ${item.role}` }), copy, el("pre", { text: item.command })));
    }
    planFiles(sizing);
    document.getElementById("sizing-summary").textContent =
      `${sizing.explanation} (${fmt(sizing.candidates_evaluated)} candidates, ${fmt(sizing.elapsed_s)} s)`;
  }

  /* The winning plans' files: every launch command as a script, the first plan's manifests. */
  function planFiles(sizing) {
    const box = document.getElementById("plan-files");
    box.replaceChildren();
    if (!sizing.plans.length) return;
    const commands = el("a", { href: "#", class: "download", "data-file": "commands", text: "launch commands (.sh)" });
    commands.addEventListener("click", (event) => {
      event.preventDefault();
      save("servesize-launch.sh", L.commandsScript(sizing), "text/x-shellscript");
    });
    box.append(commands);
    const first = (sizing.manifests || []).find((m) => m.rank === sizing.plans[0].rank);
    if (first) {
      const manifests = el("a", { href: "#", class: "download", "data-file": "manifests", text: "plan 1 manifests (.json)" });
      manifests.addEventListener("click", (event) => {
        event.preventDefault();
        save("servesize-plan-1-manifests.json", JSON.stringify(first, null, 2), "application/json");
      });
      box.append(" ", manifests);
    }
  }

  const RENDER = { memory: renderMemory, capacity: renderCapacity, simulate: renderSimulate, sizing: renderSizing };

  async function init() {
    const [models, profiles] = await Promise.all([getAll("/v1/models"), getAll("/v1/hardware")]);
    const modelSelect = form.elements.model;
    for (const m of models) modelSelect.append(el("option", { value: m.id, text: `${m.id} (${(m.parameters_total / 1e9).toFixed(1)} B)` }));
    const hardwareSelect = form.elements.hardware;
    for (const h of profiles) {
      const measured = h.measurement_count > 0;
      hardwareSelect.append(
        el("option", { value: h.id, "data-measured": String(measured), text: `${measured ? "✓ " : ""}${h.name} (${h.id}, ${(h.memory_bytes / 1024 ** 3).toFixed(0)} GiB)` }),
      );
    }
    const { state, run: runs } = L.decodeState(location.search);
    writeState(state);
    form.elements.mode.addEventListener("change", syncMode);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const kind = event.submitter && event.submitter.dataset.run;
      if (kind) run(kind);
    });
    form.addEventListener("change", updateUrl);
    if (jobs) jobs.keepKey(document.getElementById("f-api_key"));
    document.body.dataset.ready = "true";
    for (const kind of runs) if (RENDER[kind] || kind === "compare") await run(kind);
  }

  /* An offline report (servesize.html_report): the request and the answer are inlined in
   * #report-data; draw that answer's figures, call nothing. */
  function renderReport(data) {
    window.__responses[data.kind] = data.response;
    document.getElementById(`s-${data.kind}`).hidden = false;
    RENDER[data.kind](data.response, data.request);
    document.body.dataset.ready = "true";
  }

  const inlined = document.getElementById("report-data");
  if (inlined) {
    renderReport(JSON.parse(inlined.textContent));
  } else {
    init().catch((error) => {
      document.getElementById("form-error").textContent = `could not load the catalogue: ${error.message}`;
    });
  }
})();
