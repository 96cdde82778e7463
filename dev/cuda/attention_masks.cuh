// dev/cuda/attention_masks.cuh: dev/cuda/attention.cu's checks of the masks (issue 49, arch/attn_mask.h): causal,
// document, window and document + window, against the float64 reference with the same mask (attention_ref.h's
// attn_ref_first, written out independently); the forward (fp32 and 16-bit), the fp32 backward and every instantiation
// of the KV-stationary 16-bit backward (cuda/attention_bwd_kv.cuh), each run twice for the same bits; the tiles each
// kernel visits (its ATTN_COUNT_TILE, built in by attention.cu's ATTN_COUNT_TILES) equal the tiles
// attn_mask_tile_empty leaves, so the work is the visible area; and, causal with 64-key blocks, the kv kernel's dQ
// the fused kernel's bits (the same products summed in the same descending order) and its dK and dV the default's.
// Included by dev/cuda/attention.cu after its helpers (AttnShape, AttnDev, attn_dev_alloc, check_alt's conventions).
#pragma once

// FNV-1a of n bytes on from h: the bits a line prints, which test_cuda_emu.sh compares across block orders.
static uint32_t attn_fnv(uint32_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
    return h;
}

// The device's count of visited tiles, read and reset.
static unsigned long long attn_tiles_take(void) {
    unsigned long long v = 0, z = 0;
    cudaCheck(cudaDeviceSynchronize());
#ifdef __CUDACC__
    cudaCheck(cudaMemcpyFromSymbol(&v, attn_tiles_visited, sizeof(v)));
    cudaCheck(cudaMemcpyToSymbol(attn_tiles_visited, &z, sizeof(z)));
#else  // the emulator: device globals are the host's
    v = attn_tiles_visited;
    attn_tiles_visited = z;
#endif
    return v;
}

// Tiles of qrows x krows (key tiles that exist: k0 < T) that attn_mask_tile_empty leaves, over the batch rows, times
// `heads`.
static unsigned long long attn_tiles_expected(const AttnMask *m, int B, int T, int qrows, int krows, int heads) {
    unsigned long long n = 0;
    for (int b = 0; b < B; b++)
        for (int q0 = 0; q0 < T; q0 += qrows)
            for (int k0 = 0; k0 < T; k0 += krows) {
                const int q1 = q0 + qrows < T ? q0 + qrows : T, k1 = k0 + krows < T ? k0 + krows : T;
                n += !attn_mask_tile_empty(m, b, T, q0, q1, k0, k1);
            }
    return n * heads;
}

// Documents of a packed row: starts drawn from the seed (lengths 1 to T/3, a one-token document among them, one start
// on a 64-row tile edge), a different layout per batch row.
static std::vector<int> attn_mask_docs(int B, int T, uint64_t seed) {
    std::vector<int> ds((size_t)B * T);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 99u;
    for (int b = 0; b < B; b++) {
        int start = 0, next = 1 + (int)((attn_rand_uniform(&s) + 1.0f) * 0.5f * (T / 3));
        for (int t = 0; t < T; t++) {
            if (t == next || t == 64 || t == 65) {  // 64: a tile edge; 65: a document of one token (64)
                start = t;
                if (t == next) next = t + 1 + (int)((attn_rand_uniform(&s) + 1.0f) * 0.5f * (T / 3));
            }
            ds[(size_t)b * T + t] = start;
        }
    }
    return ds;
}

