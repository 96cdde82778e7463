// cuda/attention.cuh: the model's causal self-attention in the CUDA build (train_gpt.cu, called by model.h):
// the launchers that check the shape, pick the padded head size and run the fp32 or the 16-bit flash
// kernels. dev/cuda/attention.cu checks and times them against a float64 reference. Multi-head (GPT-2's
// attention_forward/backward) and grouped-query (the Llama family's attention_gqa_forward/backward: NH query heads
// over KV key/value heads, read in place) run the same kernels; KV = NH is the multi-head case, bit for bit.
#ifndef CUDA_ATTENTION_CUH
#define CUDA_ATTENTION_CUH

#include "../arch/attn_mask.h"  // AttnMask, the entry points' last argument
#include "../backend/target.h"  // the kernels' saved state and default workspace, as the CPU build plans them
#include "attention_fp32.cuh"
#include "attention_mma.cuh"
#include "attention_bwd_2pass.cuh"
#include "attention_bwd_v3.cuh"
#include "attention_bwd_kv.cuh"
#include "attention_tuned.h"

template <typename floatT> static const char *attn_type_name() {
    return std::is_same<floatT, float>::value ? "float" : std::is_same<floatT, __half>::value ? "half" : "bf16";
}

// Exits with a message naming the shape if the kernels cannot run it; returns the padded head size. KV: key/value
// heads (grouped-query attention; KV = NH is multi-head attention, GPT-2's).
template <typename floatT>
static int attn_check_shape(const char *who, int B, int T, int C, int NH, int KV = 0) {
    if (KV <= 0) KV = NH;
    constexpr bool TC = sizeof(floatT) == 2;
    if (B < 1 || T < 1 || NH < 1 || C < 1 || C % NH != 0 || KV < 1 || NH % KV != 0) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d T=%d C=%d NH=%d KV=%d (need B, T, C, NH, KV >= 1, NH dividing C "
                "and KV dividing NH)\n", who, attn_type_name<floatT>(), B, T, C, NH, KV);
        exit(EXIT_FAILURE);
    }
    const int hs = C / NH;
    if (hs > ATT_MAX_HS || (TC && hs % 16 != 0)) {
        fprintf(stderr, "%s<%s>: unsupported head size hs=%d (B=%d T=%d C=%d NH=%d): need hs <= %d%s\n", who,
                attn_type_name<floatT>(), hs, B, T, C, NH, ATT_MAX_HS,
                TC ? " and a multiple of 16 on the tensor-core path" : "");
        exit(EXIT_FAILURE);
    }
    if ((long)B * NH > 65535) {
        fprintf(stderr, "%s<%s>: unsupported shape B=%d NH=%d: B*NH = %ld exceeds the grid's y limit 65535\n", who,
                attn_type_name<floatT>(), B, NH, (long)B * NH);
        exit(EXIT_FAILURE);
    }
    return (hs + 15) / 16 * 16;
}

static void attn_check_aligned(const char *who, const char *what, const void *p) {
    if ((uintptr_t)p % 16 != 0) {
        fprintf(stderr, "%s: %s = %p is not 16-byte aligned (the 16-bit path loads rows with 16-byte vectors)\n",
                who, what, p);
        exit(EXIT_FAILURE);
    }
}

