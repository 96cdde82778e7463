# Builds: `make` builds what this machine can build (the CPU trainer and the tokenizer always, the
# CUDA trainer when nvcc is on the PATH). `make test` runs every test that needs no GPU.
CC ?= gcc
CFLAGS ?= -O3 -march=native -mprefer-vector-width=512 -fno-math-errno
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-function -fopenmp
LDLIBS = -lm
# liburing (Debian: liburing-dev) gives --offload-device nvme asynchronous I/O; without it the swap file is
# read and written with plain pread/pwrite, one transfer at a time (the run's banner says which).
URING := $(shell printf '\043include <liburing.h>\nint main(void){struct io_uring r; return io_uring_queue_init(1, &r, 0);}\n' | $(CC) -x c - -luring -o /dev/null 2>/dev/null && echo yes)
# _GNU_SOURCE: <fcntl.h> names O_DIRECT only with it (zero/swap.h); g++ and nvcc define it themselves
URING_FLAGS = -D_GNU_SOURCE $(if $(URING),-DHAVE_LIBURING)
URING_LIBS = $(if $(URING),-luring)
PYTHON ?= python3
TORCH_PYTHON ?= /usr/bin/python3
NVCC := $(shell command -v nvcc 2>/dev/null)
# With Open MPI's compiler wrapper the CPU build can run as several ranks under mpirun.
MPICC := $(shell command -v mpicc 2>/dev/null)
CPU_CC = $(if $(MPICC),$(MPICC) -DUSE_MPI,$(CC))

# Which headers a target is made from is the compiler's word, not a list kept by hand: every compile writes
# the files it read (-MMD: not the system's headers; -MP: a header deleted later is no error) to
# build/dep/TARGET.d, included at the end, so touching any header rebuilds exactly what includes it.
DEPDIR = build/dep
DEPFLAGS = -MMD -MP -MT $@ -MF $(DEPDIR)/$(subst /,__,$@).d

# The build configuration is part of what a binary is made from: installing Open MPI after a first
# build, or another CC, CFLAGS or nvcc, must rebuild. Each configuration is written to a stamp file
# only when it differs from what the file holds, and the binaries depend on the stamp, so make
# compares it like a source. .build-cpu: the CPU build, the tests and tokenize; .build-cuda: nvcc's;
# .build-emu: the emulated CUDA build's objects and binaries.
CPU_CONFIG := cc $(CPU_CC) | $(CC) $(shell $(CC) -dumpfullversion 2>/dev/null) | cflags $(CFLAGS) | ldlibs $(LDLIBS) | liburing $(or $(URING),no) | deps $(DEPDIR)
ifneq ($(file <.build-cpu),$(CPU_CONFIG))
$(file >.build-cpu,$(CPU_CONFIG))
endif

# The CUDA build on the CPU emulator (dev/cuda/emu): built and tested by `make test` when the CUDA toolkit's
# headers are here (no GPU or nvcc needed).
CUDA_HOME ?= /usr/local/cuda
EMU_OK := $(wildcard $(CUDA_HOME)/include/cuda_bf16.h)
EMU_BINS = train_gpt_emu train_gpt_emu_race test/test_gpt2_emu test/test_generate_emu dev/cuda/kernels_emu dev/cuda/attention_emu dev/cuda/kernels_emu_race \
  dev/cuda/kernels_emu_asan dev/cuda/emu/selftest dev/cuda/emu/selftest_race
