"""``servesize-agent``: measures a machine (GPU or CPU) or a serving endpoint and uploads the
results to a servesize server, over HTTP only.

- :mod:`~servesize.agent.probes`: the ``Probe`` protocol; numpy CPU and torch CUDA probes;
- :mod:`~servesize.agent.collectives`: all-reduce timing across local GPUs (spawned processes);
- :mod:`~servesize.agent.bench`: suites and the arithmetic from timings to a ``MeasurementUpload``;
- :mod:`~servesize.agent.endpoint`: OpenAI-compatible streaming load generator and statistics;
- :mod:`~servesize.agent.ingest`: vllm bench serve, GuideLLM and AIPerf result files;
- :mod:`~servesize.agent.upload`: saved payloads and idempotent, retried uploads;
- :mod:`~servesize.agent.cli`: the command line.
"""