// Allows a kernel `bytes` of dynamic shared memory (all of ours exceed the default 48 KB); exits naming the
// shape if the device cannot give that much. Called before every launch: it is cheap next to the kernels
// and stays right if the current device changes.
template <typename Kernel>
static void attn_allow_smem(Kernel kernel, size_t bytes, const char *who, const char *type, int B, int T, int C, int NH) {
    int dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (bytes > (size_t)optin) {
        fprintf(stderr, "%s<%s>: shape B=%d T=%d C=%d NH=%d (hs=%d) needs %zu bytes of shared memory per block, "
                "the device allows %d\n", who, type, B, T, C, NH, C / NH, bytes, optin);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// Calls f(std::integral_constant<int, HS>) for the smallest built HS (16, 32, 64, 128) that holds the head
// size: the tile loaders zero the columns past hs, so a head of 48 runs as 64 and 80..112 as 128.
template <typename F>
static void attn_dispatch_hs(int hs_padded, F &&f) {
    if (hs_padded <= 16) f(std::integral_constant<int, 16>{});
    else if (hs_padded <= 32) f(std::integral_constant<int, 32>{});
    else if (hs_padded <= 64) f(std::integral_constant<int, 64>{});
    else f(std::integral_constant<int, 128>{});  // attn_check_shape refused hs > 128
}

// out (B, T, C) and lse (B, NH, T) from qkv (B, T, C + 2 KV hs): NH query heads, KV key/value heads (KV <= 0: NH,
// GPT-2's (B, T, 3C)); query head h reads key/value head h / (NH / KV) in place.
// RoPE (the Llama family): with the angle tables rope_cos, rope_sin ((>= T, hs/2) fp32 each, row t for position t)
// qkv holds q and k unrotated, and the kernels rotate each Q and K tile as they load it (attention_common.cuh's
// rope_pair: the bits of cuda/rope.cuh's rope_forward pass first); NULL: q and k are used as stored.
// mask (arch/attn_mask.h; NULL, or window 0 and no doc_start: causal): a window and a document mask, doc_start (B, T)
// in device memory; every kernel skips the tiles wholly outside it and masks the others per element.
template <typename floatT>
static void flash_attention_forward(floatT *out, float *lse, const floatT *qkv, int B, int T, int C, int NH,
                              cudaStream_t stream, int KV = 0, const float *rope_cos = nullptr,
                              const float *rope_sin = nullptr, const AttnMask *mask = nullptr) {
    if (KV <= 0) KV = NH;
    const AttnMask am = attn_mask_of(mask);
    const int hsp = attn_check_shape<floatT>("attention_forward", B, T, C, NH, KV);
    if (sizeof(floatT) == 2) attn_check_aligned("attention_forward", "qkv", qkv);
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH);
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        if constexpr (sizeof(floatT) == 2) {
            const size_t smem = AttnTc<floatT, HS>::FWD_BYTES;
            const dim3 grid_tc((T + ATT_TC_BQ - 1) / ATT_TC_BQ, B * NH);
            attn_allow_smem(attn_tc_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
            LAUNCH(grid_tc, ATT_TC_THREADS, smem, stream, attn_tc_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, KV, scale,
                                                                                         rope_cos, rope_sin, am);
        } else {
            const size_t smem = AttnSmem<floatT, HS>::FWD_BYTES;
            attn_allow_smem(attn_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, KV, scale, rope_cos,
                                                                                rope_sin, am);
        }
        cudaCheck(cudaGetLastError());
    });
}

// The 16-bit backward's kernels (TRAIN_GPT_ATTN_BWD): 2pass (attention_bwd_2pass.cuh, the default: dQ, then dK and
// dV), fused (attention_mma.cuh's one kernel of 5 products whose blocks take turns on dQ: the default until the H200
// window of 2026-11-28 timed it at 0.73x the two-pass one) or v3 (attention_bwd_v3.cuh, not yet timed on a GPU). With
// RoPE in the loads the fused kernel runs whatever is chosen. Deterministic, each; dK and dV the same bits in all
// three, dQ summed in another order. kv (attention_bwd_kv.cuh, issue 49): KV-stationary, dQ in turns in descending key
// block order; the only one that takes a mask other than causal, so it runs whenever one is given.
enum { ATT_BWD_2PASS = 0, ATT_BWD_FUSED = 1, ATT_BWD_V3 = 2, ATT_BWD_KV = 3 };
static int attn_bwd_kernel_choice(void) {
    static int k = -1;
    if (k >= 0) return k;
    if (getenv("TRAIN_GPT_ATTN_BWD_V3")) fatal("TRAIN_GPT_ATTN_BWD_V3 is now TRAIN_GPT_ATTN_BWD=v3 (2pass, fused or v3)");
    const char *v = getenv("TRAIN_GPT_ATTN_BWD");
    if (!v || !*v || !strcmp(v, "2pass")) k = ATT_BWD_2PASS;
    else if (!strcmp(v, "fused")) k = ATT_BWD_FUSED;
    else if (!strcmp(v, "v3")) k = ATT_BWD_V3;
    else if (!strcmp(v, "kv")) k = ATT_BWD_KV;
    else fatal("TRAIN_GPT_ATTN_BWD=%s: expected 2pass (the default), fused, v3 or kv", v);
    return k;
}

