// model.h: the model as both builds run it, for every family, over its memory (model_state.h): generation with the
// key/value cache, and the model's pieces (embedding, each layer, the head, and their backward passes) that zero.h
// and pipeline.h drive. The block is written once; at each choice point (the norm, what follows the q/k/v matmul,
// the MLP's activation) it calls one function that switches on the config's choice (model_config.h), never on a
// family. It calls only the kernels and memory that backend.h declares, so the order of operations, and with it
// every number, is defined once.
#ifndef MODEL_H
#define MODEL_H
#include "model_state.h"  // the Model record: activations, slots, weights and their roles

// ----------------------------------------------------------------------------
// Generation with a key/value cache. Sampling feeds the model one token at a time; recomputing the
// whole prefix for every new token costs a forward of 1, 2, ..., n tokens. Instead each layer keeps
// the q, k, v rows (its qkv matmul's output) of the tokens so far, and a new token runs the model on
// itself alone: the embedding at its position, each layer's matmuls on one row, attention of its
// query over the cached keys and values (the build's attention_decode), the head on one row. The
// kernels are the full forward's, row for row, so the logits are the full-prefix forward's (bit for
// bit in the CPU build: test/test_generate.c). Decoding goes through the same pieces
// (model_embed_forward, model_layer_forward, model_head_forward), so pipeline stages and ZeRO-3's
// gathers need no change.

// Cached floatX per position and layer: a learned-position model (GPT-2) keeps llm.c's whole q, k, v row
// ((NH + 2 KV) hd) and attends with attention_decode; a RoPE model only its key and value heads, KV hd each, in two
// blocks (keys, then values) that attention_gqa_decode reads as tables. One layout for both would shrink GPT-2's
// cache to 2C a position: a change of the memory plan's figure (which test_generate and test_llama_cli count by
// hand), so it is a change of its own, not part of this file's choices.
static int model_kv_whole_rows(const ModelConfig *c) { return c->positions == POS_LEARNED; }
static size_t model_kv_width_of(const ModelConfig *c) {
    size_t kvd = (size_t)model_kv_heads(c) * c->head_dim;  // a TP rank's own heads
    return model_kv_whole_rows(c) ? (size_t)model_heads(c) * c->head_dim + 2 * kvd : 2 * kvd;
}
static size_t model_kv_width(const Model *m) { return model_kv_width_of(&m->config); }

// The cache of `tokens` positions in each of `layers` layers (a pipeline stage's own): the memory plan's figure
// (plan.h) and what model_kv_reserve allocates, so that the two agree by construction.
static size_t model_kv_cache_bytes(const ModelConfig *c, int layers, int tokens) {
    return (size_t)layers * tokens * model_kv_width_of(c) * target_x_bytes();
}

// The run's cache, allocated once at the start for its sample length (trainer.h's run_build, sized as the plan
// counts it), rather than at every sample: the memory a run holds is then its plan from the first step, a run
// that cannot hold it fails at the start instead of at its first sample hours in, and nothing is allocated or
// freed between steps (freeing device memory synchronises the GPU).
static void model_kv_reserve(Model *m, int tokens) {
    if (m->kv_memory || tokens < 1) internal_fault("key/value cache reserved twice, or for %d tokens", tokens);
    m->kv_memory = (floatX *)backend_alloc_scratch(model_kv_cache_bytes(&m->config, m->last - m->first, tokens));
    m->kv_reserved = tokens;
}

// Room for max_tokens positions in every layer this model runs: the reserved cache where there is one (a
// generation is never longer than what was reserved: the plan counted that), else allocated until model_decode_end.
static void model_decode_begin(Model *m, int max_tokens) {
    if (m->config.positions == POS_ROPE && max_tokens > m->config.max_seq_len)
        internal_fault("decoding %d tokens, beyond the RoPE table of %d positions", max_tokens, m->config.max_seq_len);
    if (m->kv_memory && max_tokens > m->kv_reserved)
        internal_fault("decoding %d tokens, beyond the %d the key/value cache was reserved for", max_tokens, m->kv_reserved);
    m->kv_len = max_tokens;
    m->kv_cache = m->kv_memory ? m->kv_memory
                               : (floatX *)backend_alloc_scratch(model_kv_cache_bytes(&m->config, m->last - m->first, max_tokens));
    m->decoding = 1;
    tp_decoding(m->tp, 1);
    m->kv_pos = 0;
    backend_decode_begin();  // the weights stay as they are until model_decode_end
}

