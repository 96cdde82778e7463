// dev/cuda/kernels_update.cuh: kernels.cu's checks of the step's update and of the backend's own kernels (those the
// layers do not cover), against the CPU build's: bf16 stochastic rounding, the gradient norm's sums of squares, the
// gradient add and the conversions, AdamW in one launch over a table of segments with its working copies, the
// update's verdict on the device, and the rounding's bias over many updates. Part of kernels.cu's one translation
// unit (it uses kernels.cu's helpers: expect, rel_err, to_dev_x, ...), included there before main; not a header
// that stands alone.

// bf16 stochastic rounding keeps the mean: 4096 draws of a value between two bf16 neighbours
static void check_stochastic_rounding(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096;
    float *h = (float *)mallocCheck(n * 4), *back = (float *)mallocCheck(n * 4);
    float v = 1.0f + 0.3f * 0.0078125f;  // 30% of the way from 1 to the next bf16 (1 + 2^-7)
    for (size_t i = 0; i < n; i++) h[i] = v;
    float *d = to_dev_f(h, n);
    floatX *x;
    cudaCheck(cudaMalloc(&x, n * 2));
    double mean = 0.0;
    int distinct_ok = 1;
    for (int seed = 0; seed < 16; seed++) {
        backend_weights_from_master(x, d, n, 0, mix_seed(seed));
        from_dev_x(back, x, n);
        for (size_t i = 0; i < n; i++) {
            mean += back[i];
            if (back[i] != 1.0f && back[i] != 1.0078125f) distinct_ok = 0;
        }
    }
    mean /= 16.0 * n;
    double err = fabs(mean - v) / (v - 1.0);
    printf("%s bf16  stochastic rounding: only the two neighbours, mean %.7f vs %.7f (%.1f%% of the gap)\n",
           distinct_ok && err < 0.02 ? "PASS" : "FAIL", mean, v, 100 * err);
    distinct_ok && err < 0.02 ? passes++ : fails++;
    x_prec = PREC_FP32; x_bytes = 4;
}

// The backend's kernels that the model's kernels do not cover, against the CPU build's: the gradient norm's sum of
// squares (the same 64K chunks, each summed in double in another order: 64K roundings of 2^-53 bound the relative
// difference by ~1e-11; 1e-10), the gradient add (the same fp32 formula; AdamW: check_multi_adamw), and the conversions: fp16 working weights (round to nearest: exact) and a row of logits
// back to float in each precision (exact).
static void check_backend(void) {
    x_prec = PREC_FP32; x_bytes = 4;
    const size_t n = 3 * 65536 + 1234;  // three whole chunks and a ragged fourth
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n);
    // three buffers in one call (whole chunks and ragged ones), each against the CPU build's sum
    const float *xs[3] = {dg, dg + 1000, dg + 65536}, *hx[3] = {g, g + 1000, g + 65536};
    const size_t ns[3] = {n, 70000, 65536};
    double gs[3], cs[3], worst_ss = 0.0;
    backend_sum_squares_start(xs, ns, 3);
    backend_sum_squares_finish(gs, 3);
    cpu::backend_sum_squares_start(hx, ns, 3);
    cpu::backend_sum_squares_finish(cs, 3);
    for (int i = 0; i < 3; i++) worst_ss = fmax(worst_ss, fabs(gs[i] - cs[i]) / cs[i]);
    expect("backend_sum_squares_start/finish (gradient norm)", worst_ss, 1e-10);
    float *back = (float *)mallocCheck(n * 4);
    backend_add(dp, dg, n);
    cpu::backend_add(p, g, n);
    from_dev_f(back, dp, n);
    expect("backend_add", rel_err(back, p, n), 1e-6);
    x_prec = PREC_FP16; x_bytes = 2;
    floatX *w;
    cudaCheck(cudaMalloc(&w, n * 2));
    backend_weights_from_master(w, dg, n, 0, 0);
    from_dev_x(back, w, n);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(back[i] - __half2float(__float2half_rn(g[i]))));
    expect("fp16 working weights (round to nearest)", worst, 0.0);
    const int precs[3] = {PREC_FP32, PREC_BF16, PREC_FP16};
    for (int i = 0; i < 3; i++) {
        x_prec = precs[i]; x_bytes = x_prec == PREC_FP32 ? 4 : 2;
        const int Vp = 1000;
        float *row = rand_host(Vp, 4.0f);
        floatX *drow = to_dev_x(row, Vp);
        const float *got = backend_logits_row(drow, Vp);
        expect("backend_logits_row (a row of logits to the host)", rel_err(got, row, Vp), 0.0);
    }
    x_prec = PREC_FP32; x_bytes = 4;
}

