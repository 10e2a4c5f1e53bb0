/* servesize planner: runs as background jobs. With an API key of scope jobs:write in the form,
 * a capacity search, simulation or sizing is POST /v1/jobs (the same body under `request`),
 * polled at GET /v1/jobs/{id} for its progress and cancelled with DELETE /v1/jobs/{id}, which
 * stops the work on the server. The key lives in this tab's sessionStorage, never in the URL.
 * Every progress the page showed is kept in window.__jobs[kind] (for tests). */
(function () {
  "use strict";

  /* ui: {el, status, showProblem, pending, finish(kind, result, body)} from planner.js. */
  function create(ui) {
    const { el, status, showProblem, pending } = ui;
    window.__jobs = {}; // kind -> {id, progress: [...]}

    /* The API key for jobs: in this tab's sessionStorage, never in the URL. */
    const KEY_STORE = "servesize.jobs_api_key";
    const JOB_KINDS = new Set(["capacity", "simulate", "sizing"]);
    const JOB_POLL_MS = 300;

    function apiKey() {
      const field = document.getElementById("f-api_key");
      return field ? field.value.trim() : "";
    }

    /* The key field's value kept in (and restored from) this tab's sessionStorage. */
    function keepKey(field) {
      field.value = sessionStorage.getItem(KEY_STORE) || "";
      field.addEventListener("input", () => {
        if (field.value.trim()) sessionStorage.setItem(KEY_STORE, field.value.trim());
        else sessionStorage.removeItem(KEY_STORE);
      });
    }

    const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

    /* One run as a background job (POST /v1/jobs): progress polled from GET /v1/jobs/{id},
     * Cancel sends DELETE /v1/jobs/{id}, which stops the work on the server. */
    async function run(kind, body) {
      const auth = { Authorization: `Bearer ${apiKey()}` };
      const job = { id: null, cancelled: false };
      pending[kind] = { abort: () => { job.cancelled = true; } };
      const mine = pending[kind];
      const section = document.getElementById(`s-${kind}`);
      const cancel = el("button", { type: "button", class: "cancel", text: "Cancel" });
      cancel.addEventListener("click", () => mine.abort());
      const bar = el("progress", { "data-kind": kind });
      const text = el("span", { class: "job-progress", text: "submitting…" });
      status(kind, el("span", { class: "spinner job", "data-kind": kind }, el("i"), " ", bar, " ", text, " ", cancel));
      const seen = (window.__jobs[kind] = { id: null, progress: [] });
      try {
        const submitted = await fetch("/v1/jobs", {
          method: "POST",
          headers: { "Content-Type": "application/json", Accept: "application/json", ...auth },
          body: JSON.stringify({ kind, request: body, ...(kind === "sizing" ? { manifests: true } : {}) }),
        });
        let answer = await submitted.json();
        if (!submitted.ok) return jobProblem(kind, answer);
        job.id = seen.id = section.dataset.job = answer.id;
        while (!["succeeded", "failed", "cancelled"].includes(answer.state)) {
          if (job.cancelled) {
            const cancelled = await fetch(`/v1/jobs/${job.id}`, { method: "DELETE", headers: auth });
            answer = await cancelled.json();
            if (!cancelled.ok) {
              if (answer.state !== "succeeded") return jobProblem(kind, answer);
              answer = await (await fetch(`/v1/jobs/${job.id}`, { headers: auth })).json(); // finished first: draw it
            }
            continue;
          }
          const p = answer.progress;
          if (p) {
            seen.progress.push(p);
            bar.max = p.total || 1;
            bar.value = p.done;
            bar.dataset.done = String(p.done);
            const eta = p.eta_s === null || p.eta_s === undefined ? "" : `, about ${Math.ceil(p.eta_s)} s left`;
            text.textContent = `${answer.state}: ${p.done} of ${p.total ?? "?"} done${eta}`;
          } else {
            text.textContent = `${answer.state}…`;
          }
          await sleep(JOB_POLL_MS);
          if (job.cancelled) continue;
          const polled = await fetch(`/v1/jobs/${job.id}`, { headers: auth });
          answer = await polled.json();
          if (!polled.ok) return jobProblem(kind, answer);
        }
        if (answer.state === "cancelled") return status(kind, el("p", { class: "problem", text: "cancelled" }));
        if (answer.state === "failed") return jobProblem(kind, answer.error || {});
        ui.finish(kind, answer.result, body);
      } catch (error) {
        status(kind, el("p", { class: "problem", text: `failed: ${error.message}` }));
      } finally {
        if (pending[kind] === mine) delete pending[kind];
      }
    }

    /* A job's problem: the inner request's pointers (under /request) shown at their fields; a
     * refused key at the key field. */
    function jobProblem(kind, problem) {
      status(kind, el("p", { class: "problem", text: `${problem.status} ${problem.title}: ${problem.detail}` }));
      if (problem.status === 401 || problem.status === 403) {
        document.querySelector('[data-error-for="api_key"]').textContent = problem.detail;
        document.getElementById("f-api_key").classList.add("invalid");
        return;
      }
      const errors = (problem.errors || []).map((e) => ({ ...e, pointer: String(e.pointer || "").replace(/^\/request/, "") }));
      showProblem({ ...problem, errors });
    }

    return { wanted: (kind) => apiKey() !== "" && JOB_KINDS.has(kind), run, keepKey };
  }

  window.PlannerJobs = { create };
})();