// The forward under the mask, twice: out and lse against the reference, the same bits, the tiles visited. 1: failed.
template <typename floatT>
static int mask_check_forward(const AttnDev<floatT> &dev, const AttnShape &sh, const AttnMask &hm, const AttnMask &dm,
                              const char *mname, const std::vector<float> &out_ref, const std::vector<float> &lse_ref) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH, KV = sh.KV > 0 ? sh.KV : NH, W = hm.window;
    constexpr bool TC = sizeof(floatT) == 2;
    const long nout = (long)B * T * C, nlse = (long)B * NH * T;
    const AttnTol tol = attn_tolerance(sizeof(floatT), std::is_same<floatT, __nv_bfloat16>::value);
    // forward, twice
    attn_tiles_take();
    flash_attention_forward(dev.out, dev.lse, dev.qkv, B, T, C, NH, 0, KV, nullptr, nullptr, &dm);
    const unsigned long long fwd_tiles = attn_tiles_take();
    std::vector<floatT> out_t(nout), out2_t(nout);
    std::vector<float> lse_g(nlse), lse2_g(nlse), out_g(nout);
    cudaCheck(cudaMemcpy(out_t.data(), dev.out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse_g.data(), dev.lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    flash_attention_forward(dev.out, dev.lse, dev.qkv, B, T, C, NH, 0, KV, nullptr, nullptr, &dm);
    attn_tiles_take();
    cudaCheck(cudaMemcpy(out2_t.data(), dev.out, nout * sizeof(floatT), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(lse2_g.data(), dev.lse, nlse * sizeof(float), cudaMemcpyDeviceToHost));
    for (long i = 0; i < nout; i++) out_g[i] = attn_to_float(out_t[i]);
    const double e_out = attn_rel_err(out_g.data(), out_ref.data(), (long)B * T, C, 0, C);
    const double e_lse = attn_rel_err(lse_g.data(), lse_ref.data(), 1, nlse, 0, nlse);
    const bool fdet = memcmp(out_t.data(), out2_t.data(), nout * sizeof(floatT)) == 0 &&
                      memcmp(lse_g.data(), lse2_g.data(), nlse * sizeof(float)) == 0;
    const unsigned long long fwd_want = attn_tiles_expected(&hm, B, T, TC ? ATT_TC_BQ : ATT_BQ, 64, NH);
    const bool fok = e_out <= tol.out && e_lse <= tol.lse && fdet && fwd_tiles == fwd_want;
    printf("%s %-5s B=%d T=%4d C=%3d NH=%2d KV=%d hs=%3d %-10s W=%-3d | forward: rel err out %.2e lse %.2e (tol %.1e/%.1e) | "
           "deterministic %s, bits %08x | tiles %llu of %llu visible\n", fok ? "PASS" : "FAIL", attn_type_name<floatT>(), B, T,
           C, NH, KV, hs, mname, W, e_out, e_lse, tol.out, tol.lse, fdet ? "yes" : "NO",
           attn_fnv(attn_fnv(2166136261u, out_t.data(), nout * sizeof(floatT)), lse_g.data(), nlse * sizeof(float)),
           fwd_tiles, fwd_want);

    return !fok;
}

// One shape under one mask (window W, documents or not) in floatT: PASS/FAIL lines for the forward, the backward
// (fp32: its kernels; 16-bit: each kv instantiation). Returns the failures.
// cfgs: the KV-stationary backward's instantiations to run (bit c: attn_kv_configs[c]; 16-bit only)
template <typename floatT>
static int run_mask_check(const AttnShape &sh, int W, bool docs, uint64_t seed, unsigned cfgs) {
    const int B = sh.B, T = sh.T, C = sh.C, NH = sh.NH, hs = C / NH, KV = sh.KV > 0 ? sh.KV : NH;
    constexpr bool TC = sizeof(floatT) == 2;
    const long kvw = (long)KV * hs, C3 = C + 2 * kvw, nqkv = (long)B * T * C3, nout = (long)B * T * C, nlse = (long)B * NH * T;
    std::vector<float> qkv(nqkv), dout(nout);
    attn_make_inputs(qkv.data(), dout.data(), B, T, C, 2.0f, seed, kvw);
    std::vector<floatT> qkv_t(nqkv), dout_t(nout);
    for (long i = 0; i < nqkv; i++) { qkv_t[i] = attn_from_float<floatT>(qkv[i]); qkv[i] = attn_to_float(qkv_t[i]); }
    for (long i = 0; i < nout; i++) { dout_t[i] = attn_from_float<floatT>(dout[i]); dout[i] = attn_to_float(dout_t[i]); }
    std::vector<int> ds = docs ? attn_mask_docs(B, T, seed) : std::vector<int>();
    std::vector<float> out_ref(nout), lse_ref(nlse), dqkv_ref(nqkv);
    attn_ref_forward(out_ref.data(), lse_ref.data(), qkv.data(), B, T, C, NH, KV, W, docs ? ds.data() : nullptr);
    attn_ref_backward(dqkv_ref.data(), dout.data(), qkv.data(), B, T, C, NH, KV, W, docs ? ds.data() : nullptr);
    int *d_ds = nullptr;
    if (docs) {
        cudaCheck(cudaMalloc(&d_ds, ds.size() * sizeof(int)));
        cudaCheck(cudaMemcpy(d_ds, ds.data(), ds.size() * sizeof(int), cudaMemcpyHostToDevice));
    }
    const AttnMask hm = {W, docs ? ds.data() : nullptr}, dm = {W, d_ds};
    const char *mname = W > 0 && docs ? "doc+window" : W > 0 ? "window" : docs ? "document" : "causal";
    const AttnDev<floatT> dev = attn_dev_alloc(qkv_t, dout_t, B, T, C, NH);
    const AttnTol tol = attn_tolerance(sizeof(floatT), std::is_same<floatT, __nv_bfloat16>::value);
    int failures = 0;

    failures += mask_check_forward(dev, sh, hm, dm, mname, out_ref, lse_ref);

    // backward: fp32's kernels, or each kv instantiation; twice, into buffers poisoned differently
    const size_t nscratch = attn_check_scratch_floats(sizeof(floatT), B, T, C, NH);
    std::vector<floatT> a(nqkv), b2(nqkv), fused_t(nqkv), dflt_t(nqkv);
    if (TC && !docs && W == 0) {  // the causal references: the fused kernel's dQ bits, the default kernel's dK and dV
        flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                                 nullptr, ATT_BWD_FUSED);
        cudaCheck(cudaMemcpy(fused_t.data(), dev.dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
        flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                                 nullptr, ATT_BWD_2PASS);
        cudaCheck(cudaMemcpy(dflt_t.data(), dev.dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
    }
    for (int cfg = 0; cfg < (TC ? ATT_KV_NCONFIGS : 1); cfg++) {
        if (TC && !(cfgs >> cfg & 1)) continue;
        attn_tiles_take();
        cudaCheck(cudaMemset(dev.scratch, 0xff, nscratch * sizeof(float)));
        cudaCheck(cudaMemset(dev.dqkv, 0xff, nqkv * sizeof(floatT)));
        cudaCheck(cudaMemset(dev.dqkv2, 0x00, nqkv * sizeof(floatT)));
        flash_attention_backward(dev.dqkv, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                                 nullptr, TC ? ATT_BWD_KV : -1, cfg, &dm);
        const unsigned long long bwd_tiles = attn_tiles_take();
        flash_attention_backward(dev.dqkv2, dev.scratch, dev.dout, dev.qkv, dev.out, dev.lse, B, T, C, NH, 0, KV, nullptr,
                                 nullptr, TC ? ATT_BWD_KV : -1, cfg, &dm);
        attn_tiles_take();
        cudaCheck(cudaMemcpy(a.data(), dev.dqkv, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
        cudaCheck(cudaMemcpy(b2.data(), dev.dqkv2, nqkv * sizeof(floatT), cudaMemcpyDeviceToHost));
        const bool det = memcmp(a.data(), b2.data(), nqkv * sizeof(floatT)) == 0;
        std::vector<float> g(nqkv);
        for (long i = 0; i < nqkv; i++) g[i] = attn_to_float(a[i]);
        const double e_dq = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, 0, C);
        const double e_dk = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, C, kvw);
        const double e_dv = attn_rel_err(g.data(), dqkv_ref.data(), (long)B * T, C3, C + kvw, kvw);
        const int bn = TC ? attn_kv_configs[cfg].bn : 64;
        // fp32: the dK/dV kernel's (64 x 64, per query head) and the dQ kernel's (the same); kv: 64 queries x bn keys
        const unsigned long long bwd_want = attn_tiles_expected(&hm, B, T, 64, bn, NH) * (TC ? 1 : 2);
        char cmp[96] = "";
        bool same = true;
        if (TC && !docs && W == 0) {  // causal: the fused kernel's dQ (64-key blocks), the default's dK and dV
            bool dq_same = true, kv_same = true;
            for (long r = 0; r < (long)B * T; r++) {
                dq_same &= memcmp(&a[r * C3], &fused_t[r * C3], C * sizeof(floatT)) == 0;
                kv_same &= memcmp(&a[r * C3 + C], &dflt_t[r * C3 + C], 2 * kvw * sizeof(floatT)) == 0;
            }
            same = kv_same && (bn != 64 || dq_same);
            snprintf(cmp, sizeof(cmp), " | dk, dv %s the default's bits%s", kv_same ? "=" : "DIFFER from",
                     bn != 64 ? "" : dq_same ? ", dq = the fused kernel's" : ", dq DIFFERS from the fused kernel's");
        }
        const bool ok = e_dq <= tol.dqkv && e_dk <= tol.dqkv && e_dv <= tol.dqkv && det && bwd_tiles == bwd_want && same;
        failures += !ok;
        char name[48] = "backward";
        if (TC) snprintf(name, sizeof(name), "kv backward %d (%d keys, %d stages)", cfg, bn, attn_kv_configs[cfg].stages);
        printf("%s %-5s B=%d T=%4d C=%3d NH=%2d KV=%d hs=%3d %-10s W=%-3d | %s: rel err dq %.2e dk %.2e dv %.2e (tol %.1e) | "
               "deterministic %s, bits %08x | tiles %llu of %llu visible%s\n", ok ? "PASS" : "FAIL", attn_type_name<floatT>(), B,
               T, C, NH, KV, hs, mname, W, name, e_dq, e_dk, e_dv, tol.dqkv, det ? "yes" : "NO",
               attn_fnv(2166136261u, a.data(), nqkv * sizeof(floatT)), bwd_tiles, bwd_want, cmp);
    }
    attn_dev_free(dev);
    if (d_ds) cudaCheck(cudaFree(d_ds));
    return failures;
}

// The mask checks: every mask at head sizes 64 (multi-head) and 128 (multi-query), causal and document + window at
// GQA 4:1 (hs 64), in fp32, bf16 and fp16. T spans 2 key blocks of 128 with a ragged end (3 query tiles of 64);
// windows of 40 (inside a tile) and 70 (across one).
static int run_mask_checks(uint64_t seed, bool orders) {
    const AttnShape shapes[] = {{2, 150, 128, 2}, {1, 130, 256, 2, 1}, {1, 150, 512, 8, 2}};
    const struct { int W; bool docs; } masks[] = {{0, false}, {0, true}, {40, false}, {70, true}};
    int failures = 0;
    for (int s = 0; s < 3; s++) {
        const AttnShape &sh = shapes[s];
        for (int mi = 0; mi < 4; mi++) {
            const int W = masks[mi].W;
            const bool docs = masks[mi].docs;
            if (sh.KV > 1 && (W > 0) != docs) continue;  // GQA 4:1: causal and document + window
            // the KV backward's four instantiations split between the 16-bit types, rotating with the shape and the
            // mask: bf16 runs c and c + 2, fp16 the other two, so at each shape each type meets every instantiation
            // (one template over the type) and each (shape, mask) sees all four, in half the runs
            const int c = (s + mi) % ATT_KV_NCONFIGS;
            const unsigned bf16_cfgs = 1u << c | 1u << (c + 2) % ATT_KV_NCONFIGS, half_cfgs = 0xfu & ~bf16_cfgs;
            // `check orders`: the runs other block orders repeat (test_cuda_emu.sh): the GQA shape's, bf16, whose two
            // masks cover the four instantiations; fp32's kernels and the forward have no blocks that wait on others
            if (orders && s != 2) continue;
            if (!orders) failures += run_mask_check<float>(sh, W, docs, seed, 0);
            failures += run_mask_check<__nv_bfloat16>(sh, W, docs, seed, bf16_cfgs);
            if (!orders) failures += run_mask_check<__half>(sh, W, docs, seed, half_cfgs);
        }
        seed++;
    }
    return failures;
}