// The step's update in one launch (backend_adamw_plan/run) against the CPU build's, over three segments of one
// unit: 16-byte aligned and decayed, misaligned (the one-by-one path), ragged; the working copy written beside it
// is the one backend_weights_from_master makes from the updated master at the unit's seed, bit for bit.
static void check_multi_adamw(int prec) {
    x_prec = prec; x_bytes = prec == PREC_FP32 ? 4 : 2;
    const size_t n = 70001;
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f), *m = rand_host(n, 0.1f), *v = rand_host(n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n), *dm = to_dev_f(m, n), *dv = to_dev_f(v, n);
    floatX *w = NULL, *ref = NULL;
    if (prec != PREC_FP32) { cudaCheck(cudaMalloc(&w, n * 2)); cudaCheck(cudaMalloc(&ref, n * 2)); }
    const size_t lo[3] = {0, 4097, 40000}, cnt[3] = {4097, 35903, 30001};  // the second starts misaligned
    AdamWSegment segs[3], hsegs[3];
    for (int k = 0; k < 3; k++) {
        size_t a = lo[k];
        segs[k] = (AdamWSegment){dp + a, dg + a, dm + a, dv + a, cnt[k], k != 1, w ? (void *)((char *)w + a * 2) : NULL, a, 5};
        hsegs[k] = (AdamWSegment){p + a, g + a, m + a, v + a, cnt[k], k != 1, NULL, a, 5};
    }
    void *plan = backend_adamw_plan(segs, 3), *hplan = cpu::backend_adamw_plan(hsegs, 3);
    AdamWArgs args = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 7};
    backend_adamw_run(plan, &args, 0);
    cpu::backend_adamw_run(hplan, &args, 0);
    float *back = (float *)mallocCheck(n * 4), *back2 = (float *)mallocCheck(n * 4);
    char what[96];
    from_dev_f(back, dp, n);
    snprintf(what, sizeof(what), "backend_adamw_run (3 segments, one launch, %s) parameters", prec_name());
    expect(what, rel_err(back, p, n), 1e-6);
    from_dev_f(back, dm, n);
    expect("backend_adamw_run first moments", rel_err(back, m, n), 1e-6);
    from_dev_f(back, dv, n);
    expect("backend_adamw_run second moments", rel_err(back, v, n), 1e-6);
    if (w) {
        backend_weights_from_master(ref, dp, n, 0, mix_seed(7ull * 1000003u + 5));  // model.h's seed of unit 5 at version 7
        from_dev_x(back, w, n);
        from_dev_x(back2, ref, n);
        double worst = 0.0;
        for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(back[i] - back2[i]));
        snprintf(what, sizeof(what), "backend_adamw_run's %s working copy vs backend_weights_from_master (bits)", prec_name());
        expect(what, worst, 0.0);
        cudaCheck(cudaFree(w)); cudaCheck(cudaFree(ref));
    }
    backend_adamw_plan_free(plan);
    cpu::backend_adamw_plan_free(hplan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    free(g); free(p); free(m); free(v); free(back); free(back2);
    x_prec = PREC_FP32; x_bytes = 4;
}

