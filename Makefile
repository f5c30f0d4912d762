# mpmd-lab: two commands set everything up on a fresh machine.
# (Packages are compiled to bytecode once, at install: without it every Python process,
# each CLI call, test child, JAX worker and kernel, compiles them anew: +0.3 s for
# `mpmd-lab check`, +3 s for `import jax`. See bench/README.md, "startup".)
#   make lab    build the environment if missing or stale, then start JupyterLab on notebooks/
#   make test   build the environment if needed, then run the whole test suite
SHELL := /bin/bash
export PYENV_VERSION ?= 3.12
export UV_PYTHON_DOWNLOADS := never
PYTHON ?= python3.12
VENV := .venv
STAMP := $(VENV)/.installed
PORT ?= 8888
UV := $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")

.PHONY: lab test test-fast bench lint typecheck format fuzz clean .venv system-deps binder-badge

$(STAMP): pyproject.toml uv.lock
	@$(PYTHON) -m uv --version >/dev/null 2>&1 || command -v uv >/dev/null || $(PYTHON) -m pip install -q uv
	$(UV) sync --locked --extra test --compile-bytecode
	@$(VENV)/bin/python -m compileall -q toolkit widgets >/dev/null || true
	@touch $(STAMP)

.venv: $(STAMP)

# No news or update toast over the Lab's corner: the feed is off (news_url=None) and the
# notification plugin's defaults say so, in this environment's own settings (not ~/.jupyter)
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json

$(LAB_OVERRIDES): $(STAMP)
	@mkdir -p $(dir $@)
	@echo '{"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": false}}' > $@

lab: $(STAMP) $(LAB_OVERRIDES)
	$(VENV)/bin/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) \
		$$( [ "$$(id -u)" = 0 ] && echo --allow-root ) --ServerApp.root_dir=notebooks \
		--LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate

# Chromium (and fonts) for the real-browser test, from Debian's packages.
system-deps:
	@if [ -x /usr/bin/chromium ] && fc-list 2>/dev/null | grep -qi dejavu; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null; \
	else echo "the browser test needs: sudo apt-get install chromium fonts-dejavu-core" >&2; fi

# everything, as CI runs it: JOBS processes (pytest-xdist) for all but the tests that want
# the machine to themselves (a timing bound, JupyterLab, the browser), then those alone
ALONE := serial or notebooks or browser
test: $(STAMP) system-deps
	@$(VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(JOBS) -m "not ($(ALONE))" \
		$(PYTEST_ARGS); parallel=$$?; \
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -m "$(ALONE)" $(PYTEST_ARGS); alone=$$?; \
	[ $$alone = 5 ] && alone=0; exit $$(( parallel || alone ))

# the inner loop: no notebooks, no browser, no slow JAX stories, no fuzzing (under 2 minutes
# on 2 cores):
# the tiers are pytest markers on the tests (pyproject.toml); JOBS processes (pytest-xdist),
# then the tests with a timing bound (``serial``) alone
FAST := not notebooks and not browser and not slow and not fuzz
JOBS ?= 2
# the serial pass collects only the files that mark a test ``pytest.mark.serial``
# (collecting the whole suite a second time took ~15 s of the two minutes)
SERIAL_FILES = $(or $(shell grep -l "mark\.serial" tests/*.py),tests)
test-fast: $(STAMP)
	@$(VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(JOBS) -m "$(FAST) and not serial" \
		--ignore=tests/browser $(PYTEST_ARGS); parallel=$$?; \
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -m "$(FAST) and serial" \
		$(SERIAL_FILES) $(PYTEST_ARGS); alone=$$?; \
	[ $$alone = 5 ] && alone=0; exit $$(( parallel || alone ))

bench: $(STAMP)
	$(VENV)/bin/python -m bench

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=long $(VENV)/bin/python -m pytest -q tests -m fuzz

lint: $(STAMP) typecheck
	$(VENV)/bin/ruff check toolkit widgets tests bench
	$(VENV)/bin/ruff format --check toolkit widgets tests bench

# mypy over a copy laid out as the import name (toolkit/ is mpmd_lab, widgets/ is
# mpmd_lab.widgets); the paths it prints are mapped back to the source tree
TYPECHECK := build/typecheck
typecheck: $(STAMP)
	@rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)
	@cp -r toolkit $(TYPECHECK)/mpmd_lab && cp -r widgets $(TYPECHECK)/mpmd_lab/widgets
	@cd $(TYPECHECK) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml \
		--python-executable $(CURDIR)/$(VENV)/bin/python --cache-dir .mypy_cache -p mpmd_lab \
		| sed -e 's|^mpmd_lab/widgets/|widgets/|' -e 's|^mpmd_lab/|toolkit/|'; \
		exit $${PIPESTATUS[0]}

format: $(STAMP)
	$(VENV)/bin/ruff format toolkit widgets tests bench
	$(VENV)/bin/ruff check --fix toolkit widgets tests bench

clean:
	rm -rf $(VENV) test-artifacts

# point README's Binder badge at the GitHub copy `origin` names (or OWNER=name)
binder-badge:
	python3 binder/badge.py $(OWNER)
