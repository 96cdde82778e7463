// cuda/attention_tuned.h: which instantiation of the KV-stationary attention backward (cuda/attention_bwd_kv.cuh's
// attn_kv_configs) each GPU runs, per head size and precision: the fastest in dev/gpu_session.sh's attention sweep on
// that card (`dev/gpu_session.sh` rewrites the rows between the markers from `./dev/cuda/attention sweep`). Where no row
// matches the device's name (a substring of cudaDeviceProp::name), the head size (the padded one the kernels run: 16,
// 32, 64, 128) and the precision, ATT_KV_DEFAULT_CONFIG runs; TRAIN_GPT_ATTN_KV_CONFIG=N overrides both.
#ifndef CUDA_ATTENTION_TUNED_H
#define CUDA_ATTENTION_TUNED_H

typedef struct {
    const char *gpu;        // a substring of the device's name, e.g. "H100"
    int hs;                 // padded head size
    const char *precision;  // "bf16" or "fp16"
    int config;             // index into attn_kv_configs
} AttnTunedRow;

// 128 keys per block (8 warps), 2 stages: v3's geometry, the untimed choice until a sweep's row says otherwise
#define ATT_KV_DEFAULT_CONFIG 2

static const AttnTunedRow attn_tuned_rows[] = {
    // sweep rows begin
    // sweep rows end
    {NULL, 0, NULL, 0}};

#endif  // CUDA_ATTENTION_TUNED_H
