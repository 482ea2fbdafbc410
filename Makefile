# specdec — build, test and benchmark.
#
#   make                    release build: build/release/specdec
#   make BUILD=debug        -O0 -g, plus the rollback check (SPECDEC_DEBUG): after every KV rollback, both models'
#                           caches are compared bit for bit with a forward over the committed tokens
#   make SANITIZE=1 ...     the same with AddressSanitizer + UndefinedBehaviorSanitizer (build/<variant>-san/)
#   make test               build and run the test suite; ends with "N passed, N failed"
#   make test-neon          cross-build the kernel and sampler tests for aarch64 and run them under qemu-user
#   make bench              the benchmark harness (bench/): tables on stdout, JSON and plots in bench/results/
#                           (build/release/run-bench alone writes build/bench/: --out)
#                           (QUICK=1: 1.5–3 minutes on 2 idle cores; BENCH_ARGS="--suite decode -m DIR ..."
#                           for run-bench options)
#   make weights            train and export the default model pair to weights/pystd (hours; resumes)
#   make fuzz               the libFuzzer targets of fuzz/ (clang-14, ASan + UBSan): build/fuzz/bin/<target>
#   make fuzz-smoke         each target for FUZZ_SECONDS (default 15) from its seed corpus fuzz/corpus/<target>
#   make test-tools         the tools' tests (tools/test_corpus.py, test_parse_rate.py, test_held_out_compare.py,
#                           test_batch_compare.py, test_drafter_counts.py, test_vs_llamacpp_table.py), and that
#                           every relative link of the Markdown files, and every file and function that README.md
#                           names, exists
#                           (tools/test_check_links.py)
#   make test-train         the training tools' tests (tools/test_pack.py; needs python3-torch)

CC       ?= cc
BUILD    ?= release
SANITIZE ?= 0

ifeq ($(BUILD),release)
  # -O3 for its loop vectoriser: the sampler's passes over the vocabulary (sampling.c) run 2–4× faster.
  OPT := -O3 -DNDEBUG
else ifeq ($(BUILD),debug)
  OPT := -O0 -DSPECDEC_DEBUG
else ifeq ($(BUILD),fuzz)
  # Set by `make fuzz` (with CC=clang-14): coverage for libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer.
  OPT := -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
  $(error BUILD must be release, debug or fuzz, not '$(BUILD)')
endif

O := build/$(BUILD)
ifeq ($(SANITIZE),1)
  O   := $(O)-san
  OPT += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif

# Libraries from Debian: xxHash (hash tables, logits fingerprints), Jansson (JSON), utf8proc (Unicode character
# classes for the tokenizer), and OpenBLAS in its single-threaded build: specdec runs sgemm on its own threads,
# each on its own columns (forward.c), where the threaded build's idle workers would spin against them.
PKGS      := jansson libxxhash libutf8proc
PKGS      += libpcre2-8  # PCRE2: runs the regular expressions that tokenizer.json files give their pre-tokenizers
PKGS      += libmicrohttpd  # GNU libmicrohttpd: the HTTP of specdec serve (src/serve/server.c)
PKGS      += libedit     # specdec chat: line editing and history on a terminal

MULTIARCH := $(shell $(CC) -print-multiarch)
BLAS_DIR  := /usr/lib/$(MULTIARCH)/openblas-serial
CFLAGS := -std=c11 -D_GNU_SOURCE -g -Wall -Wextra -Werror -MMD -MP -Isrc -Ikernels -Itests/support $(OPT) \
          $(shell pkg-config --cflags $(PKGS)) -I/usr/include/$(MULTIARCH)/openblas-serial
LDLIBS := $(shell pkg-config --libs $(PKGS)) -L$(BLAS_DIR) -Wl,-rpath,$(BLAS_DIR) -lopenblas -lpthread -lm

