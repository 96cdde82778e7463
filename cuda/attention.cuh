// cuda/attention.cuh: the model's causal self-attention in the CUDA build (train_gpt.cu, called by model.h):
// the launchers that check the shape, pick the padded head size and run the fp32 or the 16-bit flash
// kernels. dev/cuda/attention.cu checks and times them against a float64 reference. Multi-head (GPT-2's
// attention_forward/backward) and grouped-query (the Llama family's attention_gqa_forward/backward: NH query heads
// over KV key/value heads, read in place) run the same kernels; KV = NH is the multi-head case, bit for bit.
#ifndef CUDA_ATTENTION_CUH
#define CUDA_ATTENTION_CUH

#include "attention_fp32.cuh"
#include "attention_mma.cuh"
#include "attention_bwd_2pass.cuh"
#include "attention_bwd_v3.cuh"

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
template <typename floatT>
static void flash_attention_forward(floatT *out, float *lse, const floatT *qkv, int B, int T, int C, int NH,
                              cudaStream_t stream, int KV = 0, const float *rope_cos = nullptr,
                              const float *rope_sin = nullptr) {
    if (KV <= 0) KV = NH;
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
                                                                                         rope_cos, rope_sin);
        } else {
            const size_t smem = AttnSmem<floatT, HS>::FWD_BYTES;
            attn_allow_smem(attn_fwd_kernel<floatT, HS>, smem, "attention_forward", attn_type_name<floatT>(), B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_fwd_kernel<floatT, HS>)(out, lse, qkv, T, C, NH, KV, scale, rope_cos,
                                                                                rope_sin);
        }
        cudaCheck(cudaGetLastError());
    });
}

// The 16-bit backward's kernels (TRAIN_GPT_ATTN_BWD): 2pass (attention_bwd_2pass.cuh, the default: dQ, then dK and
// dV), fused (attention_mma.cuh's one kernel of 5 products whose blocks take turns on dQ: the default until the H200
// window of 2026-11-28 timed it at 0.73x the two-pass one) or v3 (attention_bwd_v3.cuh, not yet timed on a GPU). With
// RoPE in the loads the fused kernel runs whatever is chosen. Deterministic, each; dK and dV the same bits in all
// three, dQ summed in another order.
enum { ATT_BWD_2PASS = 0, ATT_BWD_FUSED = 1, ATT_BWD_V3 = 2 };
static int attn_bwd_kernel_choice(void) {
    static int k = -1;
    if (k >= 0) return k;
    if (getenv("TRAIN_GPT_ATTN_BWD_V3")) fatal("TRAIN_GPT_ATTN_BWD_V3 is now TRAIN_GPT_ATTN_BWD=v3 (2pass, fused or v3)");
    const char *v = getenv("TRAIN_GPT_ATTN_BWD");
    if (!v || !*v || !strcmp(v, "2pass")) k = ATT_BWD_2PASS;
    else if (!strcmp(v, "fused")) k = ATT_BWD_FUSED;
    else if (!strcmp(v, "v3")) k = ATT_BWD_V3;
    else fatal("TRAIN_GPT_ATTN_BWD=%s: expected 2pass (the default), fused or v3", v);
    return k;
}