# Asked for by name without those headers, the emulated targets say what is missing, not a compiler error per file.
ifeq ($(EMU_OK),)
ifneq ($(filter $(EMU_BINS) dev/cuda/attention_emu_race test-cuda-emu,$(MAKECMDGOALS)),)
$(error no CUDA toolkit headers (cuda_bf16.h) in $(CUDA_HOME)/include: the emulated CUDA build compiles the device code with them, needing no GPU or nvcc; install NVIDIA's CUDA toolkit, or set CUDA_HOME to where it is (make train_gpt_cpu builds the CPU trainer))
endif
endif

.PHONY: bench-data all test test-gpu test-cuda-emu test-cluster test-multinode bench bench-levers bench-cpu mutants clean print-config gpu-prepare
all: train_gpt_cpu tokenize $(if $(and $(NVCC),$(wildcard train_gpt.cu)),train_gpt)

train_gpt_cpu: train_gpt.c .build-cpu
	$(CPU_CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) $< -o $@ $(LDLIBS) $(URING_LIBS)

tokenize: tokenize.c .build-cpu
	$(CC) -O2 -std=gnu11 -Wall -Wextra -Wno-unused-function $(DEPFLAGS) $< -o $@ $(LDLIBS) -lpthread

test/test_gpt2: test/test_gpt2.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/test_units: test/test_units.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/test_generate: test/test_generate.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/hf_forward: test/hf_forward.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/test_pipeline: test/test_pipeline.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/test_llama_cpu: test/test_llama_cpu.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

test/test_arch: test/test_arch.c .build-cpu
	$(CC) $(CFLAGS) $(URING_FLAGS) $(DEPFLAGS) -I. $< -o $@ $(LDLIBS) $(URING_LIBS)

# test/test_headers.sh compiles every header alone with the flags of the build that uses it: these.
HEADER_CHECK_ENV = HEADER_CC="$(CPU_CC)" HEADER_CFLAGS="$(CFLAGS) $(URING_FLAGS)" HEADER_CXX="$(EMU_CXX)" HEADER_CXXFLAGS="$(EMU_FLAGS)"
# The CPU build's binaries and the emulator's objects are built here, TEST_JOBS at a time (2: CI's machine has 2
# cores; a -j given to make wins), before the first suite. The emulated CUDA build's binaries, most of the compiling,
# are built by test/run_tests.sh as the first two jobs of its queue, one compile at a time in each of its two slots
# (the trainer's, TEST_EMU_TRAINER, and the kernel checks', TEST_EMU_KERNELS), while the suites that need only the
# CPU build wait for a slot. Each build's output is kept in build/test-bins*.log:
# test/test_build.sh reads the warnings of the machine's own configuration there instead of compiling again.
TEST_BINS = train_gpt_cpu tokenize test/test_gpt2 test/test_units test/test_pipeline test/test_generate test/hf_forward test/test_llama_cpu \
  test/test_arch $(if $(EMU_OK),$(EMU_OBJS) $(EMU_OBJS:build/emu/%=build/emu/asan/%))
TEST_JOBS ?= 2
TEST_EMU_KERNELS = $(if $(EMU_OK),dev/cuda/emu/selftest dev/cuda/emu/selftest_race dev/cuda/kernels_emu dev/cuda/attention_emu \
  dev/cuda/kernels_emu_race dev/cuda/kernels_emu_asan)
TEST_EMU_TRAINER = $(if $(EMU_OK),train_gpt_emu train_gpt_emu_race test/test_gpt2_emu test/test_generate_emu)
test:
	@mkdir -p build
	{ $(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS)) $(TEST_BINS) 2>&1; echo $$? > build/test-bins.rc; } \
	  | tee build/test-bins.log; [ "$$(cat build/test-bins.rc)" = 0 ]
	$(HEADER_CHECK_ENV) TEST_EMU_KERNELS="$(TEST_EMU_KERNELS)" TEST_EMU_TRAINER="$(TEST_EMU_TRAINER)" PYTHON=$(PYTHON) \
	  TORCH_PYTHON=$(TORCH_PYTHON) bash test/run_tests.sh

# The Slurm suites (test/test_slurm.sh, test/test_multinode.sh), as root: installs slurm-wlm, munge and
# libpmix-dev when missing (the only target that installs anything; .ci/run calls it), then runs both.
# `make test` runs them too once the stack is installed, and otherwise reports them as SKIPs.
test-cluster: train_gpt_cpu $(if $(EMU_OK),train_gpt_emu)
	bash test/slurm_lib.sh install
	rc=0; bash test/test_slurm.sh || rc=1; bash test/test_multinode.sh || rc=1; exit $$rc

# The two-node Slurm tests alone (test/test_multinode.sh; root, on test/cluster.sh's simulated nodes): ends
# with its own "N passed, N failed, N skipped"; `make test` runs them too where Slurm is installed.
test-multinode: train_gpt_cpu $(if $(EMU_OK),train_gpt_emu)
	bash test/test_multinode.sh

