// dev/cuda/kernels_vocab.h: tensor parallelism's vocabulary-parallel kernels (cuda/vocab.cuh) against the CPU
// build's (cpu/vocab.h), and the row-parallel bias's (check_row_bias), included by kernels.cu after its helpers. The TP ranks are simulated on one device: shard
// s holds the vocabulary rows [s Vpl, (s + 1) Vpl), the last shards partly or wholly padding, and every token id of
// the whole vocabulary appears, so each shard sees ids below, inside and above its rows (the out-of-range ids must
// contribute zero). The collectives between the steps are done here on the host (a max gathered, sums added). Each
// shard's result is checked against the CPU build's kernel, and the shards together against the one-process
// kernels: the embeddings summed against encoder_forward, the shards' dwte rows against encoder_backward's, the
// losses and every shard's gradient columns against the whole row's cross-entropy computed in double. Some rows are
// sharp (the target's probability near 1, where its gradient p - 1 cancels).
#ifndef DEV_CUDA_KERNELS_VOCAB_H
#define DEV_CUDA_KERNELS_VOCAB_H

#include "cuda/vocab.cuh"
namespace cpu {
#include "cpu/vocab.h"
}

static void check_vocab_encoder(int B, int T, int C, int V, int Vpl, int S, const int *tok, const int *dtok) {
    size_t n = (size_t)B * T * C, Vp = (size_t)S * Vpl;
    float *wte = rand_host(Vp * C, 1.0f), *wpe = rand_host((size_t)T * C, 1.0f);
    for (size_t i = (size_t)V * C; i < Vp * C; i++) wte[i] = 0.0f;  // the padding rows
    float *sum = (float *)callocCheck(n, 4), *part = (float *)mallocCheck(n * 4), *ref = (float *)mallocCheck(n * 4);
    float *g = (float *)mallocCheck(n * 4), *dout = rand_host(n, 1.0f);
    floatX *ddout = to_dev_x(dout, n), *out = to_dev_x(g, n), *dwpe_x = to_dev_x(wpe, (size_t)T * C);
    double fwd = 0.0, fwd_ref = 0.0, bwd = 0.0, bwd_ref = 0.0;
    float *gw_all = (float *)callocCheck(Vp * C, 4), *gw = (float *)mallocCheck((size_t)Vpl * C * 4);
    float *gp = (float *)callocCheck((size_t)T * C, 4), *gp_dev = (float *)mallocCheck((size_t)T * C * 4);
    for (int s = 0; s < S; s++) {
        const float *w = wte + (size_t)s * Vpl * C;
        floatX *dw = to_dev_x(w, (size_t)Vpl * C);
        encoder_forward_vocab(out, dtok, dw, s == 0 ? dwpe_x : NULL, B, T, C, s * Vpl, Vpl);
        from_dev_x(g, out, n);
        cpu::encoder_forward_vocab(part, tok, w, s == 0 ? wpe : NULL, B, T, C, s * Vpl, Vpl);
        fwd = fmax(fwd, rel_err(g, part, n));
        for (size_t i = 0; i < n; i++) sum[i] += g[i];
        // the backward: this shard's rows (and dwpe on shard 0), accumulated onto what is there
        float *h = rand_host((size_t)Vpl * C, 1.0f), *hp = s == 0 ? rand_host((size_t)T * C, 1.0f) : NULL;
        float *dgw = to_dev_f(h, (size_t)Vpl * C), *dgp = hp ? to_dev_f(hp, (size_t)T * C) : NULL;
        encoder_backward_vocab(dgw, dgp, ddout, dtok, B, T, C, s * Vpl, Vpl);
        from_dev_f(gw, dgw, (size_t)Vpl * C);
        cpu::encoder_backward_vocab(h, hp, dout, tok, B, T, C, s * Vpl, Vpl);
        bwd = fmax(bwd, rel_err(gw, h, (size_t)Vpl * C));
        if (hp) { from_dev_f(gp_dev, dgp, (size_t)T * C); bwd = fmax(bwd, rel_err(gp_dev, hp, (size_t)T * C)); }
        // from zero, the shards' rows are the one-process gradient's
        cudaCheck(cudaMemset(dgw, 0, (size_t)Vpl * C * 4));
        encoder_backward_vocab(dgw, NULL, ddout, dtok, B, T, C, s * Vpl, Vpl);
        from_dev_f(gw_all + (size_t)s * Vpl * C, dgw, (size_t)Vpl * C);
    }
    cpu::encoder_forward(ref, tok, wte, wpe, B, T, C);
    fwd_ref = rel_err(sum, ref, n);
    float *gw_ref = (float *)callocCheck(Vp * C, 4);
    cpu::encoder_backward(gw_ref, gp, dout, tok, B, T, C);
    bwd_ref = rel_err(gw_all, gw_ref, Vp * C);
    expect("encoder_forward_vocab (each shard)", fwd, tol());
    expect("encoder_forward_vocab: shards summed vs whole", fwd_ref, tol());
    expect("encoder_backward_vocab (each shard, dwpe)", bwd, 1e-5);  // fp32 sums of the same inputs, same order
    expect("encoder_backward_vocab: shards vs whole dwte", bwd_ref, 1e-5);
}

