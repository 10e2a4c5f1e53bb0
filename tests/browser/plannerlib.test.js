// The planner page's pure functions (servesize/api/static/plannerlib.js) under `node --test`;
// run by tests/browser/test_plannerlib.py. Expected numbers are worked out by hand in comments.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const L = require(path.join(__dirname, "..", "..", "servesize", "api", "static", "plannerlib.js"));

const GIB = 2 ** 30;

test("ledger keeps every charged line, drops info lines and empty ones, in GiB", () => {
  const memory = {
    device_total_bytes: 80 * GIB,
    budget_bytes: 72 * GIB,
    line_items: [
      { name: "weights: embedding", bytes_per_gpu: GIB, formula: "a", category: "weights" },
      { name: "KV cache pool", bytes_per_gpu: 3 * GIB / 2, formula: "b", category: "kv_cache" },
      { name: "nothing", bytes_per_gpu: 0, formula: "c", category: "reserve" },
      { name: "budget (vllm)", bytes_per_gpu: 72 * GIB, formula: "d", category: "info" },
    ],
  };
  const table = L.ledgerTable(memory);
  assert.deepEqual(table.columns, ["name", "category", "bytes_per_gpu", "gib_per_gpu", "formula"]);
  assert.deepEqual(table.rows, [
    ["weights: embedding", "weights", GIB, 1, "a"],
    ["KV cache pool", "kv_cache", 1610612736, 1.5, "b"],
  ]);
  assert.equal(table.device_bytes, 85899345920);
});

test("KV budget: capacity over whole blocks per request, up to max_model_len", () => {
  // 431,072 tokens of 16-token blocks; max_model_len 1000 -> 63 blocks = 1008 tokens each:
  // 431072 / 1008 = 427.65..., 427 whole requests; 256 -> 1683.875; 512 -> 841.9375.
  const table = L.kvBudgetTable({ kv_block_size: 16, kv_capacity_tokens: 431072, max_model_len: 1000 });
  assert.deepEqual(table.rows.map((r) => r[0]), [256, 512, 1000]);
  assert.equal(table.rows[0][1], 1683.875);
  assert.equal(table.rows[1][1], 841.9375);
  assert.ok(Math.abs(table.rows[2][1] - 427.6507936507936) < 1e-12);
  assert.deepEqual(table.rows.map((r) => r[2]), [1683, 841, 427]);
  // 8192 tokens = 512 blocks: 431072 / 8192 = 52.62109375, what vLLM logs as the maximum
  // concurrency for a Llama-3.1-8B pool of that size.
  const llama = L.kvBudgetTable({ kv_block_size: 16, kv_capacity_tokens: 431072, max_model_len: 8192 });
  assert.equal(llama.rows.length, 6); // 256, 512, 1024, 2048, 4096, 8192
  assert.equal(llama.rows.at(-1)[1], 52.62109375);
});

test("latency curve sorted by load; closed loop plots concurrency", () => {
  const point = (concurrency, t) => ({
    rate_per_s: null, concurrency, ttft_p50_s: t, ttft_p95_s: 2 * t, tpot_p50_s: t / 10,
    tpot_p95_s: t / 5, feasible: t < 1,
  });
  const table = L.latencyTable({
    mode: "closed_loop", max_concurrency: 48, max_rate_per_s: null,
    curve: [point(64, 2), point(8, 0.1), point(32, 0.5)],
  });
  assert.equal(table.columns[0], "concurrency");
  assert.deepEqual(table.rows.map((r) => r[0]), [8, 32, 64]);
  // p99 and throughput columns absent from the answer read as null.
  assert.deepEqual(table.rows[1], [32, 0.5, 1, 0.05, 0.1, true, null, null, null, null, ...Array(14).fill(null)]);
  assert.equal(table.max, 48);
  assert.equal(table.band, null);
});

