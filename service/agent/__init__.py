"""``servesize-agent``: measures a machine (GPU or CPU) or a serving endpoint and uploads the
results to a servesize server, over HTTP only.

- :mod:`~service.agent.probes`: the ``Probe`` protocol; numpy CPU and torch CUDA probes;
- :mod:`~service.agent.collectives`: all-reduce timing across local GPUs (spawned processes);
- :mod:`~service.agent.bench`: suites and the arithmetic from timings to a ``MeasurementUpload``;
- :mod:`~service.agent.endpoint`: OpenAI-compatible streaming load generator and statistics;
- :mod:`~service.agent.ingest`: vllm bench serve, GuideLLM and AIPerf result files;
- :mod:`~service.agent.upload`: saved payloads and idempotent, retried uploads;
- :mod:`~service.agent.cli`: the command line.
"""