// The device's verdict (backend_norm_local, backend_update_verdict) against the host's arithmetic on the CPU build's
// sums: the scale bit for bit with clipping and without, with one rank's sum and two ranks' (the same sum twice, in
// slots 0 and 1), and a non-finite gradient skips the update (the parameters keep their bits).
static void check_verdict(void) {
    x_prec = PREC_FP32; x_bytes = 4;
    const size_t n = 2 * 65536 + 77;
    float *g = rand_host(n, 1.0f), *p = rand_host(n, 1.0f), *z = (float *)callocCheck(n, 4);
    float *dg = to_dev_f(g, n), *dp = to_dev_f(p, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    const float *xs[2] = {dg, dg + 100}, *hx[2] = {g, g + 100};
    const size_t ns[2] = {n, n - 100};
    double cs[2];
    cpu::backend_sum_squares_start(hx, ns, 2);
    cpu::backend_sum_squares_finish(cs, 2);
    const float loss_scale = 1024.0f, clips[2] = {0.0f, 1e-3f};
    float *slots;
    cudaCheck(cudaMalloc(&slots, 4 * sizeof(float)));
    for (int k = 0; k < 4; k++) {
        int ranks = 1 + k / 2;
        backend_sum_squares_start(xs, ns, 2);
        backend_norm_local(slots);
        if (ranks == 2) backend_norm_local(slots + 2);
        backend_update_verdict(slots, ranks, loss_scale, clips[k % 2]);
        AdamWVerdict got;
        cudaCheck(cudaMemcpy(&got, verdict_d, sizeof(got), cudaMemcpyDeviceToHost));
        double local = cs[0] + cs[1], sum = ranks == 2 ? 0.0 + local + local : local;  // zero.h's order
        float norm = (float)sqrt(sum) / loss_scale;  // trainer.h's arithmetic
        float clip = clips[k % 2], want = (clip > 0.0f && norm > clip ? clip / (norm + 1e-6f) : 1.0f) / loss_scale;
        int ok = got.scale == want && !got.skip;
        printf("%s backend_update_verdict (%d rank%s, clip %g): scale %.9g vs the host's %.9g, skip %d\n", ok ? "PASS" : "FAIL",
               ranks, ranks == 1 ? "" : "s", clip, got.scale, want, got.skip);
        ok ? passes++ : fails++;
    }
    g[12345] = INFINITY;
    cudaCheck(cudaMemcpy(dg, g, n * 4, cudaMemcpyHostToDevice));
    backend_sum_squares_start(xs, ns, 2);
    backend_norm_local(slots);
    backend_update_verdict(slots, 1, loss_scale, 1.0f);
    AdamWSegment seg = {dp, dg, dm, dv, n, 1, NULL, 0, 0};
    void *plan = backend_adamw_plan(&seg, 1);
    AdamWArgs args = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 123.0f, 1};
    backend_adamw_run(plan, &args, 1);
    float *back = (float *)mallocCheck(n * 4);
    from_dev_f(back, dp, n);
    size_t changed = 0;  // bits, not a relative error: a NaN would pass that
    for (size_t i = 0; i < n; i++) changed += memcmp(&back[i], &p[i], 4) != 0;
    expect("a non-finite gradient: the update skips itself on the device (parameters changed)", (double)changed, 0.0);
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    cudaCheck(cudaFree(slots));
    free(g); free(p); free(z); free(back);
}