// The next forward (B = T = 1) is the token at `pos`; the cache holds positions 0..pos-1.
static void model_decode_at(Model *m, int pos) {
    if (!m->decoding || pos < 0 || pos >= m->kv_len) internal_fault("decode position %d outside the cache of %d", pos, m->kv_len);
    m->kv_pos = pos;
}

static void model_decode_end(Model *m) {
    backend_decode_end();
    if (m->kv_cache != m->kv_memory) backend_free(m->kv_cache);
    m->kv_cache = NULL;
    m->decoding = 0;
    tp_decoding(m->tp, 0);
    m->kv_len = m->kv_pos = 0;
}

// ----------------------------------------------------------------------------
// The layer: block.h's choice points composed, forward, backward and for one decoded token.

// --profile's attention FLOPs of a layer under its mask: the visible (query, key) pairs (attn_mask_visible_pairs,
// with the micro-batch's document starts from the host copy), 4 C each (the two products); causal: ATTENTION_FLOPS.
static double model_attention_flops(const Model *m, const AttnMask *mask, int B, int T, int C) {
    if (mask->window == 0 && !mask->doc_start) return ATTENTION_FLOPS(B, T, C);
    AttnMask h = {mask->window, mask->doc_start ? m->doc_host : NULL};
    double pairs = 0.0;
    for (int b = 0; b < B; b++) pairs += (double)attn_mask_visible_pairs(&h, b, T);
    return 4.0 * pairs * C;
}

// Layer l's block (l < 0: the head's, which has no attention). RoPE's positions restart per document
// (--doc-rope-restart) where the micro-batch has documents: then never in attention's loads.
static Block block_of(const Model *m, int l) {
    const size_t *d = m->shape.dim;
    const ModelConfig *c = &m->config;
    const int *rope_doc = m->rope_restart && !m->decoding && c->positions == POS_ROPE ? m->doc_host : NULL;
    Block b = {c, c->channels, m->shape.num_heads, m->shape.num_kv_heads, (int)d[DIM_HD], (int)d[DIM_QKV], (int)d[DIM_ATT],
               (int)d[DIM_FC], (int)d[DIM_HID], c->norm_eps, m->rope_cos, m->rope_sin,
               block_rope_in_attention(c, m->decoding) && !rope_doc, {0, NULL}, rope_doc};
    if (l >= 0) b.mask = model_layer_mask(m, l);
    return b;
}

// Token rows of the residual stream, the norms and their statistics this rank holds of BT (with --sp its B T / tp).
static int block_rows(const Model *m, int BT) { return tp_rows(m->tp, BT); }
// A norm's output (this rank's rows) as a column-parallel matmul reads it, and that matmul's input gradient summed
// (tensor_parallel.h's column-input pair).
static const floatX *block_full_rows(const Model *m, const floatX *mine, int BT) {
    return tp_column_input_forward(m->tp, m->tp_full, mine, BT, (size_t)m->config.channels);
}
static floatX *block_sum_parts(const Model *m, floatX *buf, int BT) {
    return tp_column_input_backward(m->tp, buf, BT, (size_t)m->config.channels);
}
// The residual stream's gradient as a row-parallel matmul's backward reads it (the row-output pair's backward).
static const floatX *block_dout_rows(const Model *m, const floatX *dmine, int BT) {
    return tp_row_output_backward(m->tp, m->tp_full, dmine, BT, (size_t)m->config.channels);
}