# The CUDA build: bf16/fp16/fp32 kernels, cuBLASLt, MPI host-staged collectives when mpicc is there.
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a
# -Wno-missing-field-initializers: the shared headers are C, where `= {0}` zeroes a struct.
NVCC_FLAGS ?= -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -Wall,-Wextra,-Wno-unused-function,-Wno-missing-field-initializers,-fopenmp
NVCC_FLAGS += -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 $(URING_FLAGS)
MPI_CFLAGS = $(if $(MPICC),-DUSE_MPI $(shell $(MPICC) --showme:compile))
MPI_LDFLAGS = $(if $(MPICC),$(shell $(MPICC) --showme:link))
CUDA_CONFIG := nvcc $(or $(NVCC),none) | flags $(NVCC_FLAGS) | mpi $(MPI_CFLAGS) $(MPI_LDFLAGS) | liburing $(or $(URING),no)
ifneq ($(file <.build-cuda),$(CUDA_CONFIG))
$(file >.build-cuda,$(CUDA_CONFIG))
endif
# Without nvcc the CUDA targets say what is missing rather than running an empty command.
NVCC_OR_FAIL = $(or $(NVCC),$(error nvcc is not on the PATH: the CUDA build needs the CUDA toolkit (make train_gpt_cpu builds the CPU trainer)))
train_gpt: train_gpt.cu .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $(DEPFLAGS) $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp $(URING_LIBS)

test/test_gpt2_gpu: test/test_gpt2.c .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $(DEPFLAGS) -DTRAIN_GPT_CUDA -I. -x cu $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp $(URING_LIBS)

# Generation with the key/value cache against the full-prefix forward, on the GPU.
test/test_generate_gpu: test/test_generate.c .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $(DEPFLAGS) -DTRAIN_GPT_CUDA -I. -x cu $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp $(URING_LIBS)

# Every kernel against the CPU build's, in each precision, and their benchmark.
dev/cuda/kernels: dev/cuda/kernels.cu .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $(DEPFLAGS) -I. $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp $(URING_LIBS)

# The attention kernels alone against a float64 reference, and their benchmark.
dev/cuda/attention: dev/cuda/attention.cu .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $(DEPFLAGS) -I. $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp $(URING_LIBS)

# On a machine with an NVIDIA GPU: the kernels and the CUDA build against the PyTorch reference and the CPU build.
test-gpu: train_gpt train_gpt_cpu test/test_gpt2_gpu test/test_generate_gpu dev/cuda/kernels
	TORCH_PYTHON=$(TORCH_PYTHON) bash test/test_gpu.sh

# The CUDA build on the CPU (dev/cuda/emu, see the README): the device code of cuda/, unmodified, compiled by
# g++ and run on an emulated GPU. Needs the CUDA toolkit's headers (not a GPU, not nvcc). _race: every memory
# access of the device code goes to the emulator's race detector; _asan: AddressSanitizer.
EMU_CXX ?= g++
# -mno-red-zone: g++ 12 -march=native put an aligned vector store at a misaligned red-zone address in a device
# function (attn_warp_mm_nt<float,64>) running on a fiber's stack
EMU_OPT ?= -O2 -march=native -mno-red-zone
# -fno-strict-aliasing: CUDA code reads memory through other types (16-byte vectors, two 16-bit values as
# one 32-bit word), which nvcc's device compiler allows; g++ at -O2 would reorder or drop such accesses.
EMU_FLAGS = $(EMU_OPT) -fno-strict-aliasing -std=c++17 -fopenmp -Wall -Wextra -Wno-unused-function -Wno-missing-field-initializers \
  -Wno-unknown-pragmas -Wno-class-memaccess -DTRAIN_GPT_CUDA -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 -isystem $(CUDA_HOME)/include $(MPI_CFLAGS) $(URING_FLAGS)
EMU_DEV = -I. -x c++ -include dev/cuda/emu/emu.h
EMU_OBJS = build/emu/emu.o build/emu/emu_threads.o build/emu/emu_blocks.o build/emu/emu_queue.o build/emu/emu_race.o \
  build/emu/cublaslt.o build/emu/nccl.o