// The bf16 working copy stays an unbiased rounding of the fp32 master over many small updates: 4096 equal
// parameters, 64 AdamW updates of about 1e-4 each (an eightieth of bf16's gap at 1): after every update the
// copies' mean must lie within 4 standard errors of the master's (their spread over the 4096 is the standard
// error's estimate). Round to nearest puts every copy on the same side, a whole bias with no spread: it fails.
static void check_unbiased_updates(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096;
    const int K = 64;
    float *h = (float *)mallocCheck(n * 4), *z = (float *)callocCheck(n, 4), *back = (float *)mallocCheck(n * 4);
    for (size_t i = 0; i < n; i++) h[i] = 1.0f + 0.3f * 0.0078125f;
    float *dp = to_dev_f(h, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    for (size_t i = 0; i < n; i++) h[i] = 1.0f;
    float *dg = to_dev_f(h, n);  // a constant gradient: every update moves the master down by about lr
    floatX *w;
    cudaCheck(cudaMalloc(&w, n * 2));
    AdamWSegment seg = {dp, dg, dm, dv, n, 0, w, 0, 3};
    void *plan = backend_adamw_plan(&seg, 1);
    int outside = 0;
    double worst = 0.0;
    for (int t = 1; t <= K; t++) {
        AdamWArgs args = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, t};
        backend_adamw_run(plan, &args, 0);
        from_dev_f(h, dp, n);
        from_dev_x(back, w, n);
        double mw = 0.0, mp = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++) { mw += back[i]; mp += h[i]; }
        mw /= n; mp /= n;
        for (size_t i = 0; i < n; i++) { double d = back[i] - h[i] - (mw - mp); var += d * d; }
        double se = sqrt(var / (n - 1) / n), zsc = se > 0 ? fabs(mw - mp) / se : (mw == mp ? 0.0 : INFINITY);
        worst = fmax(worst, zsc);
        if (zsc > 4.0) outside++;
    }
    int ok = outside == 0;
    printf("%s bf16 working copy over %d small updates: its mean within 4 standard errors of the master's after every "
           "update (worst %.2f)\n", ok ? "PASS" : "FAIL", K, worst);
    ok ? passes++ : fails++;
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv)); cudaCheck(cudaFree(w));
    free(h); free(z); free(back);
    x_prec = PREC_FP32; x_bytes = 4;
}

