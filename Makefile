# Builds: `make` builds what this machine can build (the CPU trainer and the tokenizer always, the
# CUDA trainer when nvcc is on the PATH). `make test` runs every test that needs no GPU.
CC ?= gcc
CFLAGS ?= -O3 -march=native -mprefer-vector-width=512 -fno-math-errno
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-function -fopenmp
LDLIBS = -lm
PYTHON ?= python3
TORCH_PYTHON ?= /usr/bin/python3
NVCC := $(shell command -v nvcc 2>/dev/null)
# With Open MPI's compiler wrapper the CPU build can run as several ranks under mpirun.
MPICC := $(shell command -v mpicc 2>/dev/null)
CPU_CC = $(if $(MPICC),$(MPICC) -DUSE_MPI,$(CC))

HEADERS = utils.h gpt2.h config.h checkpoint.h dataloader.h tokenizer.h trainer.h comm.h zero.h pipeline.h model.h

# The build configuration is part of what a binary is made from: installing Open MPI after a first
# build, or another CC, CFLAGS or nvcc, must rebuild. Each configuration is written to a stamp file
# only when it differs from what the file holds, and the binaries depend on the stamp, so make
# compares it like a source. .build-cpu: the CPU build, the tests and tokenize; .build-cuda: nvcc's.
CPU_CONFIG := cc $(CPU_CC) | $(CC) $(shell $(CC) -dumpfullversion 2>/dev/null) | cflags $(CFLAGS) | ldlibs $(LDLIBS)
ifneq ($(file <.build-cpu),$(CPU_CONFIG))
$(file >.build-cpu,$(CPU_CONFIG))
endif

.PHONY: all test test-gpu bench bench-cpu clean
all: train_gpt_cpu tokenize $(if $(and $(NVCC),$(wildcard train_gpt.cu)),train_gpt)

train_gpt_cpu: train_gpt.c $(HEADERS) .build-cpu
	$(CPU_CC) $(CFLAGS) $< -o $@ $(LDLIBS)

tokenize: tokenize.c tokenizer.h utils.h .build-cpu
	$(CC) -O2 -std=gnu11 -Wall -Wextra $< -o $@ $(LDLIBS)

test/test_gpt2: test/test_gpt2.c test/check.h train_gpt.c $(HEADERS) .build-cpu
	$(CC) $(CFLAGS) -I. $< -o $@ $(LDLIBS)

test/test_units: test/test_units.c test/check.h $(HEADERS) .build-cpu
	$(CC) $(CFLAGS) -I. $< -o $@ $(LDLIBS)

test/test_generate: test/test_generate.c test/check.h train_gpt.c $(HEADERS) .build-cpu
	$(CC) $(CFLAGS) -I. $< -o $@ $(LDLIBS)

test/test_pipeline: test/test_pipeline.c test/check.h pipeline.h gpt2.h comm.h utils.h .build-cpu
	$(CC) $(CFLAGS) -I. $< -o $@ $(LDLIBS)

test: train_gpt_cpu tokenize test/test_gpt2 test/test_units test/test_pipeline test/test_generate
	PYTHON=$(PYTHON) TORCH_PYTHON=$(TORCH_PYTHON) bash test/run_tests.sh

# The CUDA build: bf16/fp16/fp32 kernels, cuBLASLt, MPI host-staged collectives when mpicc is there.
NVCC_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a
# -Wno-missing-field-initializers: the shared headers are C, where `= {0}` zeroes a struct.
NVCC_FLAGS ?= -O3 -std=c++17 $(NVCC_ARCH) -Xcompiler -Wall,-Wextra,-Wno-unused-function,-Wno-missing-field-initializers,-fopenmp
NVCC_FLAGS += -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1
MPI_CFLAGS = $(if $(MPICC),-DUSE_MPI $(shell $(MPICC) --showme:compile))
MPI_LDFLAGS = $(if $(MPICC),$(shell $(MPICC) --showme:link))
CUDA_CONFIG := nvcc $(or $(NVCC),none) | flags $(NVCC_FLAGS) | mpi $(MPI_CFLAGS) $(MPI_LDFLAGS)
ifneq ($(file <.build-cuda),$(CUDA_CONFIG))
$(file >.build-cuda,$(CUDA_CONFIG))
endif
# Without nvcc the CUDA targets say what is missing rather than running an empty command.
NVCC_OR_FAIL = $(or $(NVCC),$(error nvcc is not on the PATH: the CUDA build needs the CUDA toolkit (make train_gpt_cpu builds the CPU trainer)))
train_gpt: train_gpt.cu $(HEADERS) .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp

test/test_gpt2_gpu: test/test_gpt2.c train_gpt.cu $(HEADERS) .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) -I. -x cu $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp

# Generation with the key/value cache against the full-prefix forward, on the GPU.
test/test_generate_gpu: test/test_generate.c test/check.h train_gpt.cu $(HEADERS) .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) -I. -x cu $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp

# Every kernel against the CPU build's, in each precision, and their benchmark.
dev/cuda/kernels: dev/cuda/kernels.cu train_gpt.cu train_gpt.c $(HEADERS) .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) -I. $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp

# The attention kernels alone against a float64 reference, and their benchmark.
dev/cuda/attention: dev/cuda/attention.cu dev/cuda/attention_ref.h train_gpt.cu $(HEADERS) .build-cuda
	$(NVCC_OR_FAIL) $(NVCC_FLAGS) $(MPI_CFLAGS) -I. $< -o $@ -lcublasLt $(if $(MPICC),-lnccl) $(MPI_LDFLAGS) -lgomp

# On a machine with an NVIDIA GPU: the kernels and the CUDA build against the PyTorch reference and the CPU build.
test-gpu: train_gpt train_gpt_cpu test/test_gpt2_gpu dev/cuda/kernels
	TORCH_PYTHON=$(TORCH_PYTHON) bash test/test_gpu.sh

bench: train_gpt dev/cuda/kernels
	bash scripts/bench_gpu.sh

bench-cpu: train_gpt_cpu
	bash scripts/bench_cpu.sh

clean:
	rm -f .build-cpu .build-cuda train_gpt_cpu train_gpt tokenize test/test_gpt2 test/test_gpt2_gpu test/test_units test/test_pipeline test/test_generate test/test_generate_gpu dev/cuda/kernels dev/cuda/attention