# -O1 -g1 (after EMU_OPT's -O2): AddressSanitizer's usual level, and line tables for its reports; at -O2 -g the
# ASan build of dev/cuda/kernels.cu was the longest compile of `make test` (over 11 CPU minutes)
EMU_ASAN = -fsanitize=address -fno-omit-frame-pointer -O1 -g1
# -O0 for the ASan build's program (kernels.cu; its emulator objects stay at EMU_ASAN's -O1): every access of the
# device code stays in memory and instrumented, and it compiled in 41 CPU s against -O1's 122 and ran `check edges`
# in reverse order in 92 against 68 (issue 52, a 2-core machine): 59 CPU s less of `make test`
EMU_ASAN_PROG = $(EMU_ASAN) -O0
EMU_RACE = -fsanitize=thread -g1 -O1
# -O1 (after EMU_OPT's -O2) for the kernel checks' plain programs (kernels.cu, attention.cu): their run time is the
# emulator's runtime (built at -O2) and the host references, so -O1 ran `kernels_emu check edges` in 25.8 CPU s
# against -O2's 24.8 and `attention_emu check orders` in 26.9 against 26.9, and compiled each in 46 and 44 CPU s
# against 123 and 128 (issue 52, a 2-core machine); the same for the trainer's check programs (test_gpt2.c,
# test_generate.c on the emulated GPU): test_gpt2_emu compiled in 36 CPU s against 100 and ran in 19.4 against 17.3
EMU_CHECK_OPT = -O1
EMU_LINK = $(MPI_LDFLAGS) -lgomp $(URING_LIBS)
# the emulated build's configuration stamp (see .build-cpu above): Open MPI appearing after a first build
# changes EMU_FLAGS and EMU_LINK, and every emulator object and binary is rebuilt with it
EMU_CONFIG := cxx $(EMU_CXX) $(shell $(EMU_CXX) -dumpfullversion 2>/dev/null) | flags $(EMU_FLAGS) | checks $(EMU_CHECK_OPT) | asan $(EMU_ASAN) prog $(EMU_ASAN_PROG) | race $(EMU_RACE) | link $(EMU_LINK) | deps $(DEPDIR)
ifneq ($(file <.build-emu),$(EMU_CONFIG))
$(file >.build-emu,$(EMU_CONFIG))
endif
build/emu/%.o: dev/cuda/emu/%.cpp .build-emu
	@mkdir -p $(@D)
	$(EMU_CXX) $(EMU_FLAGS) $(DEPFLAGS) -c $< -o $@
build/emu/asan/%.o: dev/cuda/emu/%.cpp .build-emu
	@mkdir -p $(@D)
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_ASAN) $(DEPFLAGS) -c $< -o $@

train_gpt_emu: train_gpt.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
test/test_gpt2_emu: test/test_gpt2.c $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_CHECK_OPT) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
test/test_generate_emu: test/test_generate.c $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_CHECK_OPT) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/kernels_emu: dev/cuda/kernels.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_CHECK_OPT) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/attention_emu: dev/cuda/attention.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_CHECK_OPT) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
# instrumented for the race detector only (no ThreadSanitizer runtime: the hooks are the emulator's)
train_gpt_emu_race: train_gpt.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_RACE) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/kernels_emu_race: dev/cuda/kernels.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_RACE) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/attention_emu_race: dev/cuda/attention.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_RACE) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/kernels_emu_asan: dev/cuda/kernels.cu $(EMU_OBJS:build/emu/%=build/emu/asan/%) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_ASAN_PROG) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS:build/emu/%=build/emu/asan/%) -o $@ $(EMU_LINK) -fsanitize=address
# the emulator's own checks, plain and with the race detector
dev/cuda/emu/selftest: dev/cuda/emu/selftest.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)
dev/cuda/emu/selftest_race: dev/cuda/emu/selftest.cu $(EMU_OBJS) .build-emu
	$(EMU_CXX) $(EMU_FLAGS) $(EMU_RACE) $(EMU_DEV) $(DEPFLAGS) $< -x none $(EMU_OBJS) -o $@ $(EMU_LINK)