// The KV-stationary backward's instantiation (attn_kv_configs) for this device, padded head size and 16-bit type:
// TRAIN_GPT_ATTN_KV_CONFIG, else cuda/attention_tuned.h's row for the device, else its default.
static int attn_kv_config(int HS, bool bf16) {
    const char *v = getenv("TRAIN_GPT_ATTN_KV_CONFIG");
    if (v && *v) {
        char *end = NULL;
        const long c = strtol(v, &end, 10);
        if (*end || c < 0 || c >= ATT_KV_NCONFIGS)
            fatal("TRAIN_GPT_ATTN_KV_CONFIG=%s: expected an instantiation of cuda/attention_bwd_kv.cuh, 0 to %d", v,
                  ATT_KV_NCONFIGS - 1);
        return (int)c;
    }
    static char name[256] = "";
    if (!name[0]) {
        int dev = 0;
        cudaDeviceProp prop;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaGetDeviceProperties(&prop, dev));
        snprintf(name, sizeof(name), "%s", prop.name[0] ? prop.name : "?");
    }
    for (const AttnTunedRow *r = attn_tuned_rows; r->gpu; r++)
        if (strstr(name, r->gpu) && r->hs == HS && !strcmp(r->precision, bf16 ? "bf16" : "fp16") && r->config >= 0 &&
            r->config < ATT_KV_NCONFIGS)
            return r->config;
    return ATT_KV_DEFAULT_CONFIG;
}

// The padded head size the kernels run (attn_dispatch_hs's).
static inline size_t attn_hs_built(int C, int NH) { return gpu_att_hs_built(C, NH); }
static_assert(ATT_BQ == GPU_ATT_BQ, "backend/target.h's tile rows are the kernels'");
// The backward's scratch, in floats: the row dots D (B*NH*T); the fused kernel's also the turn counters (one int
// per 64-row query tile of each (b, h), rounded up to 16 bytes) and the fp32 dQ accumulator (B*NH 64-row query tiles
// of the padded head size's columns); v3's (attn_v3_scratch_floats) D and its splits' dQ accumulators. kernel: an
// ATT_BWD_* (-1: the chosen one, and the fused one's room too where RoPE in the loads may run it).
static inline size_t attn_v3_scratch_floats(int B, int T, int C, int NH) {
    const size_t rows = (size_t)B * NH * T;
    return (rows + 3) / 4 * 4 + (size_t)attn_v3_splits(B, T, NH) * B * NH * attn_v3_tpad(T) * attn_hs_built(C, NH);
}
static int backend_fuses_rope(void);
// The kv kernel's is the fused one's (D, the counters, dQ in fp32), and it runs where mask is not causal.
static inline size_t attn_bwd_scratch_floats(size_t elem_bytes, int B, int T, int C, int NH, int kernel = -1,
                                             const AttnMask *mask = nullptr) {
    const size_t rows = gpu_att_rows_floats(B, NH, T);  // the default's, which the CPU build's plan of a card counts
    if (elem_bytes == 4) return rows;
    const size_t fused = gpu_att_masked_floats(elem_bytes, B, NH, T, C);  // the plan's figure under a mask
    const int k = mask && !attn_mask_causal(*mask) ? ATT_BWD_KV : kernel >= 0 ? kernel : attn_bwd_kernel_choice();
    const size_t n = k == ATT_BWD_FUSED || k == ATT_BWD_KV ? fused
                     : k == ATT_BWD_V3 ? attn_v3_scratch_floats(B, T, C, NH) : rows;
    return kernel < 0 && backend_fuses_rope() && fused > n ? fused : n;
}

