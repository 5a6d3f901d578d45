# The fuzz build (GNU make), run by tests/fuzz/run.sh: make -f tests/fuzz/fuzz.mk SRC=. OUT=DIR
# Builds the libFuzzer harnesses with clang, the library sources each one needs with
# -fsanitize=fuzzer-no-link,address,undefined; apart from the normal build (no configure,
# no GPU code, no kernels: only the parsers and what they link).
CC = clang
SRC ?= .
OUT ?= build-fuzz
HARNESSES = bootstrap net_hello usched tune params ifname

FUZZ_CFLAGS = -g -O1 -std=c11 -Wall -Wextra -Werror -pthread -fno-sanitize-recover=all \
	-I$(SRC) -I$(SRC)/src -I$(SRC)/include -I$(OUT) -include $(OUT)/config.h -MMD -MP
LIB_SAN = -fsanitize=fuzzer-no-link,address,undefined
EXE_SAN = -fsanitize=fuzzer,address,undefined
LIBS = -lhwloc -ldl -lm

BASE = src/base/err.c src/base/log.c src/base/param.c src/base/time.c
SRCS_params = $(BASE)
SRCS_ifname = $(BASE) src/base/socket.c
SRCS_bootstrap = $(BASE) src/base/socket.c src/core/bootstrap_root.c \
	src/core/bootstrap_link.c src/core/bootstrap_ring.c src/topo/host.c
SRCS_usched = $(BASE) algorithms/usched_parse.c
SRCS_net_hello = $(BASE) transports/net/net_hello.c src/topo/topo.c
SRCS_tune = $(BASE) src/base/dtype.c src/base/plugin.c src/exec/sched.c src/topo/topo.c \
	algorithms/tune.c algorithms/tune_plugin.c algorithms/tuner.c algorithms/algo.c \
	algorithms/model.c algorithms/usched_take.c algorithms/ring.c algorithms/oneshot.c \
	algorithms/twoshot.c algorithms/tree.c algorithms/rd.c algorithms/rabenseifner.c \
	algorithms/hier.c algorithms/bruck.c algorithms/chain.c algorithms/binomial.c \
	algorithms/direct.c

obj = $(patsubst %.c,$(OUT)/obj/%.o,$(1))

all: $(foreach h,$(HARNESSES),$(OUT)/fuzz_$(h))

# Only what the sources ask of configure's config.h.
$(OUT)/config.h: $(SRC)/configure.ac
	@mkdir -p $(OUT)
	version=$$(sed -n 's/^AC_INIT(\[braid\], \[\([^]]*\)\].*/\1/p' $<) && \
	printf '#define _GNU_SOURCE 1\n#define PACKAGE_VERSION "%s"\n#define BRAID_VERSION_STRING "%s"\n' \
		"$$version" "$$version" > $@

$(OUT)/obj/%.o: $(SRC)/%.c $(OUT)/config.h
	@mkdir -p $(dir $@)
	$(CC) $(FUZZ_CFLAGS) $(LIB_SAN) -c $< -o $@

define harness_rule
$(OUT)/fuzz_$(1): $(SRC)/tests/fuzz/fuzz_$(1).c $(call obj,$(SRCS_$(1))) $(OUT)/config.h
	$(CC) $(FUZZ_CFLAGS) $(EXE_SAN) $$< $(call obj,$(SRCS_$(1))) $(LIBS) -o $$@
endef
$(foreach h,$(HARNESSES),$(eval $(call harness_rule,$(h))))

-include $(shell find $(OUT) -name '*.d' 2>/dev/null)

.PHONY: all
