# llmserve.sglang — developer and CI entry points.
#
#   make setup      install what the gates need (apt packages, .venv, .venv-importer)
#   make test       run every gate in sequence, then print one summary line per gate
#   make demo       bring the lab up, deploy on it, show the report, take the lab down
#
# One gate at a time: make lint | sanity | units | fake-sglang | docs-lint | importer | molecule | lab-tests | suite |
#                     realserver | awx-tests | compat
# `make help` lists everything. See CONTRIBUTING.md.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

# Interpreter used to create the virtual environments (3.11, the version CI uses).
# Resolved before PATH is changed below, so it is never a venv's own python.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
PYTHON_VERSION ?= 3.11

VENV ?= .venv
IMPORTER_VENV ?= .venv-importer
PY := $(VENV)/bin/python
BIN := $(abspath $(VENV))/bin
IMPORTER_BIN := $(abspath $(IMPORTER_VENV))/bin

# ansible-test, molecule and friends call ansible-* by name.
export PATH := $(BIN):$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0
export PY_COLORS ?= 0
export ANSIBLE_NOCOLOR ?= 1
export NO_COLOR ?= 1

NAMESPACE := llmserve
NAME := sglang
VERSION := $(shell sed -n 's/^version: *//p' galaxy.yml)

# Scratch space outside the checkout (ansible-test needs the collection under
# .../ansible_collections/<namespace>/<name>, as a real directory, not a symlink).
BUILD ?= /tmp/llmserve-sglang-$(shell printf %s "$(CURDIR)" | md5sum | cut -c1-10)
COLL_ROOT := $(BUILD)/collections
COLL_DIR := $(COLL_ROOT)/ansible_collections/$(NAMESPACE)/$(NAME)
LOG_DIR := $(BUILD)/logs
# Live view of the checkout for ansible-playbook/molecule (see ansible.cfg).
LINK_ROOT := $(CURDIR)/.tmp/collections
LINK_DIR := $(LINK_ROOT)/ansible_collections/$(NAMESPACE)/$(NAME)

REPORT_DIR ?= $(CURDIR)/reports
LAB_INVENTORY ?= inventories/lab
# The lab lock (one lab per machine), as tests/lab/labsession.py defines it; read only by the targets that take it.
LAB_LOCK = $(shell "$(PYTHON)" -c 'import sys; sys.path.insert(0, "$(CURDIR)/tests/lab"); import labsession; print(labsession.LOCK)')

# The gates' own packages, plus what the lab needs (tests/lab/requirements-apt.txt: one
# package a line, `#` starts a comment), each once.
APT_PACKAGES := $(sort make git tar ca-certificates python3 python3-venv openssh-server openssh-client \
	psmisc python3-yaml python-is-python3 iproute2 procps util-linux systemd dbus shellcheck \
	$(shell sed -e 's/\#.*//' tests/lab/requirements-apt.txt 2>/dev/null))

# the gates that need no lab run beside the ones that bring the lab up (tests/ci/run_gates.py)
# test files of the suite run side by side, each worker on a slot of the lab (0: one after another, no workers)
SUITE_WORKERS ?= 3
# molecule's scenarios side by side (each on its own slot of the lab: extensions/molecule/resources/inventory/slot.yml)
MOLECULE_WORKERS ?= 3
# the real-server gate's files side by side, the same way (each real start takes a core for most of a minute)
REALSERVER_WORKERS ?= 2

GATES_SIDE := lint sanity units fake-sglang docs-lint importer
GATES_LAB := molecule lab-tests suite realserver awx-tests compat
GATES := $(GATES_SIDE) $(GATES_LAB)
# the lab lane's order for make test; A+B: those gates at once, each on its own slot of one lab (tests/ci/run_gates.py)
LAB_LANE := molecule lab-tests suite realserver awx-tests+compat