// dqkv from dout, qkv, out and lse: the dQ pass (writing D to scratch), then dK and dV. scratch: B*NH*T floats.
template <typename floatT, int HS>
static void attn_2pass_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                                const float *lse, int B, int T, int C, int NH, int KV, float scale, const char *ty,
                                cudaStream_t stream) {
    using L = AttnTc<floatT, HS>;
    const size_t dq_bytes = Attn2Pass<floatT, HS>::DQ_BYTES;
    const dim3 grid_q((T + ATT_TC_BQ - 1) / ATT_TC_BQ, B * NH), grid_kv((T + ATT_BQ - 1) / ATT_BQ, B * KV);
    attn_allow_smem(attn_2pass_dq_kernel<floatT, HS>, dq_bytes, "attention_backward", ty, B, T, C, NH);
    LAUNCH(grid_q, ATT_TC_THREADS, dq_bytes, stream, attn_2pass_dq_kernel<floatT, HS>)(dqkv, scratch, dout, qkv, out, lse, T, C,
                                                                                      NH, KV, scale);
    cudaCheck(cudaGetLastError());
    attn_allow_smem(attn_tc_bwd_kernel<floatT, HS, false>, L::BWD_BYTES, "attention_backward", ty, B, T, C, NH);
    LAUNCH(grid_kv, ATT_THREADS, L::BWD_BYTES, stream, attn_tc_bwd_kernel<floatT, HS, false>)(
        dqkv, nullptr, nullptr, dout, qkv, lse, scratch, T, C, NH, KV, scale, nullptr, nullptr);
    cudaCheck(cudaGetLastError());
}

// The v3 backward (attention_bwd_v3.cuh) after the row dots: dK, dV and the splits' dQ parts, then dQ. 16-bit, no RoPE.
template <typename floatT, int HS>
static void attn_v3_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const float *lse, int B,
                             int T, int C, int NH, int KV, float scale, cudaStream_t stream) {
    const long rows = (long)B * NH * T;
    float *dq_acc = scratch + (rows + 3) / 4 * 4;
    const int ns = attn_v3_splits(B, T, NH);
    using L = AttnV3<floatT, HS>;
    attn_allow_smem(attn_v3_bwd_kernel<floatT, HS>, L::BYTES, "attention_backward", attn_type_name<floatT>(), B, T, C, NH);
    LAUNCH(dim3(ns, B * KV), ATT_V3_THREADS, L::BYTES, stream, attn_v3_bwd_kernel<floatT, HS>)(dqkv, dq_acc, dout, qkv, lse,
                                                                                                 scratch, T, C, NH, KV, scale);
    cudaCheck(cudaGetLastError());
    const long n = rows * (C / NH / 2);
    LAUNCH((unsigned)((n + 255) / 256), 256, 0, stream, attn_v3_dq_kernel<floatT>)(dqkv, dq_acc, B, T, C, NH, KV, HS, ns,
                                                                                  scale);
}

// The kv backward (attention_bwd_kv.cuh) after the row dots and the zeroed counters: dK, dV and dQ's fp32 sum in turns,
// then dQ in floatT. cfg: an index into attn_kv_configs.
template <typename floatT, int HS>
static void attn_kv_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const float *lse, int B,
                             int T, int C, int NH, int KV, float scale, const AttnMask &am, int cfg, cudaStream_t stream) {
    const long rows = (long)B * NH * T, tiles = (long)B * NH * ((T + ATT_BQ - 1) / ATT_BQ);
    int *turns = reinterpret_cast<int *>(scratch + (rows + 3) / 4 * 4);
    float *dq_acc = scratch + (rows + 3) / 4 * 4 + (tiles + 3) / 4 * 4;
    attn_kv_dispatch(cfg, [&](auto bn_tag, auto st_tag) {
        constexpr int BN = decltype(bn_tag)::value, ST = decltype(st_tag)::value;
        using L = AttnKv<floatT, HS, BN, ST>;
        attn_allow_smem(attn_kv_bwd_kernel<floatT, HS, BN, ST>, L::BYTES, "attention_backward", attn_type_name<floatT>(),
                        B, T, C, NH);
        LAUNCH(dim3((T + BN - 1) / BN, B * KV), L::THREADS, L::BYTES, stream, attn_kv_bwd_kernel<floatT, HS, BN, ST>)(
            dqkv, dq_acc, turns, dout, qkv, lse, scratch, T, C, NH, KV, scale, am);
        cudaCheck(cudaGetLastError());
    });
    const long n = rows * (C / NH / 2);
    LAUNCH((unsigned)((n + 255) / 256), 256, 0, stream, attn_v3_dq_kernel<floatT>)(dqkv, dq_acc, B, T, C, NH, KV, HS, 1,
                                                                                  scale);
}

