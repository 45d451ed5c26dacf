# The course's front door. `make course` runs everything; `make test` is what CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
ENV_STAMP := $(VENV)/.installed
BUILD := build
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
EXECUTED := $(patsubst notebooks/%,$(BUILD)/notebooks/%,$(NOTEBOOKS))
# PROFILE=smoke|cpu|gpu picks the run size; empty lets each notebook choose from the hardware.
PROFILE ?=

export NO_ALBUMENTATIONS_UPDATE := 1
ifneq ($(PROFILE),)
export NAILSEG_PROFILE := $(PROFILE)
endif

.PHONY: help env course notebooks data export test lab bench blog browser clean distclean

help:  ## list the targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

env: $(ENV_STAMP)  ## create the virtual environment (idempotent)

# Rebuilt only when the pins change; a second run costs nothing. uv (pinned, installed with
# pip) installs the stack in parallel from its cache, compiled to bytecode as pip does (with
# PYTHONDONTWRITEBYTECODE set, nothing else would compile it, and every import would
# recompile): 38 s against pip's 187 s on 2 cores, both caches filled (lab/make_course).
# Where uv cannot be had, pip installs the same pins.
UV_VERSION := 0.13.8
$(ENV_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@if $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION); then \
	  $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e '.[dev]'; \
	else \
	  echo "uv $(UV_VERSION) could not be installed: pip installs the environment (a few minutes)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'; \
	fi
	@touch $@

course: env data notebooks blog  ## the main job: environment, data, every notebook executed here, the site rendered

data: env  ## generate the synthetic set (or check NAILSEG_DATA_ROOT) and prepare CSVs and npy
	$(PY) -m nailseg_common.commands.prepare

notebooks: $(EXECUTED)  ## execute every notebook headlessly into build/notebooks

$(BUILD)/notebooks/%.ipynb: notebooks/%.ipynb $(ENV_STAMP)
	@mkdir -p $(@D) $(BUILD)/partial
	$(VENV)/bin/papermill --kernel python3 --cwd notebooks --progress-bar $< $(BUILD)/partial/$(@F)
	@mv $(BUILD)/partial/$(@F) $@

# The published edition: the notebooks as executed on an H200 (gpu profile), committed in published/.
# `make blog BLOG_FROM=build/notebooks` renders your own run instead.
# BLOG_THEME is the Jekyll theme the posts are for (minima, fastpages, minimal-mistakes: their
# post layout and the front matter it reads; docs/posts.md); BLOG_LAYOUT another layout.
# BLOG_REPO_URL is the repository each post links to: by default the git remote `origin`, when
# it is a web address (a clone of a local folder links to none).
BLOG_FROM ?= $(if $(wildcard published/*.ipynb),published,$(BUILD)/notebooks)
BLOG_THEME ?= minima
BLOG_LAYOUT ?=
BLOG_REPO_URL ?= $(shell git remote get-url origin 2>/dev/null | sed -E 's#^git@([^:]+):#https://\1/#; s#\.git$$##' | grep -E '^https?://')
blog: env  ## render the published edition into a Jekyll site (build/blog: posts, _config.yml, index) and a static site (build/site)
	$(PY) -m tools.publishing.blog --notebooks $(BLOG_FROM) --posts $(BUILD)/blog/_posts --site $(BUILD)/site --theme $(BLOG_THEME) $(if $(BLOG_LAYOUT),--layout $(BLOG_LAYOUT)) $(if $(BLOG_REPO_URL),--repo-url $(BLOG_REPO_URL))

export: env  ## sync each notebook with its .py copy, then write the exported cells into nailseg_common
	$(VENV)/bin/jupytext --sync --quiet $(NOTEBOOKS)
	$(PY) -m tools.publishing.export

# The committed reference was made on an H200 with BENCH_OUT=results/benchmark_h200.json
# BENCH_STEPS=30: five timing windows of 30 batches (the notebooks' live runs take the
# profile's bench_repeats and bench_steps; empty BENCH_STEPS takes the profile's too).
BENCH_OUT ?= results/benchmark_local.json
BENCH_REPEATS ?= 5
BENCH_STEPS ?=
bench: env  ## benchmark every input pipeline against the bound into $(BENCH_OUT) (meant for a GPU)
	$(VENV)/bin/nailseg-bench --out $(BENCH_OUT) --repeats $(BENCH_REPEATS) $(if $(BENCH_STEPS),--steps $(BENCH_STEPS))

# --durations: the slowest tests close the log, for whoever keeps the run short. Every
# notebook runs end to end once: 02 and 06 inside tests/test_notebook_parameters.py (smoke
# profile, parameters overridden, then checked against what ran), the others as they are.
RUN_AS_THEY_ARE := $(filter-out notebooks/02_% notebooks/06_%,$(NOTEBOOKS))
test: env browser  ## unit tests and every notebook (smoke profile), as CI runs them
	NAILSEG_PROFILE=smoke $(PY) -m pytest --nbmake --nbmake-timeout=900 --durations=15 tests $(RUN_AS_THEY_ARE)

lab: env  ## JupyterLab with the course's kernel registered
	$(PY) -m ipykernel install --user --name nailseg-course --display-name "Python (nailseg course)"
	$(VENV)/bin/jupyter lab notebooks

# The blog tests open the rendered site in a real headless browser and build the posts with
# a real Jekyll and the minima theme (Debian's packages; installed when missing and running
# as root).
BROWSER_PACKAGES := chromium jekyll jekyll-theme-minima ruby-jekyll-seo-tag ruby-jekyll-feed
browser:
	@missing=$$(for pkg in $(BROWSER_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$pkg 2>/dev/null | grep -q '^install ok installed' || echo $$pkg; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  else echo "missing: run 'sudo apt-get install $$(echo $$missing)' (needed by tests/test_blog.py)"; exit 1; fi; fi

clean:  ## remove executed notebooks, posts, logs and generated data (keeps the environment)
	rm -rf $(BUILD) runs data/synthetic-* data/prepared data/.[!.]*

distclean: clean  ## also remove the virtual environment
	rm -rf $(VENV)