// The padded head size the kernels run (attn_dispatch_hs's).
static inline size_t attn_hs_built(int C, int NH) {
    const size_t hsp = (size_t)(C / NH + 15) / 16 * 16;
    return hsp <= 16 ? 16 : hsp <= 32 ? 32 : hsp <= 64 ? 64 : 128;
}
// The backward's scratch, in floats: the row dots D (B*NH*T); the fused kernel's also the turn counters (one int
// per 64-row query tile of each (b, h), rounded up to 16 bytes) and the fp32 dQ accumulator (B*NH 64-row query tiles
// of the padded head size's columns); v3's (attn_v3_scratch_floats) D and its splits' dQ accumulators. kernel: an
// ATT_BWD_* (-1: the chosen one, and the fused one's room too where RoPE in the loads may run it).
static inline size_t attn_v3_scratch_floats(int B, int T, int C, int NH) {
    const size_t rows = (size_t)B * NH * T;
    return (rows + 3) / 4 * 4 + (size_t)attn_v3_splits(B, T, NH) * B * NH * attn_v3_tpad(T) * attn_hs_built(C, NH);
}
static int backend_fuses_rope(void);
static inline size_t attn_bwd_scratch_floats(size_t elem_bytes, int B, int T, int C, int NH, int kernel = -1) {
    const size_t rows = (size_t)B * NH * T;
    if (elem_bytes == 4) return rows;
    const size_t tiles = (size_t)B * NH * ((T + ATT_BQ - 1) / ATT_BQ), HS = attn_hs_built(C, NH);
    const size_t fused = (rows + 3) / 4 * 4 + (tiles + 3) / 4 * 4 + tiles * ATT_BQ * HS;
    const int k = kernel >= 0 ? kernel : attn_bwd_kernel_choice();
    const size_t n = k == ATT_BWD_FUSED ? fused : k == ATT_BWD_V3 ? attn_v3_scratch_floats(B, T, C, NH) : rows;
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

// dqkv (B, T, C + 2 KV hs), every element overwritten, from dout (B, T, C), qkv, out and lse of the forward; dK and dV
// of a key/value head summed over its group's query heads in order (KV <= 0: NH).
// scratch: attn_bwd_scratch_floats(sizeof(floatT), B, T, C, NH) floats, 16-byte aligned.
// RoPE as in the forward (the same tables, qkv unrotated): Q and K rotated as loaded, and dQ, dK rotated back (the
// transpose) before they are written, so dqkv is the gradient with respect to the unrotated q and k.
template <typename floatT>
static void flash_attention_backward(floatT *dqkv, float *scratch, const floatT *dout, const floatT *qkv, const floatT *out,
                               const float *lse, int B, int T, int C, int NH, cudaStream_t stream, int KV = 0,
                               const float *rope_cos = nullptr, const float *rope_sin = nullptr, int kernel = -1) {
    if (KV <= 0) KV = NH;
    if (kernel < 0) kernel = attn_bwd_kernel_choice();
    if (rope_cos) kernel = ATT_BWD_FUSED;  // the only 16-bit backward with RoPE in its loads
    const bool v3 = sizeof(floatT) == 2 && kernel == ATT_BWD_V3, two_pass = sizeof(floatT) == 2 && kernel == ATT_BWD_2PASS;
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
                                                                                        KV, scale, rope_cos, rope_sin);
            cudaCheck(cudaGetLastError());
            attn_allow_smem(attn_bwd_dq_kernel<floatT, HS>, smem, "attention_backward", ty, B, T, C, NH);
            LAUNCH(grid, ATT_THREADS, smem, stream, attn_bwd_dq_kernel<floatT, HS>)(dqkv, dout, qkv, lse, scratch, T, C, NH, KV,
                                                                                   scale, rope_cos, rope_sin);
        }
        cudaCheck(cudaGetLastError());
    });
}

// The model's attention: flash-style kernels above; `att` holds each row's logsumexp.
static void attention_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int C, int NH) {
    WITH_X(flash_attention_forward((xt *)out, att, (const xt *)qkv, B, T, C, NH, main_stream));
}

// The backward's workspace: model_create's (the memory plan's backend_att_workspace_bytes), or scratch_get's where a
// caller has none or a smaller one.
static float *attn_ws = NULL;
static size_t attn_ws_floats = 0;
static void attention_workspace(void *p, size_t bytes) {
    attn_ws = (float *)p;
    attn_ws_floats = bytes / sizeof(float);
}
static void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                               int B, int T, int C, int NH) {
    WITH_X({
        const size_t n = attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH);
        float *ws = n <= attn_ws_floats ? attn_ws : scratch_get(n);
        flash_attention_backward((xt *)dqkv, ws, (const xt *)dout, (const xt *)qkv, (const xt *)out, att, B, T, C, NH,
                                 main_stream);
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
                                  const float *rope_cos, const float *rope_sin) {
    WITH_X(flash_attention_forward((xt *)out, att, (const xt *)qkv, B, T, NH * hd, NH, main_stream, KV, rope_cos, rope_sin));
}
static void attention_gqa_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                                   int B, int T, int NH, int KV, int hd, const float *rope_cos, const float *rope_sin) {
    WITH_X({
        const size_t n = attn_bwd_scratch_floats(sizeof(xt), B, T, NH * hd, NH);
        float *ws = n <= attn_ws_floats ? attn_ws : scratch_get(n);
        flash_attention_backward((xt *)dqkv, ws, (const xt *)dout, (const xt *)qkv, (const xt *)out, att, B, T, NH * hd, NH,
                                 main_stream, KV, rope_cos, rope_sin);
    });
}

// Attention keeps only each row's logsumexp (B, NH, T) for backward, which recomputes the softmax (backend.h).
static size_t backend_att_saved_floats(size_t B, size_t NH, size_t T) { return B * NH * T; }
// The backward's workspace (the memory plan's): D, and in 16-bit the dQ accumulator and the turn counters.
static size_t backend_att_workspace_bytes(int B, int NH, int T, int C) {
    size_t n = 0;
    WITH_X(n = attn_bwd_scratch_floats(sizeof(xt), B, T, C, NH));  // what attention_backward asks for
    return n * sizeof(float);
}

#endif  // CUDA_ATTENTION_CUH