// The MLP's first matmul and its activation: fch = ln2 @ fcw^T + fcb, fch_gelu = act(fch). prof: mark --profile's
// modules (a full forward; decoding is not profiled). ln2: the norm's output as the matmul reads it.
static void mlp_up_forward(const Block *d, const ActivationTensors *a, const LayerWeights *w, int BT, int prof,
                           const floatX *ln2) {
    if (prof) PROF(MOD_MLP_UP, MATMUL_FLOPS(BT, d->C, d->FC));
    if (block_gelu_fused(d)) {
        matmul_forward_gelu(a->fch_gelu, a->fch, ln2, w->fcw, w->fcb, BT, d->C, d->FC);
        return;
    }
    matmul_forward(a->fch, ln2, w->fcw, w->fcb, BT, d->C, d->FC);
    if (prof) PROF(MOD_GELU, 0);
    block_mlp_act_forward(d, a->fch_gelu, a->fch, BT);
}

// A projection (IC -> C) and the residual stream: out = res + (inp @ weight^T + bias), proj holding the projection,
// or one matmul adding onto res where the backend fuses the residual (rounded once; proj is then not written).
// With --tp the matmul is row-parallel (tensor_parallel.h's tp_row_parallel_forward: the parts summed, the bias added
// once after the sum) before the residual, which with --sp is this rank's rows (out, res) of the BT the matmul ran.
static void proj_residual_forward(const Model *m, floatX *out, floatX *proj, const floatX *res, const floatX *inp,
                                  const floatX *weight, const floatX *bias, int BT, int IC, int C, int module, int prof) {
    if (prof) PROF(module, MATMUL_FLOPS(BT, IC, C));
    if (m->tp) {
        const floatX *sum = tp_row_parallel_forward(m->tp, tp_sp(m->tp) ? m->tp_full : proj, inp, weight, BT, IC, C);
        if (prof) PROF(MOD_RESIDUAL, 0);
        tp_row_bias_residual(m->tp, out, res, sum, bias, BT, C);
        return;
    }
    if (backend_fuses_residual()) {
        matmul_forward_residual(out, res, inp, weight, bias, BT, IC, C);
        return;
    }
    matmul_forward(proj, inp, weight, bias, BT, IC, C);
    if (prof) PROF(MOD_RESIDUAL, 0);
    residual_forward(out, res, proj, (long)BT * C);
}

// One layer for the token at kv_pos: layer_forward's kernels on one row, its keys and values appended to the
// cache, and attention over the cache.
static void layer_decode(Model *m, int l) {
    Block d = block_of(m, l);
    int C = d.C;
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_weights(m, model_weights(m, 1 + l));
    const floatX *x = layer_input(m, l);
    floatX *cache = x_at(m->kv_cache, (size_t)(l - m->first) * m->kv_len * model_kv_width(m));
    block_norm_forward(&d, a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, 1);
    if (model_kv_whole_rows(&m->config)) {
        floatX *qkv = x_at(cache, (size_t)m->kv_pos * d.QKV);
        matmul_forward(qkv, a.ln1, w.qkvw, w.qkvb, 1, C, d.QKV);
        attention_decode(a.atty, cache, m->kv_pos, d.ATT, d.NH, &d.mask);
    } else {
        block_qkv_forward(&d, &a, &w, 1, 1, m->kv_pos, a.ln1);
        size_t kvd = (size_t)d.KV * d.hd;  // this token's keys and values into the cache's two blocks
        floatX *kc = cache, *vc = x_at(cache, (size_t)m->kv_len * kvd);
        // floatX moved as floats: KV hd is even (hd is), so its bytes are whole floats at any X_BYTES
        backend_copy((float *)x_at(kc, (size_t)m->kv_pos * kvd), (const float *)x_at(a.qkv, (size_t)d.NH * d.hd),
                     kvd * X_BYTES / sizeof(float));
        backend_copy((float *)x_at(vc, (size_t)m->kv_pos * kvd), (const float *)x_at(a.qkv, (size_t)(d.NH + d.KV) * d.hd),
                     kvd * X_BYTES / sizeof(float));
        attention_gqa_decode(a.atty, a.qkv, kc, vc, m->kv_pos, d.NH, d.KV, d.hd, &d.mask);
    }
    proj_residual_forward(m, a.residual2, a.attproj, x, a.atty, w.attprojw, w.attprojb, 1, d.ATT, C, MOD_ATTPROJ, 0);
    block_norm_forward(&d, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, 1);
    mlp_up_forward(&d, &a, &w, 1, 0, a.ln2);
    proj_residual_forward(m, a.residual3, a.fcproj, a.residual2, a.fch_gelu, w.fcprojw, w.fcprojb, 1, d.HID, C, MOD_MLP_DOWN, 0);
}