test("latency curve carries p99, throughput and goodput, and the max rate's interval", () => {
  const table = L.latencyTable({
    mode: "open_loop", max_concurrency: null, max_rate_per_s: 7.5,
    max_rate_per_s_interval: { low: 6.0, high: 9.0, level: 0.8 },
    curve: [{
      rate_per_s: 5, concurrency: null, ttft_p50_s: 0.1, ttft_p95_s: 0.2, tpot_p50_s: 0.01,
      tpot_p95_s: 0.02, ttft_p99_s: 0.3, tpot_p99_s: 0.03, throughput_requests_per_s: 4.9,
      goodput_requests_per_s: 4.8, feasible: true,
    }],
  });
  assert.deepEqual(table.rows[0].slice(0, 10), [5, 0.1, 0.2, 0.01, 0.02, true, 0.3, 0.03, 4.9, 4.8]);
  assert.deepEqual(table.rows[0].slice(10), Array(14).fill(null)); // no per-point intervals
  assert.deepEqual(table.band, [6.0, 9.0]);
});

test("every curve point's prediction intervals become low/high columns", () => {
  // TTFT p95 0.2 s with the band [0.16, 0.3]; a closed loop's throughput 4 with [3.5, 4.4].
  const table = L.latencyTable({
    mode: "closed_loop", max_concurrency: 32, max_rate_per_s: null,
    curve: [{
      rate_per_s: null, concurrency: 16, ttft_p50_s: 0.1, ttft_p95_s: 0.2, tpot_p50_s: 0.01,
      tpot_p95_s: 0.02, throughput_requests_per_s: 4, goodput_requests_per_s: 4, feasible: true,
      ttft_p95_s_interval: { low: 0.16, high: 0.3, coverage: 0.8, basis: "*/*" },
      throughput_requests_per_s_interval: { low: 3.5, high: 4.4, coverage: 0.8, basis: "*/*" },
    }],
  });
  const at = (c) => table.rows[0][table.columns.indexOf(c)];
  assert.equal(at("ttft_p95_s_low"), 0.16);
  assert.equal(at("ttft_p95_s_high"), 0.3);
  assert.equal(at("throughput_requests_per_s_low"), 3.5);
  assert.equal(at("throughput_requests_per_s_high"), 4.4);
  assert.equal(at("ttft_p50_s_low"), null);
  assert.equal(at("tpot_p99_s_high"), null);
  assert.equal(table.columns.length, 10 + 14);
});

test("histogram bins: one row per bin, edges from the answer", () => {
  // Edges 0, 0.5, 1.0 with 3 and 1 values: two rows.
  const table = L.histogramTable({ edges_s: [0, 0.5, 1.0], counts: [3, 1] });
  assert.deepEqual(table.columns, ["low_s", "high_s", "count"]);
  assert.deepEqual(table.rows, [[0, 0.5, 3], [0.5, 1.0, 1]]);
  assert.deepEqual(L.histogramTable(null).rows, []);
});

test("compare: one simulate body per listed deployment, GPUs per replica from its layout", () => {
  const items = L.compareBodies({ compare: "h100-sxm:tp2, h200-sxm:sglang", rate: "3" });
  assert.deepEqual(items.map((i) => i.label), ["h100-sxm:tp2", "h200-sxm:sglang"]);
  assert.equal(items[0].body.hardware, "h100-sxm");
  assert.equal(items[0].body.deployment.tensor_parallel_size, 2);
  assert.equal(items[1].body.deployment.engine, "sglang");
  // Same traffic for both: the form's open loop at 3 requests/s.
  assert.deepEqual(items[0].body.traffic, items[1].body.traffic);
  assert.equal(items[0].body.traffic.arrival.rate_per_s, 3);
  const answer = (tokens, p95) => ({
    stable: true, slo_attainment: 1, throughput_output_tokens_per_s: tokens,
    ttft_s: { p50: p95 / 2, p95 }, tpot_s: { p50: 0.01, p95: 0.02 },
  });
  const table = L.compareTable(items, [answer(1000, 0.4), answer(600, 0.3)]);
  // 1000 tokens/s over TP2 = 500 per GPU; 600 over 1 GPU = 600.
  assert.deepEqual(table.rows.map((r) => [r[0], r[1], r[7]]), [["h100-sxm:tp2", 2, 500], ["h200-sxm:sglang", 1, 600]]);
});