# $(call need,tool[,venv-bin-dir]) -- fail with the exact command to run when a tool is missing.
define need
	@test -x "$(or $(2),$(BIN))/$(1)" || { \
	  echo "ERROR: '$(1)' is not installed in $(or $(2),$(BIN))."; \
	  echo "       Run: make setup"; exit 2; }
endef

define need_venv
	@if ! test -x "$(PY)"; then \
	  echo "ERROR: no virtual environment at $(VENV). Run: make setup"; exit 2; \
	elif ! "$(PY)" -c 'import ansible' >/dev/null 2>&1; then \
	  echo "ERROR: $(VENV) is broken ('$(PY) -c \"import ansible\"' fails)."; \
	  echo "       Run: rm -rf $(VENV) && make setup"; exit 2; \
	fi
endef

.PHONY: realserver help setup setup-base setup-apt setup-venv setup-importer setup-ansible-test setup-mirror setup-real-sglang setup-compat links tree test $(GATES) \
	lab-up lab-down lab-status demo bench gpu-check build ee-context clean

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

# ---------------------------------------------------------------- setup

setup: setup-base setup-real-sglang ## install apt packages (if missing), .venv, .venv-importer, .venv-mirror, the lab's real SGLang
	@echo "setup: done ($(VENV): $$($(PY) -c 'import ansible; print("ansible-core", ansible.__version__)'))"

setup-base: setup-apt setup-venv setup-importer setup-ansible-test setup-mirror setup-wheelhouse links ## what every gate but realserver needs

setup-apt: ## install the Debian packages the gates and the lab need, only those missing
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "setup-apt: all Debian packages present"; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "ERROR: missing Debian packages:$$missing"; \
	  echo "       Run: sudo apt-get update && sudo apt-get install -y --no-install-recommends$$missing"; exit 2; \
	fi; \
	echo "setup-apt: installing$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing

setup-venv: ## create or update .venv from requirements-dev.txt + constraints-dev.txt
	@if [ -e "$(VENV)" ] && ! "$(PY)" -c 'import sys' >/dev/null 2>&1; then \
	  echo "ERROR: $(VENV) exists but its python does not run (was it made with a removed interpreter?)."; \
	  echo "       Run: rm -rf $(VENV) && make setup"; exit 2; \
	fi
	@if [ ! -e "$(VENV)" ]; then \
	  test -n "$(PYTHON)" || { echo "ERROR: no python3.11 on PATH. Run: apt-get install -y python3 python3-venv"; exit 2; }; \
	  echo "setup-venv: creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"; \
	  "$(PYTHON)" -m venv "$(VENV)"; \
	fi
	"$(PY)" -m pip install -q --upgrade -r requirements-dev.txt -c constraints-dev.txt
	@"$(PY)" -c 'import ansible, ansiblelint, molecule, antsibull_docs, antsibull_changelog, pytest, xdist, ansible_runner, ansible_builder' || { \
	  echo "ERROR: $(VENV) is incomplete after pip install. Run: rm -rf $(VENV) && make setup"; exit 2; }

setup-importer: ## create or update .venv-importer (galaxy-importer pins its own dependencies)
	@if [ -e "$(IMPORTER_VENV)" ] && ! "$(IMPORTER_BIN)/python" -c 'import sys' >/dev/null 2>&1; then \
	  echo "ERROR: $(IMPORTER_VENV) is broken. Run: rm -rf $(IMPORTER_VENV) && make setup"; exit 2; \
	fi
	@if [ ! -e "$(IMPORTER_VENV)" ]; then \
	  echo "setup-importer: creating $(IMPORTER_VENV)"; "$(PYTHON)" -m venv "$(IMPORTER_VENV)"; \
	fi
	"$(IMPORTER_BIN)/python" -m pip install -q --upgrade -r requirements-importer.txt -c constraints-importer.txt
	@"$(IMPORTER_BIN)/python" -c 'import galaxy_importer' || { \
	  echo "ERROR: $(IMPORTER_VENV) is incomplete. Run: rm -rf $(IMPORTER_VENV) && make setup"; exit 2; }