# Kernels: the scalar reference everywhere, plus one file per instruction set, each with its own flags.
# The ISA is chosen at start-up (kernels/dispatch.c); never -march=native.
ARCH := $(shell $(CC) -dumpmachine | cut -d- -f1)
ifeq ($(ARCH),x86_64)
  KERNEL_SRC := kernels/scalar.c kernels/dispatch.c kernels/q8.c kernels/q4.c kernels/avx2.c kernels/avx512.c \
                kernels/q8_avx2.c kernels/q8_avx512.c kernels/q4_avx2.c kernels/q4_avx512.c kernels/qk.c \
                kernels/qk_avx2.c kernels/qk_avx512.c kernels/q5_avx2.c kernels/q5_avx512.c
else ifeq ($(ARCH),aarch64)
  KERNEL_SRC := kernels/scalar.c kernels/dispatch.c kernels/q8.c kernels/q4.c kernels/neon.c kernels/q8_neon.c \
                kernels/q4_neon.c kernels/qk_neon.c kernels/qk.c kernels/q5_neon.c
else
  KERNEL_SRC := kernels/scalar.c kernels/dispatch.c kernels/q8.c kernels/q4.c kernels/qk.c
endif
$(O)/kernels/avx2.o $(O)/kernels/q8_avx2.o $(O)/kernels/q4_avx2.o $(O)/kernels/qk_avx2.o \
    $(O)/kernels/q5_avx2.o: CFLAGS += -mavx2 -mfma -mf16c
$(O)/kernels/avx512.o $(O)/kernels/q8_avx512.o $(O)/kernels/q4_avx512.o $(O)/kernels/qk_avx512.o \
    $(O)/kernels/q5_avx512.o: CFLAGS += \
    -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c

# The source tree draws the architecture: src/base (errors, clock, threads, UTF-8, huge pages), src/checkpoint
# (safetensors, config.json), src/model (the forward pass and its KV cache), src/tokenizer, src/grammar (GBNF
# grammars and their recogniser), src/speculative (sampling, the scheduler and its drafters), src/serve (the
# OpenAI-compatible server), src/cli (the specdec command). Everything but the CLI is the library that tests and
# bench link; tests/support holds code for tests and the bench only (harness, random checkpoints), never linked into
# specdec.
LIB_SRC   := $(wildcard src/base/*.c src/checkpoint/*.c src/model/*.c src/tokenizer/*.c src/speculative/*.c \
                        src/serve/*.c src/chat/*.c src/grammar/*.c) \
             $(KERNEL_SRC)
LIB_OBJ   := $(LIB_SRC:%.c=$(O)/%.o)
CLI_SRC   := $(wildcard src/cli/*.c)
CLI_OBJ   := $(CLI_SRC:%.c=$(O)/%.o)
CLI_PARTS := $(filter-out $(O)/src/cli/main.o,$(CLI_OBJ))  # what the CLI tests link besides the binary
SUPPORT_SRC := $(wildcard tests/support/*.c)
SUPPORT_OBJ := $(SUPPORT_SRC:%.c=$(O)/%.o)
TEST_SRC  := $(wildcard tests/*/test_*.c)
TEST_OBJ  := $(TEST_SRC:%.c=$(O)/%.o) $(SUPPORT_OBJ)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_OBJ := $(BENCH_SRC:%.c=$(O)/%.o) $(O)/tests/support/random_checkpoint.o $(O)/tests/support/divergence.o

.PHONY: all test test-neon bench clean
all: $(O)/specdec

# specdec --version: VERSION, and `git describe` of the checkout it was built from when git can tell. The string
# is kept in $(O)/version, rewritten only when it changes, so that main.o is rebuilt just then.
VERSION  := 0.1
DESCRIBE := $(shell git describe --always --dirty 2>/dev/null)
VERSION_STRING := $(VERSION)$(if $(DESCRIBE), ($(DESCRIBE)))
$(shell mkdir -p $(O) && { [ "$$(cat $(O)/version 2>/dev/null)" = '$(VERSION_STRING)' ] || \
                           echo '$(VERSION_STRING)' > $(O)/version; })