test("launch commands as one script, ranked plans in order", () => {
  const sizing = {
    model: "m",
    plans: [
      { rank: 1, launch: { commands: [{ role: "server", command: "vllm serve m --tensor-parallel-size 2" }] } },
      { rank: 2, launch: { commands: [{ role: "prefill", command: "a" }, { role: "decode", command: "b" }] } },
    ],
  };
  const script = L.commandsScript(sizing);
  assert.ok(script.startsWith("#!/bin/sh\n"));
  assert.deepEqual(script.split("\n").filter((l) => l && !l.startsWith("#")), ["vllm serve m --tensor-parallel-size 2", "a", "b"]);
  assert.ok(script.indexOf("# plan 1, server") < script.indexOf("# plan 2, prefill"));
});

test("simulation time series becomes one row per sample, preemptions per interval", () => {
  const table = L.simulationTable({
    time_series: {
      time_s: [0, 1, 2], queue_length: [0, 3, 1], running_batch: [1, 4, 2],
      kv_utilization: [0.1, 0.5, 0.9], preemptions: [0, 0, 2],
    },
  });
  assert.deepEqual(table.columns, ["time_s", "queue_length", "running_batch", "kv_utilization", "preemptions"]);
  assert.deepEqual(table.rows, [[0, 0, 1, 0.1, 0], [1, 3, 4, 0.5, 0], [2, 1, 2, 0.9, 2]]);
  // An answer from before the preemption series: the four other columns only.
  const old = L.simulationTable({ time_series: { time_s: [0], queue_length: [1], running_batch: [2], kv_utilization: [0.5] } });
  assert.deepEqual(old.columns, ["time_s", "queue_length", "running_batch", "kv_utilization"]);
});

function plan(rank, gpus, latency, source = "simulation") {
  return {
    rank, kind: "aggregated", hardware: "h100-sxm", engine: "vllm", replicas: gpus, total_gpus: gpus,
    parallelism: { tensor_parallel_size: 1, pipeline_parallel_size: 1, data_parallel_size: 1 },
    cost_per_hour: gpus * 2.5, cost_per_million_output_tokens: 1, decided_by: source,
    tier_a: source === "tier_a" ? latency : null, simulation: source === "simulation" ? latency : null,
    launch: { commands: [{ role: "server", command: `vllm serve m --port 800${rank}` }] },
  };
}

test("Pareto: tokens/s per user is 1/TPOT p50, per GPU the fleet's output over its GPUs", () => {
  // 256 output tokens. A: 2 GPUs, TPOT 10 ms, 20 req/s -> 100 tok/s/user, 20·256/2 = 2560.
  // B: 1 GPU (Tier A only), 20 ms, 10 req/s -> 50, 2560: dominated by A. C: 4 GPUs, 5 ms,
  // 20 req/s -> 200, 1280: on the front.
  const sizing = {
    target_rate_per_s: 20,
    plans: [
      plan(1, 2, { tpot_p50_s: 0.01, throughput_requests_per_s: 20 }),
      plan(2, 1, { tpot_p50_s: 0.02, throughput_requests_per_s: 10 }, "tier_a"),
      plan(3, 4, { tpot_p50_s: 0.005, throughput_requests_per_s: 20 }),
    ],
    rejected: [
      { candidate: "l40s TP1", reason: "does-not-fit", detail: "weights exceed memory" },
      { candidate: "l4 TP1", reason: "does-not-fit", detail: "weights exceed memory" },
      { candidate: "a10g TP2", reason: "slo-miss", detail: "TTFT p95 2 s", miss: 1.0 },
    ],
  };
  const table = L.paretoTable(sizing, 256);
  assert.deepEqual(table.rows.map((r) => [r[0], r[2], r[3], r[4]]), [
    [1, 100, 2560, true],
    [2, 50, 2560, false],
    [3, 200, 1280, true],
  ]);
  const groups = L.rejectedGroups(sizing);
  assert.deepEqual(groups.map((g) => [g.reason, g.count]), [["does-not-fit", 2], ["slo-miss", 1]]);
  assert.deepEqual(L.rejectedTable(sizing).rows[2], ["slo-miss", "a10g TP2", "TTFT p95 2 s", 1.0]);
  assert.deepEqual(L.launchCommands(sizing).map((c) => c.command), [
    "vllm serve m --port 8001", "vllm serve m --port 8002", "vllm serve m --port 8003",
  ]);
  assert.deepEqual(L.plansTable(sizing).rows[0].slice(0, 10), [1, "aggregated", "h100-sxm", "vllm", 1, 1, 1, 2, 2, 5]);
  const energyColumn = L.plansTable(sizing).columns.indexOf("energy_per_million_output_tokens_kwh");
  assert.equal(energyColumn, 11);
  assert.equal(L.plansTable(sizing).rows[0][energyColumn], null); // no energy in the answer
  const withEnergy = { plans: [{ ...sizing.plans[0], energy: { energy_per_million_output_tokens_kwh: 0.04 } }] };
  assert.equal(L.plansTable(withEnergy).rows[0][energyColumn], 0.04);
});