static void layer_forward(Model *m, int l, int B, int T) {
    Block d = block_of(m, l);
    int C = d.C, BT = B * T;
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_weights(m, model_weights(m, 1 + l));
    const floatX *x = layer_input(m, l);
    int rows = block_rows(m, BT);  // --sp: the norms run on this rank's rows
    PROF(MOD_LAYERNORM, 0);
    block_norm_forward(&d, a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, rows);
    PROF(MOD_QKV, MATMUL_FLOPS(BT, C, d.QKV));
    block_qkv_forward(&d, &a, &w, B, T, 0, block_full_rows(m, a.ln1, BT));
    PROF(MOD_ATTENTION, model_attention_flops(m, &d.mask, B, T, d.ATT));
    block_attention_forward(&d, &a, B, T);
    proj_residual_forward(m, a.residual2, a.attproj, x, a.atty, w.attprojw, w.attprojb, BT, d.ATT, C, MOD_ATTPROJ, 1);
    PROF(MOD_LAYERNORM, 0);
    block_norm_forward(&d, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, rows);
    mlp_up_forward(&d, &a, &w, BT, 1, block_full_rows(m, a.ln2, BT));
    proj_residual_forward(m, a.residual3, a.fcproj, a.residual2, a.fch_gelu, w.fcprojw, w.fcprojb, BT, d.HID, C, MOD_MLP_DOWN, 1);
    PROF(MOD_NONE, 0);
}

// Rebuilds what the recompute level dropped, from what it kept. Deterministic kernels make the
// rebuilt tensors bit-identical to the originals, so every level gives the same numbers. With GELU fused
// into the fc matmul, fch_gelu is not gelu(fch) to the bit, so the matmul runs again (its same call: the
// same bits, fch rewritten unchanged): a matmul more per layer at levels 1 and 2.
static void layer_recompute(Model *m, int l, int B, int T) {
    Block d = block_of(m, l);
    int BT = B * T;
    if (m->recompute >= 3) { layer_forward(m, l, B, T); return; }
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_weights(m, model_weights(m, 1 + l));
    if (m->recompute >= 2) {
        PROF(MOD_LAYERNORM, 0);
        block_norm_forward(&d, a.ln1, a.ln1_mean, a.ln1_rstd, layer_input(m, l), w.ln1w, w.ln1b, block_rows(m, BT));
        PROF(MOD_LAYERNORM, 0);
        block_norm_forward(&d, a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, block_rows(m, BT));
    }
    if (m->recompute >= 1 && block_gelu_fused(&d)) {
        mlp_up_forward(&d, &a, &w, BT, 1, block_full_rows(m, a.ln2, BT));
    } else if (m->recompute >= 1) {
        PROF(MOD_GELU, 0);
        block_mlp_act_forward(&d, a.fch_gelu, a.fch, BT);
    }
    PROF(MOD_NONE, 0);
}

