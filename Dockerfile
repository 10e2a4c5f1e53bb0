# syntax=docker/dockerfile:1
# servesize API server.
#   Build:    docker build -t servesize .
#   Migrate:  docker run --rm -v servesize:/data servesize servesize db upgrade
#   Serve:    docker run -p 8000:8000 -v servesize:/data servesize
# Against PostgreSQL, pass the same DATABASE_URL to both, e.g.
#   -e DATABASE_URL=postgresql+psycopg://user:password@db-host:5432/servesize
# Migrations are a separate, one-shot command (an init container, a release step or a compose
# service the server depends on): the server starts with --no-migrate, so replicas never race to
# migrate, and /readyz answers 503 until the database is at the newest revision.

# Python 3.11.14 on Debian bookworm, pinned by the digest of its multi-architecture index.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements/build.txt requirements/build.txt
RUN python -m pip install --require-hashes -r requirements/build.txt
COPY pyproject.toml README.md ./
COPY servesize ./servesize
RUN python -m pip wheel --no-deps --no-build-isolation --wheel-dir /dist .

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 servesize && mkdir /data && chown servesize /data

# Dependency layer: the locked server and PostgreSQL set; rebuilt only when the lock changes.
COPY requirements/server.txt /tmp/server.txt
RUN python -m pip install --require-hashes -r /tmp/server.txt && rm /tmp/server.txt

# The package itself, as a wheel (migrations and the model catalogue are inside it).
COPY --from=wheel /dist/ /tmp/dist/
RUN python -m pip install --no-deps /tmp/dist/servesize-*.whl && rm -r /tmp/dist && python -m pip check

USER servesize
WORKDIR /home/servesize
ENV DATABASE_URL=sqlite:////data/servesize.db
VOLUME /data
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/livez', timeout=2).status != 200)"

CMD ["servesize", "serve", "--no-migrate", "--host", "0.0.0.0", "--port", "8000"]