// The whole rows' cross-entropy and its gradient in double (rounded to float at the end), the losses to wl and the
// gradient in place: the reference the shards together must give. (The CPU build's one-process classifier sums its
// exponentials in float here, whose target gradient on a sharp row, p near 1, is off by 4e-5 of the row's largest.)
static void vocab_classifier_f64(float *logits, float *wl, const int *tok, int N, int V, int Vp, float dloss) {
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * Vp;
        double m = -INFINITY, sum = 0.0;
        for (int v = 0; v < V; v++) m = fmax(m, row[v]);
        for (int v = 0; v < V; v++) sum += exp((double)row[v] - m);
        wl[i] = (float)(log(sum) + m - row[tok[i]]);
        for (int v = 0; v < Vp; v++) row[v] = v < V ? (float)(exp((double)row[v] - m) / sum * dloss - (v == tok[i] ? dloss : 0.0)) : 0.0f;
    }
}

static void check_vocab_classifier(int N, int V, int Vpl, int S, const int *tok, const int *dtok) {
    size_t Vp = (size_t)S * Vpl, nl = (size_t)N * Vpl;
    float *whole = rand_host((size_t)N * Vp, 4.0f);
    for (int i = 0; i < N; i++) whole[(size_t)i * Vp + i % V] = round_x(12.0f);  // sharp rows too (p near 1)
    float *maxes = (float *)mallocCheck((size_t)S * N * 4), *hmaxes = (float *)mallocCheck((size_t)S * N * 4);
    float *sums = (float *)callocCheck(2 * (size_t)N, 4), *hsums = (float *)callocCheck(2 * (size_t)N, 4);
    float *part = (float *)mallocCheck(2 * (size_t)N * 4), *hpart = (float *)mallocCheck(2 * (size_t)N * 4);
    float **h = (float **)mallocCheck(S * sizeof(float *));
    floatX **x = (floatX **)mallocCheck(S * sizeof(floatX *));
    float *dmaxes = to_dev_f(maxes, (size_t)S * N), *dsums = to_dev_f(sums, 2 * (size_t)N), *dloss = to_dev_f(sums, N);
    double emax = 0.0, esum = 0.0, eloss = 0.0, egrad = 0.0, wloss = 0.0, wgrad = 0.0;
    for (int s = 0; s < S; s++) {  // each shard's columns of the whole rows; its max
        int Vl = V - s * Vpl < 0 ? 0 : V - s * Vpl > Vpl ? Vpl : V - s * Vpl;
        h[s] = (float *)mallocCheck(nl * 4);
        for (int i = 0; i < N; i++) memcpy(h[s] + (size_t)i * Vpl, whole + (size_t)i * Vp + (size_t)s * Vpl, (size_t)Vpl * 4);
        x[s] = to_dev_x(h[s], nl);
        classifier_vocab_max(x[s], dmaxes + (size_t)s * N, N, Vl, Vpl);
        cpu::classifier_vocab_max(h[s], hmaxes + (size_t)s * N, N, Vl, Vpl);
    }
    from_dev_f(maxes, dmaxes, (size_t)S * N);
    emax = rel_err(maxes, hmaxes, (size_t)S * N);  // -inf on a shard of padding: the same on both
    for (int s = 0; s < S; s++) {  // the sums of exponentials and the target's logit, added over the shards
        int Vl = V - s * Vpl < 0 ? 0 : V - s * Vpl > Vpl ? Vpl : V - s * Vpl;
        classifier_vocab_exp(x[s], dsums, dmaxes, S, dtok, N, Vl, Vpl, s * Vpl);
        cpu::classifier_vocab_exp(h[s], hpart, hmaxes, S, tok, N, Vl, Vpl, s * Vpl);
        from_dev_f(part, dsums, 2 * (size_t)N);
        esum = fmax(esum, rel_err(part, hpart, 2 * (size_t)N));
        for (int i = 0; i < 2 * N; i++) { sums[i] += part[i]; hsums[i] += hpart[i]; }
    }
    cudaCheck(cudaMemcpy(dsums, sums, 2 * (size_t)N * 4, cudaMemcpyHostToDevice));
    float *loss = (float *)mallocCheck((size_t)N * 4), *hloss = (float *)mallocCheck((size_t)N * 4), *g = (float *)mallocCheck(nl * 4);
    float *wl = (float *)mallocCheck((size_t)N * 4);
    vocab_classifier_f64(whole, wl, tok, N, V, (int)Vp, 1.0f / N);  // the whole rows' softmax in double
    for (int s = 0; s < S; s++) {
        int Vl = V - s * Vpl < 0 ? 0 : V - s * Vpl > Vpl ? Vpl : V - s * Vpl;
        classifier_vocab_finish(x[s], dloss, dsums, dmaxes, S, dtok, N, Vl, Vpl, s * Vpl, 1.0f / N);
        cpu::classifier_vocab_finish(h[s], hloss, hsums, hmaxes, S, tok, N, Vl, Vpl, s * Vpl, 1.0f / N);
        from_dev_f(loss, dloss, N);
        from_dev_x(g, x[s], nl);
        eloss = fmax(eloss, rel_err(loss, hloss, N));
        egrad = fmax(egrad, rel_err(g, h[s], nl));
        wloss = fmax(wloss, rel_err(loss, wl, N));
        for (int i = 0; i < N; i++) memcpy(h[s] + (size_t)i * Vpl, whole + (size_t)i * Vp + (size_t)s * Vpl, (size_t)Vpl * 4);
        wgrad = fmax(wgrad, rel_err(g, h[s], nl));
    }
    expect("classifier_vocab_max", emax, 0.0);
    expect("classifier_vocab_exp: sums, target logit", esum, x_prec == PREC_FP32 ? 1e-6 : 1e-3);
    expect("classifier_vocab_finish: losses", eloss, x_prec == PREC_FP32 ? 1e-6 : 1e-3);
    expect("classifier_vocab_finish: dlogits", egrad, tol());
    expect("classifier_vocab: losses vs whole rows in f64", wloss, x_prec == PREC_FP32 ? 1e-6 : 1e-3);
    expect("classifier_vocab: dlogits vs whole rows in f64", wgrad, x_prec == PREC_FP32 ? 1e-6 : tol());  // fp32: 1.6e-7
}

