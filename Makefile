# Fieldcraft — two commands do all set-up on a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?= -n 2

.PHONY: run test lint format bench install browser backup restore clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/python -m config.run

# Debian's chromium for the end-to-end tests (Playwright drives /usr/bin/chromium).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian chromium for the browser tests..."; \
	    (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) \
	      || echo "chromium could not be installed; browser tests will be skipped"; \
	  else echo "No /usr/bin/chromium and cannot install it; browser tests will be skipped"; fi; \
	fi

# pytest exits 5 when it collects nothing: that is a broken suite, said plainly.
test: install browser
	@if [ -n "$$DATABASE_URL" ]; then \
	  $(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	else \
	  $(BIN)/python -m config.embedded_db run -- $(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	fi; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests (exit 5)"; fi; \
	exit $$status

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/lint-imports
	@if [ -n "$$DATABASE_URL" ]; then $(BIN)/python manage.py makemigrations --check --dry-run; \
	else $(BIN)/python -m config.embedded_db run -- $(BIN)/python manage.py makemigrations --check --dry-run; fi

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	@for script in bench/*.py; do echo "== $$script"; \
	  if [ -n "$$DATABASE_URL" ]; then $(BIN)/python $$script; \
	  else $(BIN)/python -m config.embedded_db run -- $(BIN)/python $$script; fi; done

# Backups of the embedded or external database (pg_dump custom format).
BACKUP ?= backups/fieldcraft-$(shell date +%Y%m%d-%H%M%S).dump
backup: install
	$(BIN)/python -m config.backup dump $(BACKUP)

restore: install
	@test -n "$(FILE)" || (echo "usage: make restore FILE=backups/fieldcraft-....dump" && exit 2)
	$(BIN)/python -m config.backup restore $(FILE)

clean:
	rm -rf .data/broker .data/staticfiles