setup-mirror: ## create or update .venv-mirror: olah, the Hugging Face mirror the lab downloads a model from
	@if [ -e .venv-mirror ] && ! .venv-mirror/bin/python -c 'import sys' >/dev/null 2>&1; then \
	  echo "ERROR: .venv-mirror is broken. Run: rm -rf .venv-mirror && make setup"; exit 2; \
	fi
	@if [ ! -e .venv-mirror ]; then echo "setup-mirror: creating .venv-mirror"; "$(PYTHON)" -m venv .venv-mirror; fi
	@.venv-mirror/bin/python -c 'import olah' >/dev/null 2>&1 || \
	  .venv-mirror/bin/python -m pip install -q --disable-pip-version-check -r requirements-mirror.txt

# The lab's wheelhouse: the router (PyPI smg) and its dependencies for the lab hosts' Python 3.11, which the router
# role installs from with --no-index --find-links (about 44 MB, downloaded once).
SMG_WHEELS := /var/lib/llmserve-lab/wheels/smg-1.13.0
setup-wheelhouse: setup-venv ## download (or reuse) the router's wheels for the lab
	@if [ -e "$(SMG_WHEELS)/.complete" ]; then echo "setup-wheelhouse: $(SMG_WHEELS) present"; exit 0; fi; \
	rm -rf "$(SMG_WHEELS)" && mkdir -p "$(SMG_WHEELS)" && \
	$(PY) -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.11 \
	  -d "$(SMG_WHEELS)" smg==1.13.0 && touch "$(SMG_WHEELS)/.complete"

# The lab's real SGLang 0.5.23 (venv, stand-in driver library, tiny model) under /var/lib/llmserve-lab:
# about 11 GB and 4 minutes the first time, reused afterwards (tests/lab/realsglang/install.py).
setup-real-sglang: ## install (or reuse) the real SGLang 0.5.23 the lab's GPU hosts run
	"$(PYTHON)" tests/lab/realsglang/install.py --python "$(PYTHON)"

