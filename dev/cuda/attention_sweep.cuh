// dev/cuda/attention_sweep.cuh: `./dev/cuda/attention sweep` (dev/gpu_session.sh's attention sweep, issue 49): the
// KV-stationary backward's instantiations (cuda/attention_bwd_kv.cuh's attn_kv_configs) timed beside the two-pass and
// fused backwards and the forward, at B = 16 and 8, T = 1024, head sizes 64 and 128, bf16 (and fp16 at B = 16), under
// causal, document (documents of 100 to 400 tokens) and window (256) masks. TFLOP/s count the visible area
// (arch/attn_mask.h's attn_mask_visible_pairs): forward 4 hs NH pairs, backward 2.5 x that. Then one `best` line per
// (head size, precision): the fastest instantiation at B = 16 causal, which dev/gpu_session.sh writes into
// cuda/attention_tuned.h as the device's row. dev/bench_sdpa.py gives PyTorch's SDPA (flash, cuDNN) at these shapes.
// Included by dev/cuda/attention.cu after its helpers.
#pragma once

template <typename floatT>
static int attn_sweep_shape(const char *gpu, int B, int T, int hs, int NH, const char *mname, int W, bool docs,
                            bool report_best) {
    const int C = NH * hs, KV = NH;
    const long nqkv = (long)B * T * 3 * C, nout = (long)B * T * C;
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 1.0f, 7);
    std::vector<floatT> qkv_t(nqkv), dout_t(nout);
    for (long i = 0; i < nqkv; i++) qkv_t[i] = attn_from_float<floatT>(qkv[i]);
    for (long i = 0; i < nout; i++) dout_t[i] = attn_from_float<floatT>(dout[i]);
    std::vector<int> ds((size_t)B * T, 0);
    uint64_t s = 5;
    for (int b = 0; b < B && docs; b++)
        for (int t = 0, start = 0, next = 0; t < T; t++) {
            if (t == next) { start = t; next = t + 100 + (int)((attn_rand_uniform(&s) + 1.0f) * 150.0f); }
            ds[(size_t)b * T + t] = start;
        }
    const AttnDev<floatT> dev = attn_dev_alloc(qkv_t, dout_t, B, T, C, NH);
    int *d_ds = nullptr;
    if (docs) {
        cudaCheck(cudaMalloc(&d_ds, ds.size() * sizeof(int)));
        cudaCheck(cudaMemcpy(d_ds, ds.data(), ds.size() * sizeof(int), cudaMemcpyHostToDevice));
    }
    const AttnMask hm = {W, docs ? ds.data() : nullptr}, dm = {W, d_ds};
    double pairs = 0.0;
    for (int b = 0; b < B; b++) pairs += (double)attn_mask_visible_pairs(&hm, b, T);
    const double fwd_flops = 4.0 * hs * NH * pairs, bwd_flops = 2.5 * fwd_flops;
    auto tf = [](double flops, float ms) { return flops / (ms * 1e-3) / 1e12; };
    const int warmup = 3, iters = 20;
    const float f = time_ms([&] { flash_attention_forward(dev.out, dev.lse, dev.qkv, B, T, C, NH, 0, KV, nullptr, nullptr,
                                                          &dm); }, warmup, iters);
    printf("sweep %-5s B=%2d T=%d hs=%3d %-8s | forward %7.3f ms %6.1f TFLOP/s |", attn_type_name<floatT>(), B, T, hs, mname, f,
           tf(fwd_flops, f));
    const bool causal = W == 0 && !docs;
    for (int k : {ATT_BWD_2PASS, ATT_BWD_FUSED}) {  // causal only: they take no mask
        if (!causal) break;
        const float b = time_ms([&] { flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B,
                                                               T, C, NH, 0, KV, nullptr, nullptr, k); }, warmup, iters);
        printf(" %s %6.1f", k == ATT_BWD_2PASS ? "2pass" : "fused", tf(bwd_flops, b));
    }
    int best = -1;
    float best_ms = 0.0f;
    for (int cfg = 0; cfg < ATT_KV_NCONFIGS; cfg++) {
        const float b = time_ms([&] { flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B,
                                                               T, C, NH, 0, KV, nullptr, nullptr, ATT_BWD_KV, cfg, &dm); },
                                warmup, iters);
        printf(" kv%d %6.1f", cfg, tf(bwd_flops, b));
        if (best < 0 || b < best_ms) { best = cfg; best_ms = b; }
    }
    printf(" (backward TFLOP/s)\n");
    if (report_best)  // dev/gpu_session.sh reads these
        printf("best \"%s\" %d %s %d (%d keys, %d stages: %.1f TFLOP/s backward)\n", gpu, hs,
               std::is_same<floatT, __half>::value ? "fp16" : "bf16", best, attn_kv_configs[best].bn,
               attn_kv_configs[best].stages, tf(bwd_flops, best_ms));
    attn_dev_free(dev);
    if (d_ds) cudaCheck(cudaFree(d_ds));
    return 0;
}

static int attn_sweep(void) {
    int dev = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    // the table's key: the name's model word (e.g. "H100" of "NVIDIA H100 80GB HBM3"), else the whole name
    char gpu[sizeof(prop.name) + 1];
    const char *sp = strchr(prop.name, ' ');
    snprintf(gpu, sizeof(gpu), "%s", sp && strncmp(prop.name, "NVIDIA", 6) == 0 ? sp + 1 : prop.name);
    if (char *e = strchr(gpu, ' ')) *e = 0;
    printf("device: %s (sm_%d%d), table key \"%s\"\n", prop.name, prop.major, prop.minor, gpu);
    for (int hs : {64, 128}) {
        const int NH = 768 / hs;
        attn_sweep_shape<__nv_bfloat16>(gpu, 16, 1024, hs, NH, "causal", 0, false, true);
        attn_sweep_shape<__half>(gpu, 16, 1024, hs, NH, "causal", 0, false, true);
        attn_sweep_shape<__nv_bfloat16>(gpu, 8, 1024, hs, NH, "causal", 0, false, false);
        attn_sweep_shape<__nv_bfloat16>(gpu, 16, 1024, hs, NH, "document", 0, true, false);
        attn_sweep_shape<__nv_bfloat16>(gpu, 16, 1024, hs, NH, "window", 256, false, false);
    }
    return 0;
}