// The row-parallel projection's bias, added once after the TP sum onto the residual stream (cuda/activations.cuh's
// residual_bias_forward against cpu/activations.h's): N rows of C, C not always a multiple of a vector's width.
static void check_row_bias(int N, int C) {
    size_t n = (size_t)N * C;
    float *res = rand_host(n, 1.0f), *x = rand_host(n, 1.0f), *b = rand_host((size_t)C, 1.0f);
    float *got = (float *)mallocCheck(n * sizeof(float)), *want = (float *)mallocCheck(n * sizeof(float));
    floatX *dres = to_dev_x(res, n), *dx = to_dev_x(x, n), *db = to_dev_x(b, (size_t)C), *dout = to_dev_x(x, n);
    residual_bias_forward(dout, dres, dx, db, N, C);
    cpu::residual_bias_forward(want, res, x, b, N, C);
    from_dev_x(got, dout, n);
    expect("residual_bias_forward (--tp's row-parallel bias)", rel_err(got, want, n), tol());
    floatX *dev[] = {dres, dx, db, dout};
    for (int i = 0; i < 4; i++) cudaCheck(cudaFree(dev[i]));
    free(res); free(x); free(b); free(got); free(want);
}

// S shards of Vpl rows; V valid (V < S Vpl: padding in the last shard, or whole shards of it).
static void check_vocab(int B, int T, int C, int V, int Vpl, int S) {
    int BT = B * T, *tok = (int *)mallocCheck((size_t)BT * sizeof(int)), *dtok;
    for (int i = 0; i < BT; i++) tok[i] = i < V ? i : (int)(random_u32(&rng_state) % V);  // every id, then random ones
    cudaCheck(cudaMalloc(&dtok, (size_t)BT * sizeof(int)));
    cudaCheck(cudaMemcpy(dtok, tok, (size_t)BT * sizeof(int), cudaMemcpyHostToDevice));
    check_vocab_encoder(B, T, C, V, Vpl, S, tok, dtok);
    check_vocab_classifier(BT, V, Vpl, S, tok, dtok);
    check_row_bias(BT, C);
    cudaCheck(cudaDeviceSynchronize());
}

#endif