# ansible-test --venv bootstraps pip with a script it downloads from outside the
# package registries; .ci/get_pip.py does the same from ensurepip + the index.
setup-ansible-test:
	$(need_venv)
	@v=$$(sed -n "s/^ *pip='\([0-9.]*\)',*$$/\1/p" "$$($(PY) -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -n 1); \
	test -n "$$v" || { echo "ERROR: cannot read the pip version ansible-test bootstraps"; exit 1; }; \
	dest="$$HOME/.ansible/test/cache/get_pip_$${v//./_}.py"; \
	if [ ! -s "$$dest" ]; then mkdir -p "$$(dirname "$$dest")" && cp .ci/get_pip.py "$$dest" && \
	  echo "setup-ansible-test: installed $$dest (pip $$v bootstrap)"; fi

links: ## (re)make .tmp/collections/ansible_collections/llmserve/sglang -> this checkout
	@mkdir -p "$(dir $(LINK_DIR))"
	@# left alone when right: a gate running beside another must never see the link missing
	@test "$$(readlink "$(LINK_DIR)" 2>/dev/null)" = "$(CURDIR)" || ln -sfn "$(CURDIR)" "$(LINK_DIR)"

# A clean copy of the checkout (files git tracks or would track) under
# $(COLL_DIR), for the tools that need the ansible_collections/ layout.
tree:
	@rm -rf "$(COLL_DIR)" && mkdir -p "$(COLL_DIR)" "$(LOG_DIR)"
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  git ls-files -z --cached --others --exclude-standard \
	    | while IFS= read -r -d '' f; do [ -e "$$f" ] && printf '%s\0' "$$f"; done \
	    | tar --null -T - -cf - | tar -C "$(COLL_DIR)" -xf -; \
	else \
	  tar --exclude='./.venv*' --exclude=./.tmp --exclude=./.ansible --exclude=./.cache \
	      --exclude=./tests/output --exclude='__pycache__' --exclude='*.tar.gz' \
	      -cf - . | tar -C "$(COLL_DIR)" -xf -; \
	fi

# ---------------------------------------------------------------- gates

# The real SGLang's install (minutes on a new machine) runs in the background while the gates before realserver run;
# realserver's own setup-real-sglang then waits for it (install.py holds a lock) and reuses what it installed.
# The gates without the lab run beside the lab's, at the lowest CPU priority (tests/ci/run_gates.py).
test: ## make setup, then every gate (the lab's in sequence, the others beside them; all run) and a summary
	@$(MAKE) setup-base
	@mkdir -p "$(LOG_DIR)"; rm -f "$(LOG_DIR)"/*.log; \
	echo "setup-real-sglang: in the background, log $(LOG_DIR)/setup-real-sglang.log"; \
	"$(PYTHON)" tests/lab/realsglang/install.py --python "$(PYTHON)" > "$(LOG_DIR)/setup-real-sglang.log" 2>&1 & \
	installing=$$!; \
	"$(PYTHON)" tests/ci/run_gates.py --log-dir "$(LOG_DIR)" --make "$(MAKE)" --side "$(GATES_SIDE)" --lab "$(LAB_LANE)"; \
	rc=$$?; \
	wait "$$installing" || true; \
	exit $$rc

lint: ## ansible-lint, production profile, no skips
	$(need_venv)
	$(call need,ansible-lint)
	@$(MAKE) links
	cd "$(CURDIR)" && ansible-lint --profile production --strict --offline
	@echo "RESULT: ansible-lint production profile clean"

sanity: tree setup-ansible-test ## ansible-test sanity (python $(PYTHON_VERSION), own venvs, no ignore files)
	$(need_venv)
	$(call need,ansible-test)
	@if ls tests/sanity/ignore-*.txt >/dev/null 2>&1; then \
	  echo "ERROR: tests/sanity/ignore-*.txt exist; this project fixes findings instead"; exit 1; fi
	@echo 'cd $(COLL_DIR) && ansible-test sanity --venv --python $(PYTHON_VERSION)'
	@cd "$(COLL_DIR)" && ansible-test sanity --venv --python $(PYTHON_VERSION) --color no 2>&1 \
	  | tee "$(LOG_DIR)/sanity.detail.log" || { \
	  echo "RESULT: sanity: $$(grep -m1 -oE 'The [0-9]+ sanity test\(s\) listed below \(out of [0-9]+\) failed' "$(LOG_DIR)/sanity.detail.log" || echo 'ansible-test failed')"; exit 1; }
	@if grep -qE '^ERROR: ' "$(LOG_DIR)/sanity.detail.log"; then echo "RESULT: sanity: errors reported"; exit 1; fi
	@echo "RESULT: sanity: $$(grep -c "^Running sanity test" "$(LOG_DIR)/sanity.detail.log") tests run, none failed"

units: tree setup-ansible-test ## ansible-test units (pytest under tests/unit/)
	$(need_venv)
	$(call need,ansible-test)
	@if ! find tests/unit -name 'test_*.py' 2>/dev/null | grep -q .; then \
	  echo "ERROR: no unit tests (tests/unit/**/test_*.py) found"; exit 1; fi
	cd "$(COLL_DIR)" && ansible-test units --venv --python $(PYTHON_VERSION) --color no --requirements

# The lab's fake SGLang (tests/lab/fake_sglang) as a subprocess on 127.0.0.1, with a fake GPU root in a temporary
# folder: no lab, no root. Its tests mostly wait on the fake's timed log lines, so they run FAKE_SGLANG_WORKERS at once.
FAKE_SGLANG_WORKERS ?= 4
fake-sglang: ## pytest tests/lab/fake_sglang/tests: the fake SGLang's command line, log, endpoints and deaths (no lab)
	$(need_venv)
	$(call need,pytest)
	@find tests/lab/fake_sglang/tests -name 'test_*.py' | grep -q . || { \
	  echo "ERROR: no tests (tests/lab/fake_sglang/tests/test_*.py) found"; exit 1; }
	"$(PY)" -m pytest tests/lab/fake_sglang/tests -p no:cacheprovider -n $(FAKE_SGLANG_WORKERS) --durations=5 $(PYTEST_ARGS)

# Only this collection (and ansible.builtin) is loaded: the ~100 collections of the `ansible` package in .venv are not
# scanned (14 s instead of 3 minutes). A reference to another collection is then reported as not allowed.
docs-lint: tree ## antsibull-docs lint-collection-docs --plugin-docs
	$(need_venv)
	$(call need,antsibull-docs)
	ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ANSIBLE_COLLECTIONS_PATH="$(COLL_ROOT)" antsibull-docs lint-collection-docs --plugin-docs \
	  --validate-collection-refs all --disallow-unknown-collection-refs "$(COLL_DIR)" \
	  || { echo "RESULT: antsibull-docs reported the findings above"; exit 1; }
	@echo "RESULT: antsibull-docs found nothing"

build: tree ## ansible-galaxy collection build -> $(BUILD)/dist
	$(need_venv)
	@rm -rf "$(BUILD)/dist" && mkdir -p "$(BUILD)/dist"
	ansible-galaxy collection build "$(COLL_DIR)" --output-path "$(BUILD)/dist" --force

importer: build ## galaxy-importer on the built tarball (no container steps)
	$(call need,python,$(IMPORTER_BIN))
	@"$(IMPORTER_BIN)/python" -c 'import galaxy_importer' 2>/dev/null || { \
	  echo "ERROR: galaxy-importer missing in $(IMPORTER_VENV). Run: make setup"; exit 2; }
	@rm -rf "$(BUILD)/importer" && mkdir -p "$(BUILD)/importer"
	cd "$(BUILD)/importer" && PATH="$(IMPORTER_BIN):$$PATH" \
	  GALAXY_IMPORTER_CONFIG="$(CURDIR)/.ci/galaxy-importer.cfg" \
	  "$(IMPORTER_BIN)/python" -m galaxy_importer.main \
	  "$(BUILD)/dist/$(NAMESPACE)-$(NAME)-$(VERSION).tar.gz" 2>&1 | tee "$(LOG_DIR)/importer.detail.log" \
	  || { echo "RESULT: galaxy-importer failed: $$(grep -m1 -E '^(ERROR|CRITICAL):' "$(LOG_DIR)/importer.detail.log" | cut -c1-200)"; exit 1; }
	@if grep -qE '^(ERROR|WARNING|CRITICAL):' "$(LOG_DIR)/importer.detail.log"; then \
	  echo "RESULT: galaxy-importer reported the findings above"; exit 1; fi
	@grep -q 'Importer processing completed successfully' "$(LOG_DIR)/importer.detail.log" || { \
	  echo "RESULT: galaxy-importer did not complete"; exit 1; }
	@echo "RESULT: galaxy-importer: no errors, no warnings"

molecule: links ## molecule test --all (scenarios under extensions/molecule/, on the lab; MOLECULE_WORKERS at once, each on its own slot of the lab)
	$(need_venv)
	$(call need,molecule)
	@ls extensions/molecule/*/molecule.yml >/dev/null 2>&1 || { echo "ERROR: no scenario under extensions/molecule/"; exit 1; }
	@test -f tests/lab/labctl.py || { echo "ERROR: tests/lab/labctl.py missing: the lab is needed by molecule"; exit 1; }
	@test -n "$(LAB_LOCK)" || { echo "ERROR: cannot read the lab lock's path (LOCK in tests/lab/labsession.py)"; exit 1; }
	@test "$$(id -u)" = 0 || { echo "ERROR: the lab needs root (network namespaces, systemd units). Run as root."; exit 2; }
	@# forget what an interrupted earlier run left in molecule's state ("instances already created")
	-@cd "$(CURDIR)" && molecule reset -s default >/dev/null 2>&1
	cd "$(CURDIR)" && ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" flock "$(LAB_LOCK)" molecule test --all --workers $(MOLECULE_WORKERS) $(MOLECULE_ARGS) \
	  || { echo "RESULT: molecule: a scenario failed (see above)"; exit 1; }
	@echo "RESULT: molecule: all scenarios passed"

lab-tests: links ## pytest tests/lab/tests (needs root)
	$(need_venv)
	$(call need,pytest)
	@test -d tests/lab/tests || { echo "ERROR: tests/lab/tests does not exist"; exit 1; }
	@test "$$(id -u)" = 0 || { echo "ERROR: the lab tests need root. Run as root."; exit 2; }
	ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" "$(PY)" -m pytest tests/lab/tests -v $(PYTEST_ARGS)

suite: links ## fault and bad-input suite: pytest tests/integration on the lab, SUITE_WORKERS test files at once, each on its own copy of the lab's hosts (root, holds the lab lock)
	$(need_venv)
	$(call need,pytest)
	@test "$$(id -u)" = 0 || { echo "ERROR: the suite needs the lab, which needs root. Run as root."; exit 2; }
	ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" "$(PY)" -m pytest $(or $(SUITE_FILES),tests/integration) -v -p no:cacheprovider \
	  -n $(SUITE_WORKERS) --dist loadfile --durations=15 $(PYTEST_ARGS)

realserver: links setup-real-sglang ## the real SGLang 0.5.23 on the lab: faults, fallback, clean-up, a two-node group; REALSERVER_WORKERS files at once (root, lab lock)
	$(need_venv)
	$(call need,pytest)
	@test "$$(id -u)" = 0 || { echo "ERROR: the real-server gate needs the lab, which needs root. Run as root."; exit 2; }
	ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" "$(PY)" -m pytest tests/realserver -v -s -p no:cacheprovider \
	  -n $(REALSERVER_WORKERS) --dist loadfile --durations=10 $(PYTEST_ARGS)

awx-tests: links ## pytest tests/awx: EE build context, survey vs argument specs, ansible-runner on the lab (root, lab lock)
	$(need_venv)
	$(call need,pytest)
	$(call need,ansible-runner)
	$(call need,ansible-builder)
	@"$(PY)" -c 'import ansible_runner' || { echo "ERROR: ansible_runner does not import in $(VENV). Run: make setup"; exit 2; }
	@test "$$(id -u)" = 0 || { echo "ERROR: the ansible-runner test needs the lab, which needs root. Run as root."; exit 2; }
	ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" "$(PY)" -m pytest tests/awx -v -p no:cacheprovider --durations=10 $(PYTEST_ARGS)

ee-context: build ## execution environment build context: .tmp/ee/context (ansible-builder create; no engine, no network)
	$(call need,ansible-builder)
	@mkdir -p .tmp/ee && rm -rf .tmp/ee/context
	cp "$(BUILD)/dist/$(NAMESPACE)-$(NAME)-$(VERSION).tar.gz" .tmp/ee/$(NAMESPACE)-$(NAME).tar.gz
	ansible-builder create -f extensions/ee/execution-environment.yml -c .tmp/ee/context --output-filename Containerfile
	@echo "RESULT: build context in .tmp/ee/context; build it with: ansible-builder build -f extensions/ee/execution-environment.yml -c .tmp/ee/context -t llmserve-sglang-ee:$(VERSION)"

# ---------------------------------------------------------------- lab and demo

lab-up: ## start the embedded lab (mock GPU hosts, Proxmox node, container)
	$(need_venv)
	@test -f tests/lab/labctl.py || { echo "ERROR: tests/lab/labctl.py missing"; exit 1; }
	"$(PY)" tests/lab/labctl.py up

lab-down: ## stop the lab and remove its state
	@test -f tests/lab/labctl.py || { echo "ERROR: tests/lab/labctl.py missing"; exit 1; }
	"$(PY)" tests/lab/labctl.py down

lab-status: ## show the lab's state
	"$(PY)" tests/lab/labctl.py status

COMPAT_VENV ?= .venv-compat
COMPAT_CORE ?= ansible-core==2.17.14

setup-compat: ## .venv-compat: the oldest ansible-core the collection supports (meta/runtime.yml), for `make compat`
	@test -x "$(COMPAT_VENV)/bin/ansible-playbook" && "$(COMPAT_VENV)/bin/python" -m pip show ansible-core 2>/dev/null \
	  | grep -qx "Version: $(patsubst ansible-core==%,%,$(COMPAT_CORE))" \
	  || { rm -rf "$(COMPAT_VENV)" && $(PYTHON) -m venv "$(COMPAT_VENV)" \
	       && "$(COMPAT_VENV)/bin/python" -m pip install -q --disable-pip-version-check "$(COMPAT_CORE)"; }

compat: links setup-compat ## the lab deploy with ansible-core 2.17 (root, lab lock): serves, then changes nothing
	$(need_venv)
	$(call need,pytest)
	@test "$$(id -u)" = 0 || { echo "ERROR: the lab needs root. Run as root."; exit 2; }
	COMPAT_ANSIBLE_BIN="$(abspath $(COMPAT_VENV))/bin" "$(PY)" -m pytest tests/compat -v -p no:cacheprovider $(PYTEST_ARGS)

demo: ## make setup, lab up, deploy on it, show the report, lab down (even on failure)
	@$(MAKE) setup
	$(call need,ansible-playbook)
	@test -f playbooks/deploy.yml || { echo "ERROR: playbooks/deploy.yml missing"; exit 1; }
	@mkdir -p "$(REPORT_DIR)"; rc=0; \
	trap '$(MAKE) lab-down' EXIT; \
	$(MAKE) lab-up; \
	ANSIBLE_COLLECTIONS_PATH="$(LINK_ROOT)" ansible-playbook playbooks/deploy.yml -i "$(LAB_INVENTORY)" \
	  -e sglang_report_dir="$(REPORT_DIR)" $(DEMO_ARGS) || rc=$$?; \
	report=$$(ls -t "$(REPORT_DIR)"/*.md 2>/dev/null | head -n 1 || true); \
	if [ -n "$$report" ]; then echo; echo "---------------- report: $$report"; cat "$$report"; \
	  echo "---------------- (JSON and SVG beside it in $(REPORT_DIR))"; \
	else echo "no Markdown report found in $(REPORT_DIR)"; fi; \
	exit $$rc

bench: ## make setup, then every performance figure with its goal (tests/bench/run.py; lab under its lock, left down)
	@$(MAKE) setup
	@test "$$(id -u)" = 0 || { echo "ERROR: make bench needs root (the lab). Run as root."; exit 2; }
	"$(PY)" tests/bench/run.py $(BENCH_ARGS)

gpu-check: ## on a host with an NVIDIA GPU + PyTorch: gpu_info and gpu_reset against it (tests/gpu/, only its own processes)
	$(need_venv)
	$(call need,ansible-playbook)
	ANSIBLE_PLAYBOOK="$(BIN)/ansible-playbook" GPU_CHECK_PYTHON="$(or $(GPU_CHECK_PYTHON),python3)" \
	  tests/gpu/gpu-check.sh $(GPU_CHECK_OUT)

clean: ## remove build outputs (not the venvs)
	rm -rf "$(BUILD)" .tmp tests/output importer_result.json