test("a problem's pointers land on the form field they name", () => {
  const problem = {
    detail: "invalid",
    errors: [
      { pointer: "/deployment/tensor_parallel_size", detail: "32 heads not divisible by 3" },
      { pointer: "/deployment/tensor_parallel_size", detail: "MLP width not divisible by 3" },
      { pointer: "/model/hf_config/num_attention_heads", detail: "missing" },
      { pointer: "/candidates/tensor_parallel/0", detail: "must be >= 1" },
      { pointer: "/traffic/arrival/rate_per_s", detail: "must be > 0" },
      { pointer: "/somewhere/else", detail: "odd" },
    ],
  };
  assert.deepEqual(L.problemFieldErrors(problem), {
    tp: ["32 heads not divisible by 3", "MLP width not divisible by 3"],
    config: ["missing"],
    sizing_tp: ["must be >= 1"],
    rate: ["must be > 0"],
    "": ["odd"],
  });
  // "/modelx" is not under "/model": a prefix ends at a slash.
  assert.equal(L.fieldForPointer("/modelx"), null);
  assert.deepEqual(L.problemFieldErrors({ detail: "no model 'x'" }), { "": ["no model 'x'"] });
});

test("CSV quotes commas, quotes and newlines (RFC 4180)", () => {
  const csv = L.toCsv({ columns: ["a", "b"], rows: [["x,y", 'say "hi"'], [1.5, null], ["l1\nl2", true]] });
  assert.equal(csv, 'a,b\r\n"x,y","say ""hi"""\r\n1.5,\r\n"l1\nl2",true\r\n');
});

test("the query string holds what differs from the defaults, and reads back", () => {
  const state = { ...L.DEFAULTS, tp: "2", hardware: "l40s" };
  const query = L.encodeState(state, ["memory", "sizing"]);
  assert.equal(query, "hardware=l40s&tp=2&run=memory%2Csizing");
  const back = L.decodeState("?" + query);
  assert.deepEqual(back.state, state);
  assert.deepEqual(back.run, ["memory", "sizing"]);
});

test("request bodies from the form state", () => {
  const bodies = L.buildRequests({ tp: "2", max_model_len: "8192", mode: "concurrency", sizing_tp: "1, 4" });
  assert.deepEqual(bodies.memory, {
    model: "meta-llama/Llama-3.1-8B",
    hardware: "h100-sxm",
    deployment: {
      engine: "vllm", tensor_parallel_size: 2, pipeline_parallel_size: 1, data_parallel_size: 1,
      max_model_len: 8192, kv_cache_dtype: "auto",
    },
  });
  assert.deepEqual(bodies.simulate.traffic, {
    mode: "closed_loop", concurrency: 32, input_tokens: 1024, output_tokens: 256, num_requests: 500,
  });
  assert.deepEqual(bodies.capacity.slo, { ttft_s: { p95: 1 }, tpot_s: { p95: 0.05 } });
  assert.deepEqual(bodies.sizing.candidates, {
    hardware: ["h100-sxm"], engines: ["vllm"], tensor_parallel: [1, 4], max_model_len: [8192],
  });
  const pasted = L.buildRequests({ config: '{"model_type": "llama"}' });
  assert.deepEqual(pasted.memory.model, { hf_config: { model_type: "llama" } });
  assert.throws(() => L.buildRequests({ config: "{not json" }), SyntaxError);
  // A value that is not a number goes as typed, for the server to name its field.
  assert.equal(L.buildRequests({ tp: "two" }).memory.deployment.tensor_parallel_size, "two");
});
