// dev/cuda/kernels_bench.cuh: `./dev/cuda/kernels bench`: each kernel's time (ms and GB/s or TFLOP/s) at GPT-2
// 124M's and llama-d12's shapes in bf16, the fused epilogues and the staged classifier beside the unfused. Part of
// kernels.cu's one translation unit (it uses kernels.cu's helpers), included there before main; not a header that
// stands alone.

// ms per call of fn, after 3 warm-up calls, over 20
template <typename F>
static float time_ms(F fn) {
    for (int i = 0; i < 3; i++) fn();
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a)); cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    for (int i = 0; i < 20; i++) fn();
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaEventSynchronize(b));
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    return ms / 20;
}

// The epilogue fusions (TRAIN_GPT_GELU_FUSION, TRAIN_GPT_RESIDUAL_FUSION) against the kernels they replace, at
// GPT-2 124M's shapes: the fc matmul and GELU, the fc projection's backward and GELU's, the attention projection
// and the residual add. a, b2, c2: BT x 4C; w: 4C x C; bias: 4C; wf, bf: fp32 gradients of those sizes.
static void bench_fusions(int B, int T, int C, floatX *a, floatX *b2, floatX *c2, floatX *w, floatX *bias, float *wf, float *bf) {
    const int BT = B * T;
    const double fl = 2.0 * BT * C * 4 * C, flp = 2.0 * BT * C * C;
    float ms = time_ms([&] { matmul_forward(c2, b2, w, bias, BT, C, 4 * C); gelu_forward(a, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fc + gelu_forward (2 kernels)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { matmul_forward_gelu(a, c2, b2, w, bias, BT, C, 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fc, GELU_AUX_BIAS epilogue", ms, fl / (ms * 1e9));
    ms = time_ms([&] { matmul_backward(c2, wf, bf, a, b2, w, BT, 4 * C, C); gelu_backward(c2, b2, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fcproj backward + gelu_backward", ms, 2 * fl / (ms * 1e9));
    ms = time_ms([&] { matmul_backward_dgelu(c2, wf, bf, a, b2, w, b2, BT, 4 * C, C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "fcproj backward, DGELU epilogue", ms, 2 * fl / (ms * 1e9));
    ms = time_ms([&] { matmul_forward(c2, b2, w, bias, BT, C, C); residual_forward(a, b2, c2, (long)BT * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attproj + residual_forward", ms, flp / (ms * 1e9));
    ms = time_ms([&] { matmul_forward_residual(a, b2, c2, w, bias, BT, C, C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attproj, residual as C (beta 1)", ms, flp / (ms * 1e9));
}

static void bench(int B, int T, int C, int NH, int Vp) {
    size_t BT = (size_t)B * T;
    printf("kernel benchmark, %s, B=%d T=%d C=%d NH=%d Vp=%d%s\n", prec_name(), B, T, C, NH, Vp, C == 768 ? " (GPT-2 124M's shapes)" : "");
    size_t big = BT * Vp;
    float *h = rand_host(BT * 4 * C, 1.0f);
    floatX *a = to_dev_x(h, BT * 4 * C), *b2 = to_dev_x(h, BT * 4 * C), *c2 = to_dev_x(h, BT * 4 * C);
    floatX *w = to_dev_x(h, (size_t)4 * C * C), *bias = to_dev_x(h, 4 * C);
    float *wf = to_dev_f(h, (size_t)4 * C * C), *bf = to_dev_f(h, 4 * C), *mean, *rstd, *lse, *losses;
    cudaCheck(cudaMalloc(&mean, BT * 4)); cudaCheck(cudaMalloc(&rstd, BT * 4));
    cudaCheck(cudaMalloc(&lse, (size_t)B * NH * T * 4)); cudaCheck(cudaMalloc(&losses, BT * 4));
    floatX *logits;
    cudaCheck(cudaMalloc(&logits, big * x_bytes));
    cudaCheck(cudaMemset(logits, 0, big * x_bytes));
    int *tok;
    cudaCheck(cudaMalloc(&tok, BT * 4));
    cudaCheck(cudaMemset(tok, 0, BT * 4));
    double xb = (double)x_bytes, fl;
    float ms;
#define GBS(bytes) ((bytes) / (ms * 1e6))
    ms = time_ms([&] { layernorm_forward(a, mean, rstd, b2, w, bias, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "layernorm_forward", ms, GBS(2 * BT * C * xb));
    ms = time_ms([&] { layernorm_backward(a, bf, bf, b2, c2, w, mean, rstd, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "layernorm_backward", ms, GBS(4 * BT * C * xb));
    fl = 2.0 * BT * C * 4 * C;
    ms = time_ms([&] { matmul_forward(a, b2, w, bias, (int)BT, C, 4 * C); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "matmul_forward fc (C -> 4C)", ms, fl / (ms * 1e9));
    for (int f = 1; f >= 0; f--) {  // the bias gradient in the matmul's epilogue or by column_sums (TRAIN_GPT_BGRAD)
        fuse_bgrad = f;
        ms = time_ms([&] { matmul_backward(c2, wf, bf, a, b2, w, (int)BT, C, 4 * C); });
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", f ? "matmul_backward fc (dbias BGRADB)" : "matmul_backward fc (column_sums)", ms,
               2 * fl / (ms * 1e9));
    }
    fuse_bgrad = 1;
    bench_fusions(B, T, C, a, b2, c2, w, bias, wf, bf);
    fl = 4.0 * B * NH * (double)T * T * (C / NH) / 2;
    ms = time_ms([&] { attention_forward(a, lse, b2, B, T, C, NH, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_forward (flash)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_backward(c2, a, b2, a, lse, B, T, C, NH, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_backward (flash)", ms, 2.5 * fl / (ms * 1e9));
    ms = time_ms([&] { gelu_forward(a, b2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "gelu_forward", ms, GBS(2 * BT * 4 * C * xb));
    ms = time_ms([&] { gelu_backward(a, b2, c2, (long)BT * 4 * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "gelu_backward", ms, GBS(3 * BT * 4 * C * xb));
    ms = time_ms([&] { residual_forward(a, b2, c2, (long)BT * C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "residual_forward", ms, GBS(3 * BT * C * xb));
    // staged: the row read once from global memory and written once; not: read twice (the bandwidth column counts
    // the bytes each moves)
    for (int st = 1; st >= 0; st--) {
        classifier_staged = st;
        ms = time_ms([&] { classifier_forward_backward(logits, losses, tok, (int)BT, Vp - 47, Vp, 1.0f); });
        printf("  %-34s %8.3f ms  %7.0f GB/s\n", st ? "classifier (row in shared memory)" : "classifier (row read twice)", ms,
               GBS((st ? 2 : 3) * big * xb));
    }
    classifier_staged = 1;
    fl = 2.0 * BT * C * Vp;
    floatX *wte;  // (Vp, C): larger than the 4C x C weight above
    cudaCheck(cudaMalloc(&wte, (size_t)Vp * C * x_bytes));
    cudaCheck(cudaMemset(wte, 0, (size_t)Vp * C * x_bytes));
    ms = time_ms([&] { matmul_forward(logits, b2, wte, NULL, (int)BT, C, Vp); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "matmul_forward lm head (C -> Vp)", ms, fl / (ms * 1e9));
    cudaCheck(cudaDeviceSynchronize());
}

// The Llama family's kernels at a d12-width shape (C = NH hd, KV key/value heads, H SwiGLU's hidden width), in the
// run's precision: ms and GB/s (the bytes each must move) or TFLOP/s (attention, causal).
static void bench_llama(int B, int T, int NH, int KV, int hd, int H) {
    const size_t BT = (size_t)B * T;
    const int C = NH * hd, R = (NH + 2 * KV) * hd;
    printf("Llama kernels, %s, B=%d T=%d C=%d NH=%d KV=%d hd=%d H=%d\n", prec_name(), B, T, C, NH, KV, hd, H);
    const size_t big = BT * (size_t)(2 * H > R ? 2 * H : R);
    float *h = rand_host(big, 1.0f);
    floatX *a = to_dev_x(h, big), *b = to_dev_x(h, big), *c = to_dev_x(h, big), *w = to_dev_x(h, C);
    float *rstd = zeros_dev_f(BT * (NH + KV)), *dw = zeros_dev_f(C), *dw2 = zeros_dev_f(hd), *lse = zeros_dev_f(BT * NH);
    float *ct = (float *)mallocCheck((size_t)T * hd / 2 * 4), *st = (float *)mallocCheck((size_t)T * hd / 2 * 4);
    host_rope_table(ct, st, T, hd);
    float *dct = to_dev_f(ct, (size_t)T * hd / 2), *dst = to_dev_f(st, (size_t)T * hd / 2);
    const double xb = (double)x_bytes;
    float ms;
#define GBS(bytes) ((bytes) / (ms * 1e6))
    ms = time_ms([&] { rmsnorm_forward(a, rstd, b, w, (int)BT, C, 1e-5f); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rmsnorm_forward", ms, GBS(2 * BT * C * xb));
    ms = time_ms([&] { rmsnorm_backward(a, dw, b, c, w, rstd, (int)BT, C); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rmsnorm_backward", ms, GBS(4 * BT * C * xb));
    ms = time_ms([&] { qknorm_forward(a, rstd, b, w, w, (int)BT, NH, KV, hd, 1e-6f); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_forward", ms, GBS(2 * BT * R * xb));
    ms = time_ms([&] { qknorm_backward(a, dw2, dw2, b, c, w, w, rstd, (int)BT, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "qknorm_backward", ms, GBS(3 * BT * R * xb));
    ms = time_ms([&] { rope_forward(a, dct, dst, B, T, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rope_forward (in place, q and k)", ms, GBS(2 * BT * (NH + KV) * hd * xb));
    ms = time_ms([&] { swiglu_forward(a, b, (int)BT, H); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "swiglu_forward", ms, GBS(3 * BT * H * xb));
    ms = time_ms([&] { swiglu_backward(a, c, b, (int)BT, H); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "swiglu_backward", ms, GBS(5 * BT * H * xb));
    // the block's four matmuls at their Llama shapes (no bias), forward and backward (dinp and the fp32 dweight):
    // beside GPT-2's fc rows above, where a Llama step's time goes
    float *hw = rand_host((size_t)2 * H * C, 1.0f);
    floatX *wm = to_dev_x(hw, (size_t)2 * H * C);
    float *wmf = zeros_dev_f((size_t)2 * H * C);
    const struct { const char *name; int in, out; } mms[] = {
        {"wqkv C->(NH+2KV)hd", C, R}, {"wo NHhd->C", C, C}, {"wfc C->2H up|gate", C, 2 * H}, {"wproj H->C", H, C}};
    for (const auto &m : mms) {
        const double mfl = 2.0 * BT * m.in * m.out;
        char what[64];
        ms = time_ms([&] { matmul_forward(c, b, wm, NULL, (int)BT, m.in, m.out); });
        snprintf(what, sizeof(what), "matmul_forward %s", m.name);
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", what, ms, mfl / (ms * 1e9));
        ms = time_ms([&] { matmul_backward(a, wmf, NULL, c, b, wm, (int)BT, m.in, m.out); });
        snprintf(what, sizeof(what), "matmul_backward %s", m.name);
        printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", what, ms, 2 * mfl / (ms * 1e9));
    }
    const double fl = 4.0 * B * NH * (double)T * T * hd / 2;
    ms = time_ms([&] { attention_gqa_forward(a, lse, b, B, T, NH, KV, hd, NULL, NULL, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_forward (flash)", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_gqa_backward(c, a, b, a, lse, B, T, NH, KV, hd, NULL, NULL, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_backward (flash)", ms, 2.5 * fl / (ms * 1e9));
    // RoPE in the kernels' loads (model.h without QK-norm) against the lines above plus the two rope passes
    ms = time_ms([&] { attention_gqa_forward(a, lse, b, B, T, NH, KV, hd, dct, dst, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_fwd + RoPE in loads", ms, fl / (ms * 1e9));
    ms = time_ms([&] { attention_gqa_backward(c, a, b, a, lse, B, T, NH, KV, hd, dct, dst, NULL); });
    printf("  %-34s %8.3f ms  %7.1f TFLOP/s\n", "attention_gqa_bwd + RoPE in loads", ms, 2.5 * fl / (ms * 1e9));
    ms = time_ms([&] { rope_backward(a, dct, dst, B, T, NH, KV, hd); });
    printf("  %-34s %8.3f ms  %7.0f GB/s\n", "rope_backward (in place, dq and dk)", ms, GBS(2 * BT * (NH + KV) * hd * xb));
#undef GBS
    cudaCheck(cudaDeviceSynchronize());
}