// Stochastic rounding per element (issue 35): a fresh draw at every version for every element, not only a mean
// that is right over the elements (check_unbiased_updates: a draw fixed per element, the same at every update,
// passes that). The step's update as zero.h runs it, one plan over two segments of unit 4 (16-byte aligned, and
// misaligned: the one-by-one path), args.t the update count 1, 2, .., K as trainer.h advances it, over n parameters
// of random sign and size in [0.5, 4), each moved by the same small update at every step (a constant gradient, so
// Adam's step is lr: 256 x 4e-6 is an eighth of bf16's gap at 1, and an element's place between its two bf16
// neighbours hardly moves, as in late training); beside it, the copy model.h makes at stages 1-3, on load and on
// resume (backend_weights_from_master at model.h's seed of the unit at that version). The error of a working
// weight, e = (|w| - |p|) / (the gap between p's two bf16 neighbours), in ulps (the draw carries into the magnitude,
// so a bias shows in |w| whatever the sign; a signed error cancels between the signs): with 16 fresh uniform bits a
// draw, w is one of the two neighbours and e has mean 0 exactly, lies in an interval of width 1, and the draws are
// independent.
// Hoeffding: a mean of N such draws is beyond eps with probability <= 2 exp(-2 N eps^2); the bounds below put
// 2 N eps^2 >= 18.8, so each (element, version, overall) misses with probability <= 1.3e-8 and all 2 x 4353 of them
// together with < 3e-5 (the inputs are fixed, so the verdict is too):
//   per element, over K = 256 versions:        eps 0.2 ulp   (2 K eps^2 = 20.5; its standard error <= 1/32)
//   per version, over the n = 4096 elements:   eps 0.05 ulp  (20.5)
//   overall, over the n K = 2^20 draws:        eps 0.003 ulp (18.9)
// A draw fixed per element (the seed not depending on the version) leaves each element's bias at whichever of -f
// and 1 - f its draw picked (f its place between the neighbours): up to a whole ulp. The same bits for every
// element shift a version's mean over elements by u - 1/2 (u that version's draw); truncation is -f everywhere.
static void check_rounding_per_element(void) {
    x_prec = PREC_BF16; x_bytes = 2;
    const size_t n = 4096, split = 2049;  // the second segment starts misaligned
    const int K = 256, unit = 4;
    uint64_t rng = 35;
    float *p = (float *)mallocCheck(n * 4), *g = (float *)mallocCheck(n * 4), *z = (float *)callocCheck(n, 4);
    for (size_t i = 0; i < n; i++) {
        float sign = random_f32(&rng) < 0.5f ? -1.0f : 1.0f;
        p[i] = sign * exp2f(-1.0f + 3.0f * random_f32(&rng));         // |p| in [0.5, 4)
        g[i] = (random_f32(&rng) < 0.5f ? -1.0f : 1.0f) * (0.5f + random_f32(&rng));
    }
    float *dp = to_dev_f(p, n), *dg = to_dev_f(g, n), *dm = to_dev_f(z, n), *dv = to_dev_f(z, n);
    floatX *w[2];
    for (int k = 0; k < 2; k++) cudaCheck(cudaMalloc(&w[k], n * 2 + 16));
    AdamWSegment segs[2] = {{dp, dg, dm, dv, split, 0, (void *)w[0], 0, unit},
                            {dp + split, dg + split, dm + split, dv + split, n - split, 0, (void *)((bf16 *)w[0] + split), split, unit}};
    void *plan = backend_adamw_plan(segs, 2);
    double *sum_el = (double *)callocCheck(2 * n, sizeof(double)), worst_ver[2] = {0.0, 0.0}, total[2] = {0.0, 0.0};
    size_t off_grid[2] = {0, 0};
    float *back = (float *)mallocCheck(n * 4);
    for (int t = 1; t <= K; t++) {
        AdamWArgs args = {4e-6f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, t};
        backend_adamw_run(plan, &args, 0);
        backend_weights_from_master(w[1], dp, n, 0, mix_seed((uint64_t)t * 1000003u + unit));  // model.h's seed
        from_dev_f(p, dp, n);
        for (int k = 0; k < 2; k++) {
            from_dev_x(back, w[k], n);
            double ver = 0.0;
            for (size_t i = 0; i < n; i++) {
                uint32_t bits;
                memcpy(&bits, &p[i], 4);
                uint32_t lo_bits = bits & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
                float lo, hi;
                memcpy(&lo, &lo_bits, 4);
                memcpy(&hi, &hi_bits, 4);
                if (back[i] != lo && back[i] != hi) off_grid[k]++;
                double e = (fabs((double)back[i]) - fabs((double)p[i])) / fabs((double)hi - lo);  // up in magnitude: > 0
                sum_el[k * n + i] += e;
                ver += e;
            }
            worst_ver[k] = fmax(worst_ver[k], fabs(ver / n));
            total[k] += ver;
        }
    }
    const char *path[2] = {"backend_adamw_run (fused)", "backend_weights_from_master"};
    for (int k = 0; k < 2; k++) {
        double worst_el = 0.0, ms = 0.0;
        for (size_t i = 0; i < n; i++) {
            double me = sum_el[k * n + i] / K;
            worst_el = fmax(worst_el, fabs(me));
            ms += me * me;
        }
        double overall = total[k] / ((double)n * K);
        int ok = worst_el <= 0.2 && off_grid[k] == 0;
        printf("%s bf16 %s, %d versions: each element's mean within 0.2 ulp of its master's: worst %.4f ulp, rms %.4f ulp "
               "(%zu draws not a neighbour)\n", ok ? "PASS" : "FAIL", path[k], K, worst_el, sqrt(ms / n), off_grid[k]);
        ok ? passes++ : fails++;
        ok = worst_ver[k] <= 0.05;
        printf("%s bf16 %s: each version's mean over %zu elements within 0.05 ulp: worst %.4f ulp\n", ok ? "PASS" : "FAIL",
               path[k], n, worst_ver[k]);
        ok ? passes++ : fails++;
        ok = fabs(overall) <= 0.003;
        printf("%s bf16 %s: the mean over all %zu draws within 0.003 ulp: %+.5f ulp\n", ok ? "PASS" : "FAIL", path[k],
               n * K, overall);
        ok ? passes++ : fails++;
    }
    backend_adamw_plan_free(plan);
    cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(dm)); cudaCheck(cudaFree(dv));
    cudaCheck(cudaFree(w[0])); cudaCheck(cudaFree(w[1]));
    free(p); free(g); free(z); free(back); free(sum_el);
    x_prec = PREC_FP32; x_bytes = 4;
}

