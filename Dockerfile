# servesize API server. Build: docker build -t servesize .
# Run (embedded SQLite in a volume):  docker run -p 8000:8000 -v servesize:/data servesize
# Run against PostgreSQL:             docker run -p 8000:8000 \
#   -e DATABASE_URL=postgresql+psycopg://user:password@db-host:5432/servesize servesize
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 servesize && mkdir /data && chown servesize /data
WORKDIR /app

COPY pyproject.toml README.md ./
COPY service ./service
COPY migrations ./migrations
COPY models ./models
# Editable install keeps migrations/ and models/ beside the package, where it looks for them.
RUN pip install -e .

USER servesize
ENV DATABASE_URL=sqlite:////data/servesize.db
VOLUME /data
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=2).status != 200)"

# `serve` applies pending migrations, then starts uvicorn.
CMD ["servesize", "serve", "--host", "0.0.0.0", "--port", "8000"]
