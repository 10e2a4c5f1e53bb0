# Two commands for a fresh machine: `make run` and `make test`.
# Dependencies come from the hashed lock files in requirements/ (regenerate with `make lock`).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed
LOCKS := requirements/build.txt requirements/lock.txt

# `make lock` keeps every pin it can; `make lock UPGRADE=1` moves them to the newest releases.
UV_VERSION := 0.13.9
LOCK_VENV := .venv-lock
UV := $(LOCK_VENV)/bin/uv
UV_COMPILE = $(UV) pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)

.PHONY: install run test lint browser-deps bench bench-load bench-faults fuzz lock clean

install: $(STAMP)

# The locked set (dev, server, postgres, hub, agent), then the project itself without dependencies.
$(STAMP): $(LOCKS) pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/build.txt
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements/lock.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: install
	$(BIN)/servesize serve --host $(HOST) --port $(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The browser tests (tests/browser) drive Debian's headless Chromium through its chromedriver.
# Installed with apt-get only when missing (and only as root); without them those tests skip,
# except with CI=true, where they fail.
browser-deps:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && command -v node >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			chromium chromium-driver nodejs >/dev/null; \
	else echo "browser-deps: run as root, or: sudo apt-get install chromium chromium-driver nodejs"; fi

test: lint browser-deps
	$(BIN)/python -m pytest -n 2 --dist worksteal

bench: install
	$(BIN)/python -m bench

# 100 clients x 60 s per endpoint against `servesize serve` and a bare FastAPI endpoint.
bench-load: install
	$(BIN)/python -m bench.load --clients 100 --duration-s 60

# An own PostgreSQL restarted twice under uploads; kill -9 of the server during uploads.
bench-faults: install
	$(BIN)/python -m bench.faults

# The exploratory Schemathesis run (`make test` runs a bounded one): FUZZ_ARGS=--cases 1000.
# PostgreSQL from POSTGRES_TEST_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/test).
FUZZ_ARGS ?= --cases 300 --heavy-cases 40 --scenarios 300 --postgres
fuzz: install
	$(BIN)/python -m tests.api.contract_fuzz $(FUZZ_ARGS)

# build.txt: pip and setuptools; lock.txt: the dev extra (everything but cuda); at lock.txt's
# versions, server.txt: the Docker image (server, postgres); agent.txt: `servesize[agent]`.
lock:
	test -x $(UV) || { $(PYTHON) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/python -m pip install --quiet uv==$(UV_VERSION); }
	$(UV_COMPILE) requirements/build.in -o requirements/build.txt
	$(UV_COMPILE) pyproject.toml --extra dev -o requirements/lock.txt
	$(UV_COMPILE) pyproject.toml --extra server --extra postgres -c requirements/lock.txt \
		-o requirements/server.txt
	$(UV_COMPILE) pyproject.toml --extra agent -c requirements/lock.txt -o requirements/agent.txt

clean:
	rm -rf $(VENV) $(LOCK_VENV) servesize.db servesize.db-wal servesize.db-shm