// Muon (cuda/muon.cuh) against the CPU build's (cpu/muon_host.h): the momentum, with Nesterov and without, and the
// step (fp32, the same formulas: 1e-6; once); Newton-Schulz (5 steps) on random fp32 matrices, tall (transposed
// inside: 100 x 36, the transposes' 32 x 32 tiles ragged), wide (36 x 100) and square (48 x 48), in the run's
// precision against the fp32 reference, relative to the result's largest value. fp32: the products' sums in another
// order (the emulator measures 3.5e-6; 1e-5). bf16 and fp16 round X, A, B = b A + c A A and a X + B X to 16 bits
// every step as torch's bf16 Newton-Schulz does: the emulator measures 3.7e-2 (bf16) and 3.7e-3 (fp16); bounds 8e-2
// and 1e-2. Its own random numbers, so the bounds hold for the same matrices in `check muon` and the full check.
static void check_muon(int prec) {
    uint64_t saved = rng_state;
    rng_state = 4242;
    x_prec = PREC_FP32; x_bytes = 4;
    const size_t n = 5000;
    float *g = rand_host(n, 1.0f), *b = rand_host(n, 0.1f), *p = rand_host(n, 1.0f);
    float *u = (float *)callocCheck(n, 4), *back = (float *)mallocCheck(n * 4);
    float *dg = to_dev_f(g, n), *db = to_dev_f(b, n), *dp = to_dev_f(p, n), *du = to_dev_f(u, n);
    char what[96];
    for (int nesterov = 1; nesterov >= 0 && prec == PREC_FP32; nesterov--) {
        backend_muon_momentum(db, du, dg, n, 0.95f, 0.5f, nesterov, 0);
        muon_momentum_host(b, u, g, n, 0.95f, 0.5f, nesterov);
        from_dev_f(back, db, n);
        snprintf(what, sizeof(what), "backend_muon_momentum%s: buffer", nesterov ? " (Nesterov)" : "");
        expect(what, rel_err(back, b, n), 1e-6);
        from_dev_f(back, du, n);
        snprintf(what, sizeof(what), "backend_muon_momentum%s: update", nesterov ? " (Nesterov)" : "");
        expect(what, rel_err(back, u, n), 1e-6);
    }
    if (prec == PREC_FP32) {
        backend_muon_apply(dp, du, n, 0.999f, 0.01f, 0);
        muon_apply_host(p, u, n, 0.999f, 0.01f);
        from_dev_f(back, dp, n);
        expect("backend_muon_apply", rel_err(back, p, n), 1e-6);
    }
    const int shapes[3][2] = {{100, 36}, {36, 100}, {48, 48}};
    for (int s = 0; s < 3; s++) {
        int rows = shapes[s][0], cols = shapes[s][1], m = rows < cols ? rows : cols, k = rows < cols ? cols : rows;
        size_t len = (size_t)rows * cols, ws = 2 * (size_t)m * k + 2 * (size_t)m * m;  // muon.h's muon_ns_workspace
        x_prec = PREC_FP32; x_bytes = 4;
        float *x = rand_host(len, 1.0f), *work = (float *)mallocCheck(ws * 4), *got = (float *)mallocCheck(len * 4);
        float *dx = to_dev_f(x, len), *dwork;
        cudaCheck(cudaMalloc(&dwork, ws * 4));
        x_prec = prec; x_bytes = prec == PREC_FP32 ? 4 : 2;
        backend_muon_orthogonalize(dx, rows, cols, 5, dwork, 0);
        muon_orthogonalize_host(x, rows, cols, 5, work);
        from_dev_f(got, dx, len);
        snprintf(what, sizeof(what), "backend_muon_orthogonalize %dx%d (%s)", rows, cols,
                 rows > cols ? "tall" : rows < cols ? "wide" : "square");
        expect(what, rel_err(got, x, len), prec == PREC_BF16 ? 8e-2 : prec == PREC_FP16 ? 1e-2 : 1e-5);
        cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(dwork));
        free(x); free(work); free(got);
    }
    cudaCheck(cudaFree(dg)); cudaCheck(cudaFree(db)); cudaCheck(cudaFree(dp)); cudaCheck(cudaFree(du));
    free(g); free(b); free(p); free(u); free(back);
    x_prec = PREC_FP32; x_bytes = 4;
    rng_state = saved;
}