// dresidual holds dloss/d(layer output) on entry and dloss/d(layer input) on return.
static void layer_backward(Model *m, int l, int B, int T) {
    Block d = block_of(m, l);
    int C = d.C, BT = B * T;
    layer_recompute(m, l, B, T);
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_weights(m, model_weights(m, 1 + l));
    LayerGrads g = layer_grads(m, m->ugrads[1 + l]);
    GradActTensors *ga = &m->ga;
    const floatX *x = layer_input(m, l);
    int rows = block_rows(m, BT);  // --sp: dresidual and the norms are this rank's rows, gathered for the matmuls
    // residual3 = residual2 + fcproj(act(fc(norm2(residual2))))
    PROF(MOD_MLP_DOWN, 2.0 * MATMUL_FLOPS(BT, d.HID, C));
    const floatX *dres = block_dout_rows(m, ga->dresidual, BT);
    if (block_gelu_fused(&d)) {  // GELU's backward in the matmul's epilogue: dfch directly
        matmul_backward_dgelu(ga->dfch, g.fcprojw, tp_whole_grad(m->tp, g.fcprojb), dres, a.fch_gelu, w.fcprojw, a.fch, BT, d.HID, C);
    } else {
        matmul_backward(ga->dfch_gelu, g.fcprojw, tp_whole_grad(m->tp, g.fcprojb), dres, a.fch_gelu, w.fcprojw, BT, d.HID, C);
        PROF(MOD_GELU, 0);
        block_mlp_act_backward(&d, ga->dfch, ga->dfch_gelu, a.fch, BT);
    }
    PROF(MOD_MLP_UP, 2.0 * MATMUL_FLOPS(BT, C, d.FC));
    matmul_backward(ga->dln, g.fcw, g.fcb, ga->dfch, block_full_rows(m, a.ln2, BT), w.fcw, BT, C, d.FC);
    floatX *dln = block_sum_parts(m, ga->dln, BT);  // column-parallel: each rank's part of dln
    PROF(MOD_LAYERNORM, 0);
    block_norm_backward(&d, ga->dresidual, g.ln2w, g.ln2b, dln, a.residual2, w.ln2w, a.ln2_mean, a.ln2_rstd, rows);
    // residual2 = x + attproj(attention(post(qkv(norm1(x)))))
    PROF(MOD_ATTPROJ, 2.0 * MATMUL_FLOPS(BT, d.ATT, C));
    dres = block_dout_rows(m, ga->dresidual, BT);
    matmul_backward(ga->datty, g.attprojw, tp_whole_grad(m->tp, g.attprojb), dres, a.atty, w.attprojw, BT, d.ATT, C);
    PROF(MOD_ATTENTION, 2.0 * model_attention_flops(m, &d.mask, B, T, d.ATT));
    block_attention_backward(&d, ga, &a, B, T);
    const floatX *dqkv = block_qkv_backward(&d, ga, &a, &w, &g, B, T);
    PROF(MOD_QKV, 2.0 * MATMUL_FLOPS(BT, C, d.QKV));
    matmul_backward(ga->dln, g.qkvw, g.qkvb, dqkv, block_full_rows(m, a.ln1, BT), w.qkvw, BT, C, d.QKV);
    dln = block_sum_parts(m, ga->dln, BT);
    PROF(MOD_LAYERNORM, 0);
    block_norm_backward(&d, ga->dresidual, g.ln1w, g.ln1b, dln, x, w.ln1w, a.ln1_mean, a.ln1_rstd, rows);
    PROF(MOD_NONE, 0);
}

// ----------------------------------------------------------------------------
// The model interface that trainer.h drives (the CUDA build implements the same functions).

// The model in pieces, for the drivers in zero.h and pipeline.h: embedding, each layer, the head
// (final LayerNorm, tied classifier, loss), and their backward passes, in that order. A micro-batch
// is (B, T) with B and T at most what the model was created for.

// Each piece that takes tokens or gives losses comes in parts too, for pipeline.h's graphs (backend.h): the host's
// part (checking and uploading the tokens, queueing the losses' copy back), which must run for every micro-batch,
// and the device's (model_embed_run, model_head_run), which a graph may replay.
static void model_embed_inputs(Model *m, const int *inputs, int B, int T) {
    int V = m->config.vocab_size, BT = B * T;
    if (B > m->B || T > m->T) internal_fault("micro-batch %dx%d is larger than the model's buffers %dx%d", B, T, m->B, m->T);
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) internal_fault("input token %d at position %d is outside the vocabulary of %d", inputs[i], i, V);
    }
    backend_tokens_from_host(m->inputs, inputs, BT);
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
}