// dqkv (B, T, C + 2 KV hs), every element overwritten, from dout (B, T, C), qkv, out and lse of the forward; dK and dV
// of a key/value head summed over its group's query heads in order (KV <= 0: NH).
// scratch: attn_bwd_scratch_floats(sizeof(floatT), B, T, C, NH) floats, 16-byte aligned.
// RoPE as in the forward (the same tables, qkv unrotated): Q and K rotated as loaded, and dQ, dK rotated back (the
// transpose) before they are written, so dqkv is the gradient with respect to the unrotated q and k.
// kernel: an ATT_BWD_* (-1: TRAIN_GPT_ATTN_BWD's); kv_config: the kv kernel's instantiation (-1: attn_kv_config's);
// mask as the forward's: in 16 bits a mask other than causal runs the kv kernel (RoPE in the loads with one is refused).
template <typename floatT>
static void flash_attention_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                               const float *lse, int B, int T, int C, int NH, cudaStream_t stream, int KV = 0,
                               const float *rope_cos = nullptr, const float *rope_sin = nullptr, int kernel = -1,
                               int kv_config = -1, const AttnMask *mask = nullptr) {
    if (KV <= 0) KV = NH;
    const AttnMask am = attn_mask_of(mask);
    if (kernel < 0) kernel = attn_bwd_kernel_choice();
    if (!attn_mask_causal(am) && sizeof(floatT) == 2) {  // the only 16-bit backward that takes a mask
        if (rope_cos) {
            fprintf(stderr, "attention_backward<%s>: RoPE in the kernels' loads (TRAIN_GPT_ROPE_IN_ATTENTION=1) with a "
                    "mask (window %d%s) is not offered: the masked backward (cuda/attention_bwd_kv.cuh) reads q and k "
                    "rotated; leave TRAIN_GPT_ROPE_IN_ATTENTION unset\n", attn_type_name<floatT>(), am.window,
                    am.doc_start ? ", documents" : "");
            exit(EXIT_FAILURE);
        }
        kernel = ATT_BWD_KV;
    }
    if (rope_cos) kernel = ATT_BWD_FUSED;  // the only 16-bit backward with RoPE in its loads
    const bool v3 = sizeof(floatT) == 2 && kernel == ATT_BWD_V3, two_pass = sizeof(floatT) == 2 && kernel == ATT_BWD_2PASS;
    const bool kv = sizeof(floatT) == 2 && kernel == ATT_BWD_KV;
    (void)kv;  // read only in the 16-bit instantiation's branch (nvcc's #177 in the fp32 one otherwise)
    const int hsp = attn_check_shape<floatT>("attention_backward", B, T, C, NH, KV);
    if (sizeof(floatT) == 2) {
        attn_check_aligned("attention_backward", "qkv", qkv);
        attn_check_aligned("attention_backward", "dout", dout);
    }
    const float scale = 1.0f / sqrtf((float)(C / NH));
    const dim3 grid((T + ATT_BQ - 1) / ATT_BQ, B * NH), grid_kv((T + ATT_BQ - 1) / ATT_BQ, B * KV);
    if (two_pass) {  // its dQ pass computes D
        attn_dispatch_hs(hsp, [&](auto hs_tag) {
            (void)hs_tag;  // (fp32 never gets here: no two-pass kernel of its own)
            if constexpr (sizeof(floatT) == 2)
                attn_2pass_backward<floatT, decltype(hs_tag)::value>(dqkv, scratch, dout, qkv, out, lse, B, T, C, NH, KV,
                                                                     scale, attn_type_name<floatT>(), stream);
        });
        return;
    }
    // D first (and, the fused 16-bit kernel, the turn counters zeroed)
    const long rows = (long)B * NH * T, tiles = (long)B * NH * ((T + ATT_BQ - 1) / ATT_BQ);
    int *turns = reinterpret_cast<int *>(scratch + (rows + 3) / 4 * 4);
    float *dq_acc = scratch + (rows + 3) / 4 * 4 + (tiles + 3) / 4 * 4;
    const bool counters = sizeof(floatT) == 2 && !v3;
    LAUNCH((unsigned)((rows + 7) / 8), 256, 0, stream, attn_bwd_rowdot_kernel<floatT>)(
        scratch, dout, out, B, T, C, NH, counters ? turns : nullptr, counters ? (int)tiles : 0);
    cudaCheck(cudaGetLastError());
    attn_dispatch_hs(hsp, [&](auto hs_tag) {
        constexpr int HS = decltype(hs_tag)::value;
        const char *ty = attn_type_name<floatT>();
        if constexpr (sizeof(floatT) == 2) if (v3) {
            attn_v3_backward<floatT, HS>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, KV, scale, stream);
            cudaCheck(cudaGetLastError());
            return;
        }
        if constexpr (sizeof(floatT) == 2) if (kv) {
            const int cfg = kv_config >= 0 ? kv_config : attn_kv_config(HS, std::is_same<floatT, __nv_bfloat16>::value);
            attn_kv_backward<floatT, HS>(dqkv, scratch, dout, qkv, lse, B, T, C, NH, KV, scale, am, cfg, stream);
            cudaCheck(cudaGetLastError());
            return;
        }
        if constexpr (sizeof(floatT) == 2) {
            // dK, dV and dQ in one kernel, a block per key/value head's key tile; dQ summed over key blocks in dq_acc,
            // in a fixed order
            using L = AttnTc<floatT, HS>;
            attn_allow_smem(attn_tc_bwd_kernel<floatT, HS>, L::BWD_BYTES, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid_kv, ATT_THREADS, L::BWD_BYTES, stream, attn_tc_bwd_kernel<floatT, HS>)(dqkv, dq_acc, turns, dout, qkv, lse,
                                                                                              scratch, T, C, NH, KV, scale,
                                                                                              rope_cos, rope_sin);
        } else {
            const size_t smem = AttnSmem<floatT, HS>::BWD_BYTES;
            attn_allow_smem(attn_bwd_dkdv_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid_kv, ATT_THREADS, smem, stream, attn_bwd_dkdv_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C, NH,
                                                                                        KV, scale, rope_cos, rope_sin, am);
            cudaCheck(cudaGetLastError());
            attn_allow_smem(attn_bwd_dq_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_bwd_dq_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C, NH, KV,
                                                                                   scale, rope_cos, rope_sin, am);
        }
        cudaCheck(cudaGetLastError());
    });
}