# The CUDA build's test matrix on the emulator: ends with its own "N passed, N failed".
test-cuda-emu: train_gpt_cpu $(EMU_BINS)
	TORCH_PYTHON=$(TORCH_PYTHON) bash test/test_cuda_emu.sh

# Mutation testing: each bug of dev/mutants/catalogue.txt planted alone in a scratch copy, rebuilt, and run
# against the suites that must catch it; one line per mutant, then "N caught, N missed" (kept in
# dev/mutants/latest.txt). MUTANTS=id1,id2 runs only those.
mutants: train_gpt_cpu tokenize test/test_gpt2 test/test_units test/test_pipeline test/test_generate $(if $(EMU_OK),train_gpt_emu dev/cuda/kernels_emu)
	PYTHON=$(PYTHON) TORCH_PYTHON=$(TORCH_PYTHON) $(PYTHON) dev/mutants/run.py $(if $(MUTANTS),--only $(MUTANTS) --out /dev/null,--out dev/mutants/latest.txt)

# GPT-2 d12 in this trainer, compiled PyTorch and llm.c (B=16, then the 0.5M-token recipe); the Llama of d12 width
# (llama-d12, GQA 4:1) beside transformers' LlamaForCausalLM of the same shape, compiled; then the kernels' and
# attention's tables (scripts/bench_gpu.sh: its parts rows1 rows32 llama kernels attention, one at a time)
bench: train_gpt dev/cuda/kernels dev/cuda/attention
	bash scripts/bench_gpu.sh

# the step's levers of issue #23 one at a time (scripts/bench_levers.sh; BASE_BIN= adds an earlier build)
bench-levers: train_gpt
	bash scripts/bench_levers.sh

# The configuration stamps' text as this machine computes it (.build-cuda, .build-cpu, .build-emu): dev/gpu_session.sh
# compares it with the prebuilt binaries' (.bench/MANIFEST.txt), since a stamp that differs rebuilds everything.
print-config:
	@echo 'cuda: $(CUDA_CONFIG)'
	@echo 'cpu: $(CPU_CONFIG)'
	@echo 'emu: $(EMU_CONFIG)'

# Here, for a later GPU window: the sm_90a binaries without Open MPI or liburing (the GPU machine's configuration)
# and llm.c's train_gpt2cu, into the ignored .bench/ that the device tool carries (dev/gpu_session.sh prepare).
gpu-prepare:
	bash dev/gpu_session.sh prepare

bench-cpu: train_gpt_cpu
	bash scripts/bench_cpu.sh

# tokenize shards vs tiktoken (one process and llm.c's process pool) on generated text: MB/s, tokens/s,
# peak RSS (BENCH_DATA_MB=200 by default; BENCH_DATA_RSS_MB=3000 adds one large run for the memory bound);
# then with a trained 110k-id tokenizer.json beside tokenizers' encode_batch (TORCH_PYTHON) and tiktoken
bench-data: tokenize
	$(PYTHON) scripts/bench_data.py --mb $(or $(BENCH_DATA_MB),200) --rss-mb $(or $(BENCH_DATA_RSS_MB),0)

clean:
	rm -f .build-cpu .build-cuda .build-emu train_gpt_cpu train_gpt tokenize test/test_gpt2 test/test_gpt2_gpu test/test_units test/test_pipeline test/test_generate test/hf_forward test/test_llama_cpu test/test_arch test/test_generate_gpu dev/cuda/kernels dev/cuda/attention dev/cuda/attention_emu_race $(EMU_BINS)
	rm -rf build/emu $(DEPDIR)

# the dependency files' directory exists before any compile writes one; then what the compiles said
COMPILED = train_gpt_cpu tokenize test/test_gpt2 test/test_units test/test_pipeline test/test_generate test/hf_forward test/test_llama_cpu test/test_arch \
  train_gpt test/test_gpt2_gpu test/test_generate_gpu dev/cuda/kernels dev/cuda/attention $(EMU_BINS) dev/cuda/attention_emu_race \
  $(EMU_OBJS) $(EMU_OBJS:build/emu/%=build/emu/asan/%)
$(COMPILED): | $(DEPDIR)
$(DEPDIR):
	@mkdir -p $@
-include $(wildcard $(DEPDIR)/*.d)
