// target.h: whose memory the plan counts. By default a build plans its own allocations (backend.h's facts: its
// element size, working copies, attention's saved state and workspace). --gpu NAME names a card: its memory (NVIDIA's
// datasheet) becomes the device the plan is checked against, and in the CPU build, which runs nothing then
// (--dry-run), the plan counts what the CUDA build would allocate on it: the same shared plan (model_memory_plan,
// zero_memory_plan) fed the CUDA build's facts, which are written here once and which cuda/attention.cuh's own
// backend functions return (the flash kernels' saved state and their default backward's workspace).
// Pure: no build's code, so both builds and the plan read one table.
#ifndef BACKEND_TARGET_H
#define BACKEND_TARGET_H

#include <stddef.h>
#include <string.h>

// A card the plan knows: --gpu's name, what it is, and its memory as NVIDIA's datasheet gives it (GB there is the
// card's GiB: an "80GB" H100 has 80 GiB of HBM, of which the driver reports about 79.1 as total).
typedef struct { const char *key, *name; double gib; } GpuSpec;
static const GpuSpec GPU_SPECS[] = {
    {"h100", "NVIDIA H100 80GB SXM5/PCIe", 80.0},
    {"h100-nvl", "NVIDIA H100 NVL", 94.0},
    {"h200", "NVIDIA H200 141GB", 141.0},
    {"b200", "NVIDIA B200 180GB (HGX B200)", 180.0},
    {"a100-80", "NVIDIA A100 80GB", 80.0},
    {"a100-40", "NVIDIA A100 40GB", 40.0},
    {"l40s", "NVIDIA L40S 48GB", 48.0},
    {"a10", "NVIDIA A10 24GB", 24.0},
    {"l4", "NVIDIA L4 24GB", 24.0},
    {"rtx4090", "NVIDIA GeForce RTX 4090 24GB", 24.0},
};
#define NUM_GPU_SPECS (sizeof(GPU_SPECS) / sizeof(GPU_SPECS[0]))

// The card --gpu names (case as written), or NULL.
static const GpuSpec *gpu_spec(const char *key) {
    for (size_t i = 0; key && i < NUM_GPU_SPECS; i++) if (strcmp(GPU_SPECS[i].key, key) == 0) return &GPU_SPECS[i];
    return NULL;
}

// The CUDA build's attention: the flash kernels keep each query row's logsumexp (B, NH, T) for the backward, which
// recomputes the softmax; the default backward (two passes, RoPE in its own kernels) takes the row dots D, B NH T
// floats, as workspace (cuda/attention.cuh: other kernels, chosen by environment variables, take more).
static size_t gpu_att_saved_floats(size_t B, size_t NH, size_t T) { return B * NH * T; }
static size_t gpu_att_rows_floats(size_t B, size_t NH, size_t T) { return B * NH * T; }
// Under a mask other than causal (--doc-mask, --attn-window) the 16-bit backward is the KV-stationary one
// (cuda/attention_bwd_kv.cuh), whose workspace is the fused kernel's: D, one turn counter per 64-row query tile of
// each (b, h), and those tiles' fp32 dQ sums at the padded head size's columns (each part rounded up to 16 bytes). In
// fp32 (x_bytes 4) the masked kernels take D alone. cuda/attention.cuh's attn_bwd_scratch_floats reads it here.
#define GPU_ATT_BQ 64  // cuda/attention_common.cuh's ATT_BQ: query rows per tile
static size_t gpu_att_hs_built(size_t C, size_t NH) {  // the padded head size the kernels run (16, 32, 64 or 128)
    const size_t hsp = (C / NH + 15) / 16 * 16;
    return hsp <= 16 ? 16 : hsp <= 32 ? 32 : hsp <= 64 ? 64 : 128;
}
static size_t gpu_att_masked_floats(size_t x_bytes, size_t B, size_t NH, size_t T, size_t C) {
    const size_t rows = gpu_att_rows_floats(B, NH, T);
    if (x_bytes == 4) return rows;
    const size_t tiles = B * NH * ((T + GPU_ATT_BQ - 1) / GPU_ATT_BQ);
    return (rows + 3) / 4 * 4 + (tiles + 3) / 4 * 4 + tiles * GPU_ATT_BQ * gpu_att_hs_built(C, NH);
}

// The CUDA build's precisions and its default (cuda/backend.cuh returns these), which the CPU build's plan of a card takes.
#define GPU_PRECISION_DEFAULT "bf16"
#define GPU_PRECISIONS "bf16, fp16, fp32"

// The plan's target: gpu, the card named (NULL: the build's own device); cuda_facts, whether the figures are the CUDA
// build's computed here rather than this build's own (the CPU build with --gpu), with that build's element size at
// the run's --precision and whether its kernels read a working copy of the weights.
typedef struct {
    const GpuSpec *gpu;
    int cuda_facts;
    size_t x_bytes;
    int weights_copy;
} PlanTarget;
// set once, at start-up (run_setup), before anything is planned; unused where only the cards are read (train/config.h)
static PlanTarget plan_target __attribute__((unused));

#endif