static void model_embed_run(Model *m) {
    const ModelConfig *c = &m->config;
    int B = m->cur_B, T = m->cur_T;
    OuterWeights o = outer_weights(m, model_weights(m, 0));
    const floatX *wpe = o.wpe;  // NULL for a family without a position table (RoPE positions q and k)
    if (m->decoding) {  // one token, at its position: the position table from that row on
        if (B != 1 || T != 1) internal_fault("decoding takes one token at a time, not %dx%d", B, T);
        if (wpe) wpe = x_at(o.wpe, (size_t)m->kv_pos * c->channels);
    }
    PROF(MOD_EMBED, 0);
    if (m->tp) {  // vocabulary-parallel (tensor_parallel.h)
        tp_embedding_forward(m->tp, (floatX *)m->act_ptr[ACT_ENCODED], m->tp_full, m->inputs, o.wte, wpe, B, T, c->channels,
                             (int)m->shape.dim[DIM_VP]);
    } else {
        encoder_forward((floatX *)m->act_ptr[ACT_ENCODED], m->inputs, o.wte, wpe, B, T, c->channels);
    }
    PROF(MOD_NONE, 0);
}

static void model_embed_forward(Model *m, const int *inputs, int B, int T) {
    model_embed_inputs(m, inputs, B, T);
    model_embed_run(m);
}

// Every unit's working copy made now, before a graph: a conversion recorded in one would replay with the
// rounding seed (the update count) it was recorded with, and one not recorded would be missing after the next
// update. The seeds depend on the unit and the count only, so converting early changes no bit.
static void model_weights_ready(Model *m) {
    for (int u = 0; u < model_num_units(&m->config); u++)
        if (m->uparams[u]) model_weights(m, u);
}

static void model_layer_forward(Model *m, int l) {
    if (m->decoding) layer_decode(m, l);
    else layer_forward(m, l, m->cur_B, m->cur_T);
}

// A pipeline stage's boundary: the input of its first layer (received from the stage before, in
// place of the embedding), its last layer's output, and the gradient buffer that holds dloss/d(output)
// before the stage's backward and dloss/d(input) after it.
// They are floatX (B*T*C values); the pipeline moves them bit for bit as comm.h's 16- or 32-bit type.
static float *model_stage_input(Model *m, int B, int T) {
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
    return (float *)m->act_ptr[ACT_ENCODED];
}
static float *model_stage_output(Model *m) { return (float *)layer_acts(m, m->last - 1).residual3; }
static float *model_stage_grad(Model *m) { return (float *)m->ga.dresidual; }
// Elements of a stage boundary's message (the residual stream's rows this rank holds: with --sp its B T / tp).
static size_t model_stage_count(const Model *m, int B, int T) { return (size_t)block_rows(m, B * T) * m->config.channels; }

// The micro-batch's B*T losses queued for model_take_loss. The host buffer grows in a run's first step;
// a copy still in flight into the old one is waited for first.
static void model_queue_losses(Model *m, const float *losses, int n) {
    if (m->loss_used + n > m->loss_cap) {
        backend_losses_wait();
        size_t cap = 2 * (m->loss_used + n);
        float *grown = (float *)backend_alloc_pinned(cap * sizeof(float));
        if (m->loss_used) memcpy(grown, m->loss_host, m->loss_used * sizeof(float));
        if (m->loss_host) backend_free_pinned(m->loss_host);
        m->loss_host = grown;
        m->loss_cap = cap;
    }
    if (m->loss_items == m->loss_items_cap) {
        m->loss_items_cap = m->loss_items_cap ? 2 * m->loss_items_cap : 16;
        m->loss_count = (int *)reallocCheck(m->loss_count, m->loss_items_cap * sizeof(int));
    }
    backend_losses_to_host(m->loss_host + m->loss_used, losses, n);
    m->loss_count[m->loss_items++] = n;
    m->loss_used += n;
}