// The model's attention: flash-style kernels above; `att` holds each row's logsumexp.
static void attention_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int C, int NH, const AttnMask *mask) {
    WITH_X(flash_attention_forward((xt *)out, att, (const xt *)qkv, B, T, C, NH, main_stream, 0, nullptr, nullptr, mask));
}

// The backward's workspace: model_create's (the memory plan's backend_att_workspace_bytes), or scratch_get's where a
// caller has none (the kernel checks). A model's that is too small is the plan's fault, stopped here: it would
// allocate past the plan.
static float *attn_ws = NULL;
static size_t attn_ws_floats = 0;
static void attention_workspace(void *p, size_t bytes) {
    attn_ws = (float *)p;
    attn_ws_floats = bytes / sizeof(float);
}
static float *attn_bwd_workspace(size_t n, const AttnMask *mask) {
    if (!attn_ws) return scratch_get(n);
    if (n > attn_ws_floats)
        internal_fault("attention backward: %zu floats of workspace asked (%s), the memory plan's has %zu "
                       "(backend_att_workspace_bytes)", n, mask && !attn_mask_causal(*mask) ? "under a mask" : "causal",
                       attn_ws_floats);
    return attn_ws;
}
static void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                               int B, int T, int C, int NH, const AttnMask *mask) {
    WITH_X({
        float *ws = attn_bwd_workspace(attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH, -1, mask), mask);
        flash_attention_backward((xt *)dqkv, ws, (const xt *)dout, (const xt *)qkv, (const xt *)out, att, B, T, C, NH,
                                 main_stream, 0, nullptr, nullptr, -1, -1, mask);
    });
}

