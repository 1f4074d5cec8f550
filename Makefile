# hetpipe - one non-recursive Makefile.
#
#   make                    build everything this machine can (prints the features found)
#   make check              build and run the unit tests and the fast local bats files (tests/README.md;
#                           check-slurm, check-long, check-san, check-all: the other tiers); one summary line
#   make install            install under $(DESTDIR)$(PREFIX) (config into $(DESTDIR)$(SYSCONFDIR),
#                           the SPANK plugin into $(DESTDIR)$(SLURM_PLUGINDIR)); make uninstall
#   make format             clang-format every C/CUDA source
#   make HP_CUDA=0|1|auto   CUDA backend off / required / when nvcc is found (default): the module
#                           hetpipe-cuda.so, which the programs load on demand (they link no
#                           CUDA library; runtime/backend_module.h); installed in $(LIBDIR)/hetpipe
#   make SANITIZER=address|undefined
#   make CFLAGS=...         extra compiler flags (added to the project's own)

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
DATADIR    ?= $(PREFIX)/share/hetpipe
MANDIR     ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc/hetpipe
# Where Slurm loads plugins from: the directory of its auth_munge.so (Debian:
# /usr/lib/<triplet>/slurm-wlm), else $(LIBDIR)/slurm. spank_hetpipe.so is installed there.
SLURM_PLUGINDIR ?= $(patsubst %/,%,$(or $(dir $(firstword $(wildcard \
    /usr/lib/*/slurm-wlm/auth_munge.so /usr/lib64/slurm/auth_munge.so \
    /usr/lib/slurm/auth_munge.so))),$(LIBDIR)/slurm))
DESTDIR    ?=
BUILD      ?= build

HP_CUDA    ?= auto
CUDA_HOME  ?= /usr/local/cuda
NVCC       ?= $(shell command -v nvcc 2>/dev/null || { test -x $(CUDA_HOME)/bin/nvcc && echo $(CUDA_HOME)/bin/nvcc; })
# Real GPU architectures to build, plus PTX for the newest (CUDA 13 targets sm_75 and up).
CUDA_ARCHS ?= 75 80 86 89 90

CC         ?= cc
SANITIZER  ?=
WERROR     ?= $(if $(filter true,$(CI)),-Werror,)

ifeq ($(HP_CUDA),auto)
  HAVE_CUDA := $(if $(NVCC),1,0)
else ifeq ($(HP_CUDA),1)
  HAVE_CUDA := 1
  ifeq ($(NVCC),)
    $(error HP_CUDA=1 but nvcc was not found (set NVCC= or CUDA_HOME=))
  endif
else ifeq ($(HP_CUDA),0)
  HAVE_CUDA := 0
else
  $(error HP_CUDA must be auto, 0 or 1, not '$(HP_CUDA)')
endif

ifneq ($(SANITIZER),)
  ifeq ($(filter $(SANITIZER),address undefined),)
    $(error SANITIZER must be address or undefined, not '$(SANITIZER)')
  endif
  SANFLAGS := -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

OPENBLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
OPENBLAS_LIBS   := $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)
UCX_CFLAGS      := $(shell pkg-config --cflags ucx 2>/dev/null)
UCX_LIBS        := $(or $(shell pkg-config --libs ucx 2>/dev/null),-lucp -lucs)
PMIX_CFLAGS     := $(shell pkg-config --cflags pmix 2>/dev/null)
PMIX_LIBS       := $(or $(shell pkg-config --libs pmix 2>/dev/null),-lpmix)
IMAGE_CFLAGS    := $(shell pkg-config --cflags libpng libturbojpeg 2>/dev/null)
IMAGE_LIBS      := $(or $(shell pkg-config --libs libpng libturbojpeg 2>/dev/null),-lpng16 -lturbojpeg)
# libslurm (no pkg-config file in Debian): typed-GPU discovery for hetpipe launch
HP_SLURM   ?= $(if $(wildcard /usr/include/slurm/slurm.h),1,0)
SLURM_LIBS := $(if $(filter 1,$(HP_SLURM)),-lslurm,)
CHECK_CFLAGS    := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS      := $(or $(shell pkg-config --libs check 2>/dev/null),-lcheck -lsubunit -lm -lrt -lpthread)

WARN      := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -O3 -g -fPIC $(WARN) $(WERROR) $(SANFLAGS) \
               -DHP_HAVE_CUDA=$(HAVE_CUDA) -DHP_HAVE_SLURM=$(HP_SLURM) -DHP_DATADIR='"$(DATADIR)"' \
               -DHP_SYSCONFDIR='"$(SYSCONFDIR)"' -DHP_LIBDIR='"$(LIBDIR)"' -MMD -MP
HP_LDFLAGS := $(SANFLAGS)

# Three layers that point one way (ARCHITECTURE.md): common/ (libc and iniparser only) below
# runtime/ (the ranks) and launcher/ (the hetpipe command, which may run runtime code in
# process). Each layer is compiled with only its own and lower layers' include directories,
# so an include that points up does not build; tests/arch/layering.py checks the rest. The launcher
# gets neither UCX's nor PMIx's headers: it reaches them only through hetpipe-rank --self-check.
COMMON_INC   := -Icommon
RUNTIME_INC  := -Icommon -Iruntime $(OPENBLAS_CFLAGS) $(UCX_CFLAGS) $(PMIX_CFLAGS)
RUNTIME_INC  += $(IMAGE_CFLAGS)
LAUNCHER_INC := -Icommon -Iruntime -Ilauncher
$(BUILD)/common/%.o:   LAYER_INC = $(COMMON_INC)
$(BUILD)/runtime/%.o:  LAYER_INC = $(RUNTIME_INC)
$(BUILD)/launcher/%.o: LAYER_INC = $(LAUNCHER_INC)
$(BUILD)/tests/%.o:    LAYER_INC = $(RUNTIME_INC) -Ilauncher
HP_CFLAGS = $(BASE_CFLAGS) $(LAYER_INC)

# The runtime's libraries in two parts: what its compute modules need (backends, nets, data,
# training: also in hetpipe, which runs them in process) and what only a rank needs (comm.c:
# UCX, bootstrap.c: PMIx). hetpipe links no UCX or PMIx: were comm.o or bootstrap.o pulled
# into it, its link would fail. No CUDA library is linked: hetpipe-cuda.so is dlopen()ed.
COMMON_LIBS   := -liniparser -lz -lm
COMPUTE_LIBS  := $(OPENBLAS_LIBS) -lpthread -ldl
COMPUTE_LIBS  += $(IMAGE_LIBS)
COMPUTE_LIBS  += -larchive
RANK_LIBS     := $(UCX_LIBS) $(PMIX_LIBS)
LAUNCHER_LIBS := $(SLURM_LIBS)

# libc only: what the SPANK plugin links (it runs inside slurmstepd)
COMMON_LIBC_SRCS := common/error.c common/parse.c common/options.c common/binding.c common/infile.c
COMMON_SRCS   := $(COMMON_LIBC_SRCS) common/log.c common/cli.c common/ini.c common/gpudb.c common/layers.c \
                 common/paths.c common/model.c common/cluster.c common/plan.c common/planfile.c \
                 common/output.c common/process.c common/tlpart.c common/ckptfile.c common/ckptlock.c
RUNTIME_SRCS  := runtime/backend.c runtime/backend_module.c runtime/backend_cpu.c runtime/net.c \
                 runtime/data.c runtime/train.c runtime/comm.c runtime/bootstrap.c runtime/allreduce.c \
                 runtime/worker.c runtime/schedule.c runtime/stash.c runtime/wsp.c runtime/vwsync.c runtime/dp.c \
                 runtime/link.c runtime/feed.c runtime/jobpoint.c runtime/pause.c runtime/evaluate.c \
                 runtime/emulate.c runtime/report.c runtime/ps.c runtime/ps_store.c \
                 runtime/ps_shard.c runtime/ps_client.c runtime/ckpt.c runtime/timeline.c \
                 runtime/lrsched.c
RUNTIME_SRCS  += runtime/image.c
RUNTIME_SRCS  += runtime/source.c runtime/source_idx.c runtime/source_folder.c runtime/source_shards.c \
                 runtime/text.c
LAUNCHER_LIB_SRCS := launcher/cost.c launcher/partition.c launcher/planner.c launcher/profile.c \
                 launcher/slurm.c launcher/planjob.c launcher/layout.c launcher/rundir.c \
                 launcher/proc.c launcher/tlmerge.c launcher/svg.c launcher/jobdata.c \
                 launcher/reportfig.c launcher/jobreport.c launcher/outcome.c
CUDA_SRCS    := $(wildcard runtime/*.cu)

# The CUDA backend module: runtime/backend_cuda*.cu (backend_cuda_module.cu is its entry
# point), one shared object that exports only what runtime/backend_cuda.map names and needs
# nothing from the program that loads it (--no-undefined).
ifeq ($(HAVE_CUDA),1)
  CUDA_LIBDIR := $(CUDA_HOME)/lib64
  NVCCFLAGS   := -O2 -std=c++17 -Xcompiler -fPIC,-Wall -Icommon -Iruntime -I$(CUDA_HOME)/include \
                 $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
                 -gencode arch=compute_$(lastword $(CUDA_ARCHS)),code=compute_$(lastword $(CUDA_ARCHS)) \
                 -DHP_HAVE_CUDA=1 -MMD -MP
  CUDA_OBJS   := $(CUDA_SRCS:%.cu=$(BUILD)/%.o)
  CUDA_MODULE := $(BUILD)/hetpipe-cuda.so
  CUDA_MODULE_LIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudnn -lcublas -lcudart -lstdc++ -lm
else
  CUDA_OBJS   :=
  CUDA_MODULE :=
endif

COMMON_LIB   := $(BUILD)/libhp_common.a
RUNTIME_LIB  := $(BUILD)/libhp_runtime.a
LAUNCHER_LIB := $(BUILD)/libhp_launcher.a
COMMON_OBJS  := $(COMMON_SRCS:%.c=$(BUILD)/%.o)
RUNTIME_OBJS := $(RUNTIME_SRCS:%.c=$(BUILD)/%.o)
LAUNCHER_LIB_OBJS := $(LAUNCHER_LIB_SRCS:%.c=$(BUILD)/%.o)
LIB_OBJS := $(COMMON_OBJS) $(RUNTIME_OBJS) $(LAUNCHER_LIB_OBJS)
# link lines: a program of a layer links that layer's archive and those below; hetpipe
# without the rank-only libraries; the tests and benchmarks with everything
RANK_LINK  = $(RUNTIME_LIB) $(COMMON_LIB) $(RANK_LIBS) $(COMPUTE_LIBS) $(COMMON_LIBS)
HETPIPE_LINK = $(LAUNCHER_LIB) $(RUNTIME_LIB) $(COMMON_LIB) $(LAUNCHER_LIBS) $(COMPUTE_LIBS) \
               $(COMMON_LIBS)
ALL_LINK   = $(LAUNCHER_LIB) $(RUNTIME_LIB) $(COMMON_LIB) $(LAUNCHER_LIBS) $(RANK_LIBS) \
             $(COMPUTE_LIBS) $(COMMON_LIBS)
ALL_ARCHIVES := $(LAUNCHER_LIB) $(RUNTIME_LIB) $(COMMON_LIB)

LAUNCHER_SRCS := launcher/main.c $(wildcard launcher/cmd_*.c)
# the CPU backend's elementwise loops (vexpf's clamps, the lane maxima, AdamW's sqrtf) vectorise
# only when a comparison may ignore floating-point exception flags and sqrtf need not set errno
# (neither is read)
$(BUILD)/runtime/backend_cpu.o: BASE_CFLAGS += -fno-trapping-math -fno-math-errno
# hetpipe doctor names the installed plugin in the plugstack.conf line it suggests
$(BUILD)/launcher/cmd_doctor.o: BASE_CFLAGS += -DHP_SLURM_PLUGINDIR='"$(SLURM_PLUGINDIR)"'
HETPIPE       := $(BUILD)/hetpipe
HETPIPE_RANK  := $(BUILD)/hetpipe-rank

UNIT_SRCS  := $(wildcard tests/unit/*.c)
UNIT_TESTS := $(BUILD)/tests/unit_tests
GPU_CHECK  := $(BUILD)/tests/gpu_check_ops
BENCH_CPU  := $(BUILD)/tests/bench_train_cpu
TORCH_REF  := $(BUILD)/tests/torch_ref
GPT_REF    := $(BUILD)/tests/gpt_ref
BENCH_PLANS := $(BUILD)/tests/bench_plans
BOOT_CHECK := $(BUILD)/tests/boot_check

ALL_OBJS := $(LIB_OBJS) $(LAUNCHER_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/runtime/rank.o $(UNIT_SRCS:%.c=$(BUILD)/%.o) \
            $(BUILD)/tests/gpu/check_ops.o $(BUILD)/tests/bench/train_cpu.o \
            $(BUILD)/tests/bench/torch_ref.o $(BUILD)/tests/bench/gpt_ref.o $(BUILD)/tests/bench/plans.o $(BUILD)/tests/slurm/boot_check.o

.PHONY: all check check-slurm check-long check-san check-all install uninstall format clean features \
        bench gpu-check
all: features $(HETPIPE) $(HETPIPE_RANK) $(CUDA_MODULE) $(UNIT_TESTS) $(GPU_CHECK) $(BENCH_CPU) $(TORCH_REF) $(GPT_REF) $(BENCH_PLANS) $(BOOT_CHECK)

features:
	@echo "hetpipe: features: cpu backend (OpenBLAS): yes"
	@echo "hetpipe: features: cuda backend (cuBLAS, cuDNN): $(if $(filter 1,$(HAVE_CUDA)),yes ($(CUDA_MODULE), loaded on demand; $(NVCC); sm_$(CUDA_ARCHS)),no (HP_CUDA=$(HP_CUDA)$(if $(NVCC),, and nvcc not found)))"
	@echo "hetpipe: features: sanitizer: $(or $(SANITIZER),none)"
	@echo "hetpipe: features: Slurm discovery (libslurm): $(if $(filter 1,$(HP_SLURM)),yes,no (/usr/include/slurm/slurm.h not found: install libslurm-dev))"
	@echo "hetpipe: features: SPANK plugin: $(if $(filter 1,$(HAVE_SPANK)),yes ($(SPANK_H)),no ($(SPANK_HEADER) not found: install libslurm-dev))"

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(HP_CFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(COMMON_LIB): $(COMMON_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^
$(RUNTIME_LIB): $(RUNTIME_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^
$(LAUNCHER_LIB): $(LAUNCHER_LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

# the launcher: no UCX, no PMIx, no CUDA library (ldd; tests/arch/layering.py)
$(HETPIPE): $(LAUNCHER_SRCS:%.c=$(BUILD)/%.o) $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(HETPIPE_LINK)

# the rank program: the runtime and common layers only (no planner, no libslurm, no CUDA)
$(HETPIPE_RANK): $(BUILD)/runtime/rank.o $(RUNTIME_LIB) $(COMMON_LIB)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(RANK_LINK)

# the CUDA backend module (not under the sanitizer: nvcc's objects are not instrumented)
$(CUDA_MODULE): $(CUDA_OBJS) runtime/backend_cuda.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=runtime/backend_cuda.map -Wl,--no-undefined \
	    -o $@ $(CUDA_OBJS) $(CUDA_MODULE_LIBS)

# The unit tests count allocations (tests/unit/util.c) by wrapping the allocator.
WRAP_ALLOC := $(foreach f,malloc calloc realloc posix_memalign,-Wl,--wrap=$(f))
$(UNIT_TESTS): $(UNIT_SRCS:%.c=$(BUILD)/%.o) $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) $(WRAP_ALLOC) -o $@ $(filter %.o,$^) $(CHECK_LIBS) $(ALL_LINK)

$(BUILD)/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(HP_CFLAGS) $(CHECK_CFLAGS) $(CFLAGS) -c $< -o $@

$(GPU_CHECK): $(BUILD)/tests/gpu/check_ops.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

$(BENCH_CPU): $(BUILD)/tests/bench/train_cpu.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

$(TORCH_REF): $(BUILD)/tests/bench/torch_ref.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

$(GPT_REF): $(BUILD)/tests/bench/gpt_ref.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

$(BENCH_PLANS): $(BUILD)/tests/bench/plans.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# Activation transfer bandwidth against ucx_perftest: run by hand (sh tests/bench/transfer).
BENCH_COMM_BW := $(BUILD)/tests/bench_comm_bw
ALL_OBJS += $(BUILD)/tests/bench/comm_bw.o
all: $(BENCH_COMM_BW)
$(BENCH_COMM_BW): $(BUILD)/tests/bench/comm_bw.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# The inputs of the learning comparison with PyTorch (sh tests/bench/gpt_learn/run).
GPT_LEARN := $(BUILD)/tests/gpt_learn
ALL_OBJS += $(BUILD)/tests/bench/gpt_learn.o
all: $(GPT_LEARN)
$(GPT_LEARN): $(BUILD)/tests/bench/gpt_learn.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# Checkpoint write and load cost (sh tests/bench/checkpoint).
BENCH_CKPT := $(BUILD)/tests/bench_ckpt_cost
ALL_OBJS += $(BUILD)/tests/bench/ckpt_cost.o
all: $(BENCH_CKPT)
$(BENCH_CKPT): $(BUILD)/tests/bench/ckpt_cost.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# A GPT training step against PyTorch, one thread: speed and memory (sh tests/bench/gpt_cpu/run).
BENCH_GPT_CPU := $(BUILD)/tests/bench_gpt_cpu
ALL_OBJS += $(BUILD)/tests/bench/gpt_cpu.o
all: $(BENCH_GPT_CPU)
$(BENCH_GPT_CPU): $(BUILD)/tests/bench/gpt_cpu.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# The memory model against memory really used, per stage (sh tests/bench/memory).
BENCH_STAGE_MEM := $(BUILD)/tests/bench_stage_mem
ALL_OBJS += $(BUILD)/tests/bench/stage_mem.o
all: $(BENCH_STAGE_MEM)
$(BENCH_STAGE_MEM): $(BUILD)/tests/bench/stage_mem.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

$(BOOT_CHECK): $(BUILD)/tests/slurm/boot_check.o $(ALL_ARCHIVES)
	$(CC) $(HP_LDFLAGS) $(LDFLAGS) -o $@ $(filter %.o,$^) $(ALL_LINK)

# ---- SPANK plugin -------------------------------------------------------------------------
# spank_hetpipe.so, built where Slurm's spank.h is installed: spank/spank_hetpipe.c and the
# libc-only modules of common/ (COMMON_LIBC_SRCS) only, compiled apart (hidden visibility, no sanitizer: the
# plugin is dlopen()ed by sbatch, srun and slurmstepd), exporting only what
# spank/spank_hetpipe.map names. Not linked with -lslurm: the host process provides spank_*.
SPANK_HEADER := /usr/include/slurm/spank.h
SPANK_H      := $(wildcard $(SPANK_HEADER))
HAVE_SPANK   := $(if $(SPANK_H),1,0)
SPANK_SO     := $(BUILD)/spank_hetpipe.so
SPANK_OBJS   := $(BUILD)/spank/spank_hetpipe.o $(COMMON_LIBC_SRCS:common/%.c=$(BUILD)/spank/%.o)
SPANK_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -fvisibility=hidden $(WARN) $(WERROR) -Icommon \
                -DHP_DATADIR='"$(DATADIR)"' -DHP_SYSCONFDIR='"$(SYSCONFDIR)"' -MMD -MP
ifeq ($(HAVE_SPANK),1)
  all: $(SPANK_SO)
  ALL_OBJS += $(SPANK_OBJS)
endif
$(BUILD)/spank/spank_hetpipe.o: spank/spank_hetpipe.c
	@mkdir -p $(dir $@)
	$(CC) $(SPANK_CFLAGS) $(CFLAGS) -c $< -o $@
$(BUILD)/spank/%.o: common/%.c
	@mkdir -p $(dir $@)
	$(CC) $(SPANK_CFLAGS) $(CFLAGS) -c $< -o $@
$(SPANK_SO): $(SPANK_OBJS) spank/spank_hetpipe.map
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=spank/spank_hetpipe.map -o $@ $(SPANK_OBJS)
# ---- end of SPANK plugin ------------------------------------------------------------------

# ---- fuzzing (tests/fuzz) ----------------------------------------------------------------
# libFuzzer harnesses, one per parser (tests/fuzz/fuzz_NAME.c; tests/fuzz/README.md). Built
# with clang into $(FUZZ_BUILD) (never $(BUILD)): the project's objects with
# -fsanitize=fuzzer-no-link, CPU only (HP_HAVE_CUDA=0, HP_HAVE_SLURM=0), under ASan and UBSan.
#   make fuzz-build                 build every harness
#   make fuzz [FUZZ_SECONDS=60]     run each on a scratch copy of its corpus (the repository's
#                                   corpus is not changed); one line per harness; fails on a crash
FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) $(WERROR) $(FUZZ_SAN) -DHP_HAVE_CUDA=0 \
                -DHP_HAVE_SLURM=0 -DHP_DATADIR='"$(DATADIR)"' -DHP_SYSCONFDIR='"$(SYSCONFDIR)"' \
                -DHP_LIBDIR='"$(LIBDIR)"' -Icommon -Iruntime -Ilauncher $(OPENBLAS_CFLAGS) \
                $(UCX_CFLAGS) $(PMIX_CFLAGS) -MMD -MP
FUZZ_CFLAGS  += $(IMAGE_CFLAGS)
FUZZ_LIB_SRCS := $(COMMON_SRCS) $(RUNTIME_SRCS) launcher/slurm.c
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_LIB      := $(FUZZ_BUILD)/libhp_fuzz.a
FUZZ_NAMES    := siteconf model cluster plan binding address msgheader options gres manifest timeline \
                 image \
                 $(if $(filter 1,$(HAVE_SPANK)),plugstack)
FUZZ_NAMES    += tar folder tokens
FUZZ_BINS     := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
FUZZ_LINK     := $(FUZZ_LIB) $(RANK_LIBS) $(COMPUTE_LIBS) $(COMMON_LIBS)

.PHONY: fuzz-build fuzz
fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@FUZZ_BUILD=$(FUZZ_BUILD) sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_NAMES)

$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(CFLAGS) -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(CFLAGS) $(LDFLAGS) -o $@ $< $(FUZZ_LINK)

# the plugin's argument parsing, with stubs for the spank_* calls (tests/fuzz/fuzz_plugstack.c)
$(FUZZ_BUILD)/fuzz_plugstack: spank/spank_hetpipe.c

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_BINS:=.d)
# ---- end of fuzzing -----------------------------------------------------------------------

# Test tiers (tests/README.md): check = unit + fast (the local bats files); check-slurm, a real
# Slurm cluster on this machine; check-long, convergence and other long runs; check-san, the
# unit tests and the "# sanitizers: yes" bats files against ASan and UBSan builds (made in
# build-address and build-undefined); check-all, every tier (what CI runs). One summary line.
TEST_ENV = HETPIPE=$(abspath $(HETPIPE)) BOOT_CHECK=$(abspath $(BOOT_CHECK)) \
           UNIT_TESTS=$(abspath $(UNIT_TESTS)) MAKE="$(MAKE)"
check: all
	@$(TEST_ENV) sh tests/run.sh unit fast
check-slurm: all
	@$(TEST_ENV) sh tests/run.sh slurm
check-long: all
	@$(TEST_ENV) sh tests/run.sh long
check-san:
	@$(TEST_ENV) sh tests/run.sh san
check-all: all
	@$(TEST_ENV) sh tests/run.sh unit fast slurm long san

bench: all
	sh tests/bench/train_cpu

gpu-check: all
	sh tests/gpu/run.sh

# Everything lands under $(DESTDIR): programs, models and clusters under $(PREFIX), the CUDA
# backend module (when built) in $(LIBDIR)/hetpipe, the plugin in Slurm's plugin directory, the
# config in $(SYSCONFDIR) (an admin's edited one is never overwritten: the shipped one lands
# beside it as .new), the man pages (plain roff).
INSTALL_FILES := $(HETPIPE) $(HETPIPE_RANK) $(CUDA_MODULE) $(if $(filter 1,$(HAVE_SPANK)),$(SPANK_SO))
PLUGSTACK_LINE := required $(SLURM_PLUGINDIR)/spank_hetpipe.so config=$(SYSCONFDIR)/hetpipe.conf
install: $(INSTALL_FILES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(DATADIR)/models $(DESTDIR)$(DATADIR)/clusters \
	    $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(HETPIPE) $(DESTDIR)$(BINDIR)/hetpipe
	install -m 0755 $(HETPIPE_RANK) $(DESTDIR)$(BINDIR)/hetpipe-rank
	install -m 0644 etc/models/*.ini $(DESTDIR)$(DATADIR)/models/
	install -m 0644 etc/clusters/*.ini $(DESTDIR)$(DATADIR)/clusters/
	install -m 0644 man/hetpipe.1 $(DESTDIR)$(MANDIR)/man1/hetpipe.1
	install -m 0644 man/spank_hetpipe.8 $(DESTDIR)$(MANDIR)/man8/spank_hetpipe.8
ifeq ($(HAVE_CUDA),1)
	install -d $(DESTDIR)$(LIBDIR)/hetpipe
	install -m 0755 $(CUDA_MODULE) $(DESTDIR)$(LIBDIR)/hetpipe/hetpipe-cuda.so
endif
ifeq ($(HAVE_SPANK),1)
	install -d $(DESTDIR)$(SLURM_PLUGINDIR)
	install -m 0644 $(SPANK_SO) $(DESTDIR)$(SLURM_PLUGINDIR)/spank_hetpipe.so
endif
	@for f in $(wildcard etc/*.conf); do \
	    dst="$(DESTDIR)$(SYSCONFDIR)/$$(basename $$f)"; \
	    if [ -e "$$dst" ] && ! cmp -s "$$f" "$$dst"; then \
	        echo "install: keeping edited $$dst; new version at $$dst.new"; \
	        install -m 0644 "$$f" "$$dst.new"; \
	    else install -m 0644 "$$f" "$$dst"; fi; \
	done
ifeq ($(HAVE_SPANK),1)
	@echo "install: to load the SPANK plugin, add this line to Slurm's plugstack.conf on every node"
	@echo "install: and submit host (Debian: a file in /etc/slurm/plugstack.conf.d/; see spank_hetpipe(8)):"
	@echo "    $(PLUGSTACK_LINE)"
else
	@echo "install: spank_hetpipe.so not built ($(SPANK_HEADER) not found: install libslurm-dev)"
endif

# Removes what install put, but an edited config (its .new goes).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hetpipe $(DESTDIR)$(BINDIR)/hetpipe-rank \
	    $(DESTDIR)$(LIBDIR)/hetpipe/hetpipe-cuda.so $(DESTDIR)$(SLURM_PLUGINDIR)/spank_hetpipe.so \
	    $(DESTDIR)$(MANDIR)/man1/hetpipe.1 $(DESTDIR)$(MANDIR)/man8/spank_hetpipe.8
	@rmdir $(DESTDIR)$(LIBDIR)/hetpipe 2> /dev/null || true
	rm -rf $(DESTDIR)$(DATADIR)
	@for f in $(wildcard etc/*.conf); do \
	    dst="$(DESTDIR)$(SYSCONFDIR)/$$(basename $$f)"; \
	    rm -f "$$dst.new"; \
	    if [ -e "$$dst" ] && ! cmp -s "$$f" "$$dst"; then echo "uninstall: keeping edited $$dst"; \
	    else rm -f "$$dst"; fi; \
	done
	@rmdir $(DESTDIR)$(SYSCONFDIR) 2> /dev/null || true

format:
	clang-format -i $(wildcard common/*.[ch] runtime/*.[ch] runtime/*.cu runtime/*.cuh \
	    launcher/*.[ch] spank/*.[ch] tests/unit/*.[ch] tests/gpu/*.c tests/bench/*.c)

clean:
	rm -rf $(BUILD)

-include $(ALL_OBJS:.o=.d) $(CUDA_OBJS:.o=.d)