// The sum of the queued micro-batches' mean losses (0 with none queued), and the queue emptied. Each
// mean is a double sum in position order rounded to float, so the loss is reproducible bit for bit.
static double model_take_loss(Model *m) {
    if (m->loss_items == 0) return 0.0;
    backend_losses_wait();
    double total = 0.0;
    const float *l = m->loss_host;
    for (int k = 0; k < m->loss_items; k++) {
        double s = 0.0;
        for (int i = 0; i < m->loss_count[k]; i++) s += l[i];
        total += (float)(s / m->loss_count[k]);
        l += m->loss_count[k];
    }
    m->loss_items = 0;
    m->loss_used = 0;
    return total;
}

// With targets: queues the micro-batch's losses (model_take_loss adds them up) and leaves dloss/dlogits,
// scaled by dloss (the weight of one token in the step's mean), for model_head_backward. Without: leaves
// the logits for sampling.
static void model_head_targets(Model *m, const int *targets) {
    int V = m->config.vocab_size, BT = m->cur_B * m->cur_T;
    for (int i = 0; i < BT; i++) {
        if (targets[i] < 0 || targets[i] >= V) internal_fault("target token %d at position %d is outside the vocabulary of %d", targets[i], i, V);
    }
    backend_tokens_from_host(m->targets, targets, BT);
}

// targets: the classifier's loss and gradient too (from model_head_targets' upload).
static void model_head_run(Model *m, int targets, float dloss) {
    const ModelConfig *c = &m->config;
    // the head's rows (this rank's part of the vocabulary with --tp): Vp of them, the first V valid
    int C = c->channels, V = (int)m->shape.dim[DIM_V], Vp = (int)m->shape.dim[DIM_VP], BT = m->cur_B * m->cur_T;
    Block d = block_of(m, -1);
    OuterWeights o = outer_weights(m, model_weights(m, 0));
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    PROF(MOD_LAYERNORM, 0);
    block_norm_forward(&d, a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3, o.lnfw, o.lnfb, block_rows(m, BT));
    PROF(MOD_HEAD, MATMUL_FLOPS(BT, C, Vp));
    matmul_forward(a.logits, block_full_rows(m, a.lnf, BT), o.head, NULL, BT, C, Vp);
    if (targets && m->tp) tp_classifier(m->tp, a.logits, a.losses, m->targets, BT, V, Vp, dloss, m->tp_scratch);
    else if (targets) classifier_forward_backward(a.logits, a.losses, m->targets, BT, V, Vp, dloss);
    PROF(MOD_NONE, 0);
}

static void model_head_losses(Model *m) {
    model_queue_losses(m, layer_acts(m, m->config.num_layers - 1).losses, m->cur_B * m->cur_T);
}

static void model_head_forward(Model *m, const int *targets, float dloss) {
    if (targets) model_head_targets(m, targets);
    model_head_run(m, targets != NULL, dloss);
    if (targets) model_head_losses(m);
}

// A row of the logits, all Vp of them (with --tp gathered from the ranks' columns, every rank the same row).
static const float *model_logits(Model *m, int b, int t) {
    size_t Vp = m->shape.dim[DIM_VP];
    const float *row = backend_logits_row(x_at((const floatX *)m->act_ptr[ACT_LOGITS], ((size_t)b * m->cur_T + t) * Vp), Vp);
    if (!m->tp) return row;
    if (!m->tp_logits) m->tp_logits = (float *)mallocCheck(Vp * m->config.tp_size * sizeof(float));
    tp_gather_logits(m->tp, row, m->tp_logits, Vp);
    return m->tp_logits;
}