// Grouped-query attention (the Llama family), backend.h's attention_gqa_* (cpu/attention.h's gqa_attention_* in the CPU
// build): qkv (B, T, (NH + 2 KV) hd),
// out (B, T, NH hd); att keeps each query row's logsumexp (B, NH, T) as attention_forward's does, not the CPU
// build's softmax. The backward takes the forward's output as GPT-2's attention_backward does (its row dots D).
// KV = NH runs GPT-2's kernels on the same addresses: the same bits as attention_forward and attention_backward.
// rope_cos, rope_sin (not NULL): RoPE in the kernels' loads of q and k (flash_attention_forward), which this build
// offers (backend_fuses_rope): the bits of rope_forward and then these calls without tables, and in the backward of
// these calls and then rope_backward. Off by default: TRAIN_GPT_ROPE_IN_ATTENTION=1 turns it on. On the H200
// (2026-11-28, dev/bench/2026-11-28-h200, llama-d12's shape at B=8, bf16) the fused kernels took 0.167 ms forward
// and 1.142 ms backward against 0.082 + 0.030 and 0.661 + 0.029 for attention and RoPE's passes: the rotation
// re-reads the angle tables in every block that loads a tile and lengthens the backward's critical loop, far more
// than the passes' memory traffic it saves.
static int backend_fuses_rope(void) {
    static int on = -1;
    if (on < 0) on = switch_env("TRAIN_GPT_ROPE_IN_ATTENTION", 0);
    return on;
}
static void attention_gqa_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int NH, int KV, int hd,
                                  const float *rope_cos, const float *rope_sin, const AttnMask *mask) {
    WITH_X(flash_attention_forward((xt *)out, att, (const xt *)qkv, B, T, NH * hd, NH, main_stream, KV, rope_cos, rope_sin,
                                   mask));
}
static void attention_gqa_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                                   int B, int T, int NH, int KV, int hd, const float *rope_cos, const float *rope_sin,
                                   const AttnMask *mask) {
    WITH_X({
        float *ws = attn_bwd_workspace(attn_bwd_scratch_floats(sizeof(xt), B, T, NH * hd, NH, -1, mask), mask);
        flash_attention_backward((xt *)dqkv, ws, (const xt *)dout, (const xt *)qkv, (const xt *)out, att, B, T, NH * hd, NH,
                                 main_stream, KV, rope_cos, rope_sin, -1, -1, mask);
    });
}

// Attention keeps only each row's logsumexp (B, NH, T) for backward, which recomputes the softmax (backend.h).
static size_t backend_att_saved_floats(size_t B, size_t NH, size_t T) { return gpu_att_saved_floats(B, NH, T); }
// The backward's workspace (the memory plan's): D, and in 16-bit the dQ accumulator and the turn counters; masked
// (some layer's mask is not causal): room for the KV-stationary backward's too, which those layers run.
static size_t backend_att_workspace_bytes(int B, int NH, int T, int C, int masked) {
    size_t n = 0, m = 0;
    WITH_X({
        n = attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH);  // what attention_backward asks for, causal
        if (masked) m = attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH, ATT_BWD_KV);  // and under a mask
    });
    return (m > n ? m : n) * sizeof(float);
}

#endif  // CUDA_ATTENTION_CUH