$(O)/src/cli/main.o: $(O)/version
$(O)/src/cli/main.o: CFLAGS += -DSPECDEC_VERSION='"$(VERSION_STRING)"'
# run-bench labels its figures with the same `git describe` ("-dirty": built with uncommitted changes), the commit
# its code came from, whatever folder it later runs in.
$(O)/bench/report.o: $(O)/version
$(O)/bench/report.o: CFLAGS += -DSPECDEC_COMMIT='"$(DESCRIBE)"'

$(O)/specdec: $(CLI_OBJ) $(LIB_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(O)/run-tests: $(TEST_OBJ) $(CLI_PARTS) $(LIB_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(O)/run-bench: $(BENCH_OBJ) $(LIB_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The page that specdec serve answers GET / with is built into web.o by the assembler's .incbin (src/serve/web.h),
# which the compiler's dependency lists do not name.
$(O)/src/serve/web.o: $(wildcard src/serve/web/*)

$(O)/%.o: %.c Makefile  # flags live here: editing them rebuilds
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c -o $@ $<

test: $(O)/specdec $(O)/run-tests $(O)/run-bench  # run-bench too, so that a change that breaks it fails here
	SPECDEC_BIN=$(O)/specdec $(O)/run-tests $(T)

# The shipped pair (all suites), then the runtime's yardsticks: random GPT-2-small (12 × 768, V = 50257) in F32
# and BF16, random Llama-3.2-1B and Qwen2.5-0.5B in BF16, GPT-2-small and Llama-3.2-1B quantized to q8, and
# Llama-3.2-1B in BF16 arithmetic (--quant bf16, on a CPU with AVX512_BF16; skipped elsewhere) — decode speed,
# fraction of the bandwidth, verification cost, load time and peak memory, and in q8 1, 2, 4, 8 sequences decoding
# at once in one batch (the batch suite: the memory-bound yardstick of many clients) — in
# bench/results/<shape>[-q8|-bf16]/,
# then q8 against BF16 in one run (the quant suite: speed ratio, load time) in bench/results/gpt2-small-q8-vs-bf16/,
# and Llama-3.2-1B as stored (BF16), in q8 and in q4, in one run (decode alternating: q4's tokens/s over q8's, from
# 1.3 GB and 0.8 GB of weights; top-1 and KL of each against BF16) in bench/results/llama-3.2-1b-quant/.
YARDSTICKS      := gpt2-small-f32 gpt2-small-bf16 llama-3.2-1b qwen2.5-0.5b
YARDSTICKS_Q8   := gpt2-small llama-3.2-1b
YARDSTICKS_BF16 := llama-3.2-1b
bench: $(O)/specdec $(O)/run-bench
	$(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) --out bench/results $(BENCH_ARGS)
	for shape in $(YARDSTICKS); do \
	    $(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) -s limit,decode --no-plots -m random:$$shape \
	        --out bench/results/$$shape || exit 1; \
	done
	for shape in $(YARDSTICKS_Q8); do \
	    $(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) -s limit,decode,batch --no-plots -m random:$$shape \
	        --quant q8 --out bench/results/$$shape-q8 || exit 1; \
	done
	for shape in $(YARDSTICKS_BF16); do \
	    $(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) -s limit,decode --no-plots -m random:$$shape --quant bf16 \
	        --out bench/results/$$shape-bf16 || echo "run-bench --quant bf16: skipped (it needs AVX512_BF16)"; \
	done
	$(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) -s quant --prompts 6 --no-plots -m random:gpt2-small-bf16 \
	    --out bench/results/gpt2-small-q8-vs-bf16
	$(O)/run-bench $(if $(filter 1,$(QUICK)),--quick) -s quant --prompts 2 --no-plots -m random:llama-3.2-1b \
	    --out bench/results/llama-3.2-1b-quant

# NEON: the kernels and their tests, and the sampler's (its passes over a row are vectorised with the compilers'
# vector extensions), alone (no OpenBLAS, Jansson or xxHash needed), static, under qemu-user.
NEON_CC  := aarch64-linux-gnu-gcc
NEON_BIN := build/aarch64/test_kernels
NEON_SAMPLER := src/speculative/sampling.c src/base/error.c src/base/utf8.c tests/support/sampling_reference.c \
                tests/speculative/test_sampling.c
$(NEON_BIN): kernels/*.c kernels/*.h tests/support/harness.c tests/support/harness.h tests/kernels/* $(NEON_SAMPLER)
	@mkdir -p $(@D)
	$(NEON_CC) -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -Ikernels -Isrc -Itests/support -static -o $@ \
	    kernels/scalar.c kernels/dispatch.c kernels/q8.c kernels/q4.c kernels/qk.c kernels/neon.c kernels/q8_neon.c \
	    kernels/q4_neon.c kernels/qk_neon.c kernels/q5_neon.c tests/support/harness.c tests/kernels/test_kernels.c \
	    tests/kernels/test_q8.c tests/kernels/test_q4.c tests/kernels/test_q8_0.c tests/kernels/test_q5.c \
	    tests/kernels/test_qk.c $(NEON_SAMPLER) -lpthread -lm
test-neon: $(NEON_BIN)
	qemu-aarch64 $(NEON_BIN)

# The default model pair: tools/make_weights.sh runs corpus → tokenizer → target → pack → draft → evaluate → export.
.PHONY: weights test-tools test-train
weights: $(O)/specdec
	tools/make_weights.sh
# The corpus tool's licence checks, deduplication and split, parse_rate.py's judgement of continuations,
# held_out_compare.py's table, batch_compare.py's reading of batch's stderr and its table, drafter_counts.py's
# pricing and tables and vs_llamacpp_table.py's placements and table, on made-up inputs (Python 3 only, no network,
# no model; the last compiles and runs placement_probe.c); then the link checker on made-up Markdown and on the project's (README.md, docs/, and the READMEs of weights/,
# fuzz/ and tests/fixtures/): every relative link must resolve, and the files that README.md and docs/ name in code,
# and the functions README.md names, must exist.
test-tools:
	/usr/bin/python3 tools/test_corpus.py
	/usr/bin/python3 tools/test_parse_rate.py
	/usr/bin/python3 tools/test_held_out_compare.py
	/usr/bin/python3 tools/test_batch_compare.py
	/usr/bin/python3 tools/test_drafter_counts.py
	/usr/bin/python3 tools/test_vs_llamacpp_table.py
	/usr/bin/python3 tools/test_check_links.py
# pack.py's sample of files and its teacher (bit for bit the F32 one under autocast), on made-up models and streams:
# Debian's python3-torch, which make weights needs too (CI does not install it).
test-train:
	/usr/bin/python3 tools/test_pack.py

# Fuzzing (fuzz/README.md): one libFuzzer target per parser, linked with the parsers' part of the library built for
# it in build/fuzz/ (not the kernels: clang with ASan takes minutes over the AVX-512 file, and no parser uses them —
# but kernels/qk.c, GGUF's blocks dequantized, which the checkpoint readers call).
FUZZ_CC      := clang-14
FUZZ_TARGETS := $(basename $(notdir $(wildcard fuzz/*.c)))
FUZZ_LIB_OBJ := $(patsubst %.c,$(O)/%.o,$(wildcard src/base/*.c src/checkpoint/*.c src/tokenizer/*.c \
                                                   src/chat/*.c src/grammar/*.c) \
                                          src/serve/request.c src/speculative/penalties.c kernels/qk.c)
FUZZ_SECONDS ?= 15
.PHONY: fuzz fuzz-targets fuzz-smoke
fuzz:
	$(MAKE) BUILD=fuzz CC=$(FUZZ_CC) fuzz-targets
fuzz-targets: $(FUZZ_TARGETS:%=$(O)/bin/%)
$(O)/bin/%: $(O)/fuzz/%.o $(FUZZ_LIB_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
.SECONDARY: $(FUZZ_TARGETS:%=$(O)/fuzz/%.o)  # keep the objects: make would delete them as intermediate
$(O)/fuzz/%.o: CFLAGS += -DFUZZ_SHIPPED_TOKENIZER='"$(CURDIR)/weights/pystd/target"'
fuzz-smoke: fuzz
	fuzz/smoke.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