// Accumulates the head's gradients into the outer unit's and leaves dloss/d(last layer output). Its two parts apart:
// HEAD_INPUT, dloss/d(last layer output) and the final norm's gradients; HEAD_WEIGHTS, the classifier's gradient (a
// tied embedding's head part, which a pipeline's output end adds later, after the lookup part before it: pipeline.h),
// from the micro-batch's dloss/dlogits and final norm output, which stay in its slot until its next forward.
enum { HEAD_INPUT = 1, HEAD_WEIGHTS = 2 };
static void model_head_backward_parts(Model *m, int parts) {
    const ModelConfig *c = &m->config;
    int C = c->channels, Vp = (int)m->shape.dim[DIM_VP], BT = m->cur_B * m->cur_T;
    int input = (parts & HEAD_INPUT) != 0, weights = (parts & HEAD_WEIGHTS) != 0;
    Block d = block_of(m, -1);
    OuterWeights o = outer_weights(m, model_weights(m, 0));
    OuterGrads g = outer_grads(m, m->ugrads[0]);
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    GradActTensors *ga = &m->ga;
    PROF(MOD_HEAD, (input + weights) * MATMUL_FLOPS(BT, C, Vp));
    matmul_backward(input ? ga->dlnf : NULL, weights ? g.head : NULL, NULL, a.logits,
                    weights ? block_full_rows(m, a.lnf, BT) : NULL, o.head, BT, C, Vp);
    if (!input) { PROF(MOD_NONE, 0); return; }
    floatX *dlnf = block_sum_parts(m, ga->dlnf, BT);  // the vocabulary's parts of dlnf
    backend_zero_scratch(ga->dresidual, (size_t)BT * C * X_BYTES);
    PROF(MOD_LAYERNORM, 0);
    block_norm_backward(&d, ga->dresidual, g.lnfw, g.lnfb, dlnf, a.residual3, o.lnfw, a.lnf_mean, a.lnf_rstd, block_rows(m, BT));
    PROF(MOD_NONE, 0);
}
static void model_head_backward(Model *m) { model_head_backward_parts(m, HEAD_INPUT | HEAD_WEIGHTS); }

static void model_layer_backward(Model *m, int l) { layer_backward(m, l, m->cur_B, m->cur_T); }

// The embedding's backward: dloss/d(embedding output) in ga.dresidual added into the tables, the token table's rows by
// the micro-batch's ids in m->inputs. tokens 0: the position table's part alone (GPT-2's; nothing for a family without
// one), where a pipeline's output end adds the token table's, a tied one (model_embed_backward_tokens, pipeline.h).
static void model_embed_backward_tables(Model *m, int tokens, int B, int T) {
    OuterGrads g = outer_grads(m, m->ugrads[0]);
    float *dwte = tokens ? g.wte : NULL;
    PROF(MOD_EMBED, 0);
    if (m->tp) {  // its rows' gather (--sp) runs either way: train/comm_count.h counts it at the input end
        tp_embedding_backward(m->tp, dwte, g.wpe, m->tp_full, m->ga.dresidual, m->inputs, B, T, m->config.channels,
                              (int)m->shape.dim[DIM_VP]);
    } else if (dwte || g.wpe) {
        encoder_backward(dwte, g.wpe, m->ga.dresidual, m->inputs, B, T, m->config.channels);
    }
    PROF(MOD_NONE, 0);
}
static void model_embed_backward(Model *m) { model_embed_backward_tables(m, 1, m->cur_B, m->cur_T); }

// --pp with a tied embedding, at the output end, which embeds nothing: the token table's part of micro-batch `inputs`'
// embedding backward, its dloss/d(embedding output) received into ga.dresidual from the input end. The ids go into the
// current slot's m->inputs, which this stage never reads otherwise.
static void model_embed_backward_tokens(Model *m, const int *inputs, int B, int T) {
    backend_tokens_from_host(m->inputs, inputs, B * T);
    OuterGrads g = outer_grads(m, m->ugrads[0]);
    if (g.wpe) internal_fault("the token table's backward alone at a stage that holds the position table");
    model_embed_backward_tables(m, 1, B, T);
}

#endif
