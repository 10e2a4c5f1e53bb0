/* servesize planner: the pure half of the page.
 *
 * Form state -> request bodies, API answers -> chart tables, problem documents -> field
 * messages, tables -> CSV. No DOM, no network: the page (planner.js) draws what these return,
 * and tests/browser/plannerlib.test.js checks them under `node --test` against answers whose
 * numbers are worked out by hand.
 *
 * A "table" is {columns: [name, ...], rows: [[value, ...], ...]}: what a chart plots and what
 * its CSV download holds.
 */
(function (root, factory) {
  if (typeof module === "object" && module.exports) {
    module.exports = factory();
  } else {
    root.PlannerLib = factory();
  }
})(typeof self !== "undefined" ? self : this, function () {
  "use strict";

  const GIB = 1024 ** 3;

  /* The form's fields, their defaults, and how each appears in the query string. */
  const DEFAULTS = {
    model: "meta-llama/Llama-3.1-8B",
    config: "",
    hardware: "h100-sxm",
    engine: "vllm",
    tp: "1",
    pp: "1",
    dp: "1",
    max_model_len: "",
    gpu_memory_utilization: "",
    kv_cache_dtype: "auto",
    quantization: "",
    max_num_seqs: "",
    max_num_batched_tokens: "",
    mode: "rate",
    rate: "5",
    concurrency: "32",
    isl: "1024",
    osl: "256",
    num_requests: "500",
    ttft_p95_s: "1",
    tpot_p95_s: "0.05",
    sizing_hardware: "",
    sizing_tp: "1,2",
    disaggregation: "",
    max_gpus: "",
    compare: "h100-sxm:tp1, h200-sxm:tp1",
  };

  function numberOrNull(text) {
    const value = String(text ?? "").trim();
    if (value === "") return null;
    const number = Number(value);
    return Number.isNaN(number) ? value : number; // the server names a bad value's field
  }

  function listOf(text) {
    return String(text ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  }

  function withoutNulls(object) {
    const out = {};
    for (const [key, value] of Object.entries(object)) {
      if (value !== null && value !== undefined && value !== "") out[key] = value;
    }
    return out;
  }

  /* The model reference: a catalogue id, or {"hf_config": ...} for a pasted config.json. */
  function modelRef(state) {
    const pasted = String(state.config ?? "").trim();
    if (pasted === "") return state.model;
    return { hf_config: JSON.parse(pasted) };
  }

  function deployment(state) {
    return withoutNulls({
      engine: state.engine,
      tensor_parallel_size: numberOrNull(state.tp),
      pipeline_parallel_size: numberOrNull(state.pp),
      data_parallel_size: numberOrNull(state.dp),
      max_model_len: numberOrNull(state.max_model_len),
      gpu_memory_utilization: numberOrNull(state.gpu_memory_utilization),
      kv_cache_dtype: state.kv_cache_dtype,
      quantization: state.quantization,
      max_num_seqs: numberOrNull(state.max_num_seqs),
      max_num_batched_tokens: numberOrNull(state.max_num_batched_tokens),
    });
  }

  function percentileSlo(state) {
    return withoutNulls({
      ttft_s: numberOrNull(state.ttft_p95_s) === null ? null : { p95: numberOrNull(state.ttft_p95_s) },
      tpot_s: numberOrNull(state.tpot_p95_s) === null ? null : { p95: numberOrNull(state.tpot_p95_s) },
    });
  }

  function closedLoop(state) {
    return state.mode === "concurrency";
  }

  /* The body of each endpoint the page calls, from the form's state (strings, as in the URL). */
  function buildRequests(state) {
    const s = { ...DEFAULTS, ...state };
    const model = modelRef(s);
    const dep = deployment(s);
    const lengths = { input_tokens: numberOrNull(s.isl), output_tokens: numberOrNull(s.osl) };
    const numRequests = numberOrNull(s.num_requests);
    const memory = { model, hardware: s.hardware, deployment: dep };
    const capacity = {
      model,
      hardware: s.hardware,
      deployment: dep,
      traffic: withoutNulls({
        mode: closedLoop(s) ? "closed_loop" : "open_loop",
        ...lengths,
        num_requests: numRequests,
      }),
      slo: percentileSlo(s),
      search: { curve_points: 8 },
    };
    const simTraffic = closedLoop(s)
      ? { mode: "closed_loop", concurrency: numberOrNull(s.concurrency) }
      : { mode: "open_loop", arrival: { process: "poisson", rate_per_s: numberOrNull(s.rate) } };
    const simulate = {
      model,
      hardware: s.hardware,
      deployment: dep,
      traffic: withoutNulls({ ...simTraffic, ...lengths, num_requests: numRequests }),
      slo: withoutNulls({ ttft_s: numberOrNull(s.ttft_p95_s), tpot_s: numberOrNull(s.tpot_p95_s) }),
    };
    const hardware = listOf(s.sizing_hardware);
    const tp = listOf(s.sizing_tp).map(Number);
    const one = (value) => (value === null || value === "" ? null : [value]);
    const candidates = withoutNulls({
      hardware: hardware.length ? hardware : [s.hardware],
      engines: [s.engine],
      tensor_parallel: tp.length ? tp : null,
      kv_cache_dtype: s.kv_cache_dtype && s.kv_cache_dtype !== "auto" ? [s.kv_cache_dtype] : null,
      gpu_memory_utilization: one(numberOrNull(s.gpu_memory_utilization)),
      max_model_len: one(numberOrNull(s.max_model_len)),
      disaggregation: s.disaggregation === "on" ? true : null,
      max_gpus: numberOrNull(s.max_gpus),
    });
    const sizing = {
      model,
      traffic: withoutNulls({ rate_per_s: numberOrNull(s.rate), ...lengths }),
      slo: percentileSlo(s),
      candidates,
    };
    return { memory, capacity, simulate, sizing };
  }

  /* Which form field a problem's JSON pointer is about, per endpoint body. */
  const POINTERS = {
    model: ["/model"],
    config: ["/model/hf_config"],
    hardware: ["/hardware", "/candidates/hardware"],
    engine: ["/deployment/engine", "/candidates/engines"],
    tp: ["/deployment/tensor_parallel_size"],
    pp: ["/deployment/pipeline_parallel_size"],
    dp: ["/deployment/data_parallel_size"],
    max_model_len: ["/deployment/max_model_len", "/candidates/max_model_len"],
    gpu_memory_utilization: [
      "/deployment/gpu_memory_utilization",
      "/candidates/gpu_memory_utilization",
    ],
    kv_cache_dtype: ["/deployment/kv_cache_dtype", "/candidates/kv_cache_dtype"],
    quantization: ["/deployment/quantization"],
    max_num_seqs: ["/deployment/max_num_seqs"],
    max_num_batched_tokens: ["/deployment/max_num_batched_tokens"],
    mode: ["/traffic/mode"],
    rate: ["/traffic/arrival/rate_per_s", "/traffic/rate_per_s"],
    concurrency: ["/traffic/concurrency"],
    isl: ["/traffic/input_tokens"],
    osl: ["/traffic/output_tokens"],
    num_requests: ["/traffic/num_requests"],
    ttft_p95_s: ["/slo/ttft_s"],
    tpot_p95_s: ["/slo/tpot_s"],
    sizing_tp: ["/candidates/tensor_parallel"],
    max_gpus: ["/candidates/max_gpus"],
  };

  /* The field whose pointer is the longest prefix of `pointer` (a prefix ends at a "/"). */
  function fieldForPointer(pointer) {
    let best = null;
    let bestLength = -1;
    for (const [field, prefixes] of Object.entries(POINTERS)) {
      for (const prefix of prefixes) {
        const matches = pointer === prefix || pointer.startsWith(prefix + "/");
        if (matches && prefix.length > bestLength) {
          best = field;
          bestLength = prefix.length;
        }
      }
    }
    return best;
  }

  /* An RFC 9457 problem -> {field: [message, ...]}; what names no field goes under "". */
  function problemFieldErrors(problem) {
    const out = {};
    const add = (field, message) => {
      (out[field] = out[field] || []).push(message);
    };
    const errors = Array.isArray(problem && problem.errors) ? problem.errors : [];
    for (const error of errors) {
      const field = error.pointer ? fieldForPointer(error.pointer) : null;
      add(field ?? "", error.detail || problem.detail);
    }
    if (!errors.length) add("", (problem && problem.detail) || "request failed");
    return out;
  }

  /* The memory ledger of the most loaded GPU as stacked segments: every line but "info". */
  function ledgerTable(memory) {
    const rows = memory.line_items
      .filter((item) => item.category !== "info" && item.bytes_per_gpu > 0)
      .map((item) => [
        item.name,
        item.category,
        item.bytes_per_gpu,
        item.bytes_per_gpu / GIB,
        item.formula,
      ]);
    return {
      columns: ["name", "category", "bytes_per_gpu", "gib_per_gpu", "formula"],
      rows,
      device_bytes: memory.device_total_bytes,
      budget_bytes: memory.budget_bytes,
    };
  }

  /* Concurrency vs context length from the KV pool: a request of T tokens holds ceil(T/b)
   * blocks of b tokens, so capacity C tokens hold C / (b·ceil(T/b)) such requests (what the
   * engine logs as "maximum concurrency"). Context lengths: powers of two from 256 (or one
   * block) up to max_model_len, and max_model_len itself. */
  function kvBudgetTable(memory) {
    const block = memory.kv_block_size;
    const capacity = memory.kv_capacity_tokens;
    const limit = memory.max_model_len;
    const lengths = [];
    for (let t = Math.max(256, block); t < limit; t *= 2) lengths.push(t);
    lengths.push(limit);
    const rows = lengths.map((t) => {
      const held = block * Math.ceil(t / block);
      const concurrency = capacity / held;
      return [t, concurrency, Math.floor(concurrency)];
    });
    return { columns: ["context_tokens", "max_concurrency", "whole_requests"], rows };
  }

  /* Curve fields with a prediction interval per point (``<field>_interval``: {low, high}). */
  const BANDED = [
    "ttft_p50_s", "ttft_p95_s", "ttft_p99_s", "tpot_p50_s", "tpot_p95_s", "tpot_p99_s",
    "throughput_requests_per_s",
  ];

  /* Latency vs load from /v1/slo/capacity's curve (rate, or concurrency in a closed loop);
   * each banded field's interval as ``<field>_low`` / ``<field>_high`` columns (null where the
   * point has none). */
  function latencyTable(capacity) {
    const x = capacity.mode === "closed_loop" ? "concurrency" : "rate_per_s";
    const points = capacity.curve
      .filter((p) => p[x] !== null && p[x] !== undefined)
      .slice()
      .sort((a, b) => a[x] - b[x]);
    const rows = points.map((p) => [
      p[x],
      p.ttft_p50_s,
      p.ttft_p95_s,
      p.tpot_p50_s,
      p.tpot_p95_s,
      p.feasible,
      p.ttft_p99_s === undefined ? null : p.ttft_p99_s,
      p.tpot_p99_s === undefined ? null : p.tpot_p99_s,
      p.throughput_requests_per_s === undefined ? null : p.throughput_requests_per_s,
      p.goodput_requests_per_s === undefined ? null : p.goodput_requests_per_s,
      ...BANDED.flatMap((c) => {
        const band = p[`${c}_interval`];
        return band ? [band.low, band.high] : [null, null];
      }),
    ]);
    const interval = capacity.max_rate_per_s_interval;
    return {
      columns: [
        x, "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s", "feasible",
        "ttft_p99_s", "tpot_p99_s", "throughput_requests_per_s", "goodput_requests_per_s",
        ...BANDED.flatMap((c) => [`${c}_low`, `${c}_high`]),
      ],
      rows,
      max: capacity.mode === "closed_loop" ? capacity.max_concurrency : capacity.max_rate_per_s,
      band: interval && capacity.mode !== "closed_loop" ? [interval.low, interval.high] : null,
    };
  }

  /* /v1/simulate's time series, one row per sample; ``preemptions`` counts the requests
   * preempted since the previous sample (the simulator's own events). */
  function simulationTable(sim) {
    const series = sim.time_series || {};
    const columns = ["time_s", "queue_length", "running_batch", "kv_utilization", "preemptions"].filter(
      (c) => Array.isArray(series[c]),
    );
    const n = columns.length ? series[columns[0]].length : 0;
    const rows = [];
    for (let i = 0; i < n; i += 1) rows.push(columns.map((c) => series[c][i]));
    return { columns, rows };
  }

  function planLabel(plan) {
    const p = plan.parallelism || {};
    return (
      `#${plan.rank} ${plan.hardware} ${plan.engine} TP${p.tensor_parallel_size}` +
      ` PP${p.pipeline_parallel_size} ×${plan.replicas ?? plan.prefill_replicas + plan.decode_replicas}`
    );
  }

  function planLatency(plan) {
    return plan.simulation || plan.tier_a || {};
  }

  /* The ranked plans as a table. */
  function plansTable(sizing) {
    const rows = sizing.plans.map((plan) => {
      const lat = planLatency(plan);
      const p = plan.parallelism || {};
      return [
        plan.rank,
        plan.kind,
        plan.hardware,
        plan.engine,
        p.tensor_parallel_size,
        p.pipeline_parallel_size,
        p.data_parallel_size,
        plan.replicas,
        plan.total_gpus,
        plan.cost_per_hour,
        plan.cost_per_million_output_tokens,
        plan.energy ? plan.energy.energy_per_million_output_tokens_kwh : null,
        lat.ttft_p95_s ?? null,
        lat.tpot_p95_s ?? null,
        plan.decided_by,
      ];
    });
    return {
      columns: [
        "rank",
        "kind",
        "hardware",
        "engine",
        "tp",
        "pp",
        "dp",
        "replicas",
        "total_gpus",
        "cost_per_hour",
        "cost_per_million_output_tokens",
        "energy_per_million_output_tokens_kwh",
        "ttft_p95_s",
        "tpot_p95_s",
        "decided_by",
      ],
      rows,
    };
  }

  /* Each plan as (output tokens/s per user, output tokens/s per GPU): a user streams 1/TPOT
   * tokens per second (median TPOT); the fleet's throughput (requests/s · output tokens) is
   * shared by its GPUs. A plan is on the Pareto front when no other plan is at least as good on
   * both and better on one. */
  function paretoTable(sizing, outputTokens) {
    const points = sizing.plans
      .map((plan) => {
        const lat = planLatency(plan);
        const tpot = lat.tpot_p50_s;
        const throughput = lat.throughput_requests_per_s ?? sizing.target_rate_per_s;
        if (!tpot || !plan.total_gpus) return null;
        return {
          rank: plan.rank,
          label: planLabel(plan),
          user: 1 / tpot,
          gpu: (throughput * outputTokens) / plan.total_gpus,
        };
      })
      .filter((p) => p !== null);
    const dominated = (a) =>
      points.some((b) => b !== a && b.user >= a.user && b.gpu >= a.gpu && (b.user > a.user || b.gpu > a.gpu));
    const rows = points.map((p) => [p.rank, p.label, p.user, p.gpu, !dominated(p)]);
    return {
      columns: ["rank", "plan", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "pareto"],
      rows,
    };
  }

  /* Rejected candidates grouped by reason, largest group first. */
  function rejectedGroups(sizing) {
    const groups = new Map();
    for (const r of sizing.rejected || []) {
      if (!groups.has(r.reason)) groups.set(r.reason, []);
      groups.get(r.reason).push(r);
    }
    return [...groups.entries()]
      .map(([reason, items]) => ({ reason, count: items.length, items }))
      .sort((a, b) => b.count - a.count || (a.reason < b.reason ? -1 : 1));
  }

  function rejectedTable(sizing) {
    const rows = (sizing.rejected || []).map((r) => [r.reason, r.candidate, r.detail, r.miss ?? null]);
    return { columns: ["reason", "candidate", "detail", "miss"], rows };
  }

  /* Launch commands of every plan, one per role. */
  function launchCommands(sizing) {
    const out = [];
    for (const plan of sizing.plans) {
      for (const command of (plan.launch && plan.launch.commands) || []) {
        out.push({ rank: plan.rank, role: command.role, command: command.command });
      }
    }
    return out;
  }

  /* A histogram of /v1/simulate ({edges_s, counts}) as one row per bin: [low_s, high_s, count]. */
  function histogramTable(hist) {
    if (!hist) return { columns: ["low_s", "high_s", "count"], rows: [] };
    const rows = hist.counts.map((count, i) => [hist.edges_s[i], hist.edges_s[i + 1], count]);
    return { columns: ["low_s", "high_s", "count"], rows };
  }

  /* The deployments to compare: "GPU[:tpN][:ENGINE]" items separated by commas, each the
   * simulate body of the form with its hardware, tensor_parallel_size and engine replaced. */
  function compareBodies(state) {
    const base = buildRequests(state).simulate;
    const out = [];
    for (const item of listOf(state.compare === undefined ? DEFAULTS.compare : state.compare)) {
      const [hardware, ...rest] = item.split(":").map((part) => part.trim());
      const deployment = { ...base.deployment };
      for (const part of rest) {
        const tp = /^tp(\d+)$/i.exec(part);
        if (tp) deployment.tensor_parallel_size = Number(tp[1]);
        else if (part) deployment.engine = part;
      }
      out.push({ label: item, body: { ...base, hardware, deployment } });
    }
    return out;
  }

  /* One row per compared deployment ({label, body} of compareBodies) from its /v1/simulate
   * answer (same traffic, same seed); GPUs per replica = TP × PP × DP of the body. */
  function compareTable(items, answers) {
    const columns = [
      "deployment", "gpus", "ttft_p50_s", "ttft_p95_s", "tpot_p50_s", "tpot_p95_s",
      "throughput_output_tokens_per_s", "output_tokens_per_s_per_gpu", "slo_attainment", "stable",
    ];
    const stat = (metric, s) => (metric ? metric[s] : null);
    const rows = answers.map((a, i) => {
      const d = items[i].body.deployment || {};
      const gpus = (d.tensor_parallel_size || 1) * (d.pipeline_parallel_size || 1) * (d.data_parallel_size || 1);
      const tokens = a.throughput_output_tokens_per_s;
      return [
        items[i].label, gpus, stat(a.ttft_s, "p50"), stat(a.ttft_s, "p95"), stat(a.tpot_s, "p50"),
        stat(a.tpot_s, "p95"), tokens, tokens === null || tokens === undefined ? null : tokens / gpus,
        a.slo_attainment === undefined ? null : a.slo_attainment, a.stable,
      ];
    });
    return { columns, rows };
  }

  /* Every launch command of a sizing answer as one shell script, ranked plans in order. */
  function commandsScript(sizing) {
    const lines = ["#!/bin/sh", `# servesize sizing of ${sizing.model}: launch commands per ranked plan`];
    for (const item of launchCommands(sizing)) lines.push("", `# plan ${item.rank}, ${item.role}`, item.command);
    return lines.join("\n") + "\n";
  }

  function csvCell(value) {
    if (value === null || value === undefined) return "";
    const text = String(value);
    return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  }

  /* RFC 4180 CSV of a table (CRLF line ends). */
  function toCsv(table) {
    const lines = [table.columns, ...table.rows].map((row) => row.map(csvCell).join(","));
    return lines.join("\r\n") + "\r\n";
  }

  /* Page state <-> query string: only values that differ from the defaults, plus `run`. */
  function encodeState(state, run) {
    const params = new URLSearchParams();
    for (const key of Object.keys(DEFAULTS)) {
      const value = state[key] ?? DEFAULTS[key];
      if (value !== DEFAULTS[key]) params.set(key, value);
    }
    if (run && run.length) params.set("run", run.join(","));
    return params.toString();
  }

  function decodeState(query) {
    const params = new URLSearchParams(query);
    const state = { ...DEFAULTS };
    for (const key of Object.keys(DEFAULTS)) {
      if (params.has(key)) state[key] = params.get(key);
    }
    return { state, run: listOf(params.get("run")) };
  }

  return {
    DEFAULTS,
    POINTERS,
    buildRequests,
    fieldForPointer,
    problemFieldErrors,
    ledgerTable,
    kvBudgetTable,
    latencyTable,
    simulationTable,
    plansTable,
    paretoTable,
    rejectedGroups,
    rejectedTable,
    launchCommands,
    histogramTable,
    compareBodies,
    compareTable,
    commandsScript,
    toCsv,
    encodeState,
    decodeState,
  };
});
