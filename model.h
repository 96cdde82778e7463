// model.h: GPT-2 as both builds run it: the activation layout and its recompute levels, activation
// slots for pipelined micro-batches, and the model's pieces (embedding, each layer, the head, and
// their backward passes) that zero.h and pipeline.h drive. It is included by a build after that
// build has defined its kernels (encoder, layernorm, matmul, attention, gelu, residual, classifier
// forward and backward, with these signatures, on its own memory) and its memory backend
// (backend_malloc/free/zero, backend_tokens_from_host, backend_sum_losses, backend_logits_row), so
// the order of operations, and with it every number, is defined once.
#ifndef MODEL_H
#define MODEL_H

// Activations. A tensor is kept for every layer only if the recompute level needs it in backward;
// otherwise one layer's copy is shared and backward recomputes it. The level-3 model keeps just
// each layer's output (the next layer's input) and reruns the whole layer.

enum {
    ACT_ENCODED, ACT_LN1, ACT_LN1_MEAN, ACT_LN1_RSTD, ACT_QKV, ACT_ATTY, ACT_ATT, ACT_ATTPROJ, ACT_RESIDUAL2,
    ACT_LN2, ACT_LN2_MEAN, ACT_LN2_RSTD, ACT_FCH, ACT_FCH_GELU, ACT_FCPROJ, ACT_RESIDUAL3, ACT_LNF,
    ACT_LNF_MEAN, ACT_LNF_RSTD, ACT_LOGITS, ACT_LOSSES, NUM_ACTS
};

// Recompute level from which a per-layer tensor is no longer kept for every layer
// (0 = never per layer: scratch or final-layer-only; 99 = always kept).
static const int ACT_DROPPED_AT[NUM_ACTS] = {
    99, 2, 3, 3, 3, 3, 3, 0, 3, 2, 3, 3, 3, 1, 0, 99, 0, 0, 0, 0, 0};
static const int ACT_PER_LAYER[NUM_ACTS] = {
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};

typedef struct {
    float *encoded, *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *attproj, *residual2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *residual3, *lnf, *lnf_mean, *lnf_rstd;
    float *logits, *losses;
} ActivationTensors;

static void act_sizes(const GPT2Config *c, int B, int T, size_t per_copy[NUM_ACTS]) {
    size_t BT = (size_t)B * T, C = c->channels, NH = c->num_heads;
    size_t s[NUM_ACTS] = {BT * C, BT * C, BT, BT, BT * 3 * C, BT * C, B * NH * (size_t)T * T, BT * C, BT * C,
                          BT * C, BT, BT, BT * 4 * C, BT * 4 * C, BT * C, BT * C, BT * C, BT, BT,
                          BT * c->padded_vocab_size, BT};
    memcpy(per_copy, s, sizeof(s));
}

// Copies of activation i for a model that runs `layers` layers.
static int act_copies(int layers, int recompute, int i) {
    if (!ACT_PER_LAYER[i]) return 1;
    return recompute < ACT_DROPPED_AT[i] ? layers : 1;
}

// Scratch for one layer's backward: gradients of activations never need more than one layer.
typedef struct {
    float *dresidual, *dln, *dqkv, *datty, *dfch, *dfch_gelu, *dlnf;
} GradActTensors;

typedef struct {
    GPT2Config config;
    size_t num_params;
    // Each unit's full parameters and where its gradient accumulates (gpt2.h's unit layout). zero.h
    // owns the memory and points these: at every moment, to whatever is resident for that unit.
    float **uparams, **ugrads;
    int B, T, recompute;                 // activation buffers are sized for these
    int first, last;                     // the layers [first, last) this model runs (a pipeline stage)
    // Activation slots: a pipeline stage keeps several micro-batches in flight, one slot each.
    int nslots, slot;
    float *slot_memory;                  // nslots * act_floats
    int *slot_inputs, *slot_targets, *slot_B, *slot_T;
    size_t act_off[NUM_ACTS];
    size_t act_floats, gradact_floats;
    float *act_ptr[NUM_ACTS];            // the current slot's tensors
    size_t act_stride[NUM_ACTS];         // floats between layers (0 for a single shared copy)
    float *gradact_memory;
    GradActTensors ga;
    int *inputs, *targets;               // the last forward's micro-batch
    int cur_B, cur_T;
    float mean_loss;
} Model;

// Bytes of each kind of memory, for the memory plan printed at start.
typedef struct {
    size_t params, grads, optimizer, activations, workspace;
    int optimizer_on_host;  // --offload: the optimizer figure is host memory
} MemoryPlan;

// The plan of a model running `layers` layers with `slots` micro-batches in flight (a pipeline
// stage; the whole model is layers = L, slots = 1). Parameter-sized figures are for one unsharded
// copy; zero.h replaces them with the stage's own.
static MemoryPlan model_memory_plan(const GPT2Config *c, int B, int T, int recompute, int layers, int slots) {
    MemoryPlan mp = {0};
    size_t n = gpt2_num_params(c), per[NUM_ACTS], acts = 0;
    act_sizes(c, B, T, per);
    for (int i = 0; i < NUM_ACTS; i++) acts += per[i] * act_copies(layers, recompute, i);
    acts *= slots;
    size_t BT = (size_t)B * T, C = c->channels;
    mp.params = n * sizeof(float);
    mp.grads = n * sizeof(float);
    mp.optimizer = 2 * n * sizeof(float);
    mp.activations = acts * sizeof(float);
    mp.workspace = (BT * C * 5 + BT * 3 * C + BT * 8 * C) * sizeof(float) + 2 * slots * BT * sizeof(int);
    return mp;
}

static void model_use_slot(Model *m, int k) {
    m->slot = k;
    float *base = m->slot_memory + (size_t)k * m->act_floats;
    for (int i = 0; i < NUM_ACTS; i++) m->act_ptr[i] = base + m->act_off[i];
    size_t BT = (size_t)m->B * m->T;
    m->inputs = m->slot_inputs + k * BT;
    m->targets = m->slot_targets + k * BT;
    m->cur_B = m->slot_B[k];
    m->cur_T = m->slot_T[k];
}

// Activations and scratch for (B, T) micro-batches through layers [first, last), with `slots`
// micro-batches in flight; the parameters come from zero.h (model_set_unit).
static Model *model_create(const GPT2Config *config, int B, int T, int recompute, int first, int last, int slots) {
    Model *m = (Model *)callocCheck(1, sizeof(Model));
    m->config = *config;
    m->num_params = gpt2_num_params(config);
    m->B = B; m->T = T; m->recompute = recompute;
    m->first = first; m->last = last; m->nslots = slots;
    m->uparams = (float **)callocCheck(gpt2_num_units(config), sizeof(float *));
    m->ugrads = (float **)callocCheck(gpt2_num_units(config), sizeof(float *));

    size_t per[NUM_ACTS];
    act_sizes(config, B, T, per);
    m->act_floats = 0;
    for (int i = 0; i < NUM_ACTS; i++) {
        int copies = act_copies(last - first, recompute, i);
        m->act_off[i] = m->act_floats;
        m->act_stride[i] = copies > 1 ? per[i] : 0;
        m->act_floats += per[i] * copies;
    }
    m->slot_memory = (float *)backend_malloc((size_t)slots * m->act_floats * sizeof(float));
    size_t BT = (size_t)B * T, C = config->channels;
    m->gradact_floats = BT * C * 5 + BT * 3 * C + BT * 8 * C;
    m->gradact_memory = (float *)backend_malloc(m->gradact_floats * sizeof(float));
    float *q = m->gradact_memory;
    m->ga.dresidual = q; q += BT * C;
    m->ga.dln = q; q += BT * C;
    m->ga.datty = q; q += BT * C;
    m->ga.dlnf = q; q += BT * C;
    q += BT * C;  // spare, keeps the plan's arithmetic simple
    m->ga.dqkv = q; q += BT * 3 * C;
    m->ga.dfch = q; q += BT * 4 * C;
    m->ga.dfch_gelu = q; q += BT * 4 * C;
    m->slot_inputs = (int *)backend_malloc((size_t)slots * BT * sizeof(int));
    m->slot_targets = (int *)backend_malloc((size_t)slots * BT * sizeof(int));
    m->slot_B = (int *)callocCheck(slots, sizeof(int));
    m->slot_T = (int *)callocCheck(slots, sizeof(int));
    model_use_slot(m, 0);
    return m;
}

static void model_set_unit(Model *m, int u, float *params, float *grads) {
    m->uparams[u] = params;
    m->ugrads[u] = grads;
}

static void model_free(Model *m) {
    free(m->uparams);
    free(m->ugrads);
    backend_free(m->slot_memory);
    backend_free(m->gradact_memory);
    backend_free(m->slot_inputs);
    backend_free(m->slot_targets);
    free(m->slot_B);
    free(m->slot_T);
    free(m);
}

// The activation pointers of layer l (shared copies where the recompute level drops a tensor).
// Strides are in elements of a (B, T) sized buffer; a smaller micro-batch uses the front of each.
static ActivationTensors layer_acts(const Model *m, int l) {
    float *p[NUM_ACTS];
    for (int i = 0; i < NUM_ACTS; i++) p[i] = m->act_ptr[i] + (size_t)(l - m->first) * m->act_stride[i];
    ActivationTensors a = {p[ACT_ENCODED], p[ACT_LN1], p[ACT_LN1_MEAN], p[ACT_LN1_RSTD], p[ACT_QKV], p[ACT_ATTY],
                           p[ACT_ATT], p[ACT_ATTPROJ], p[ACT_RESIDUAL2], p[ACT_LN2], p[ACT_LN2_MEAN], p[ACT_LN2_RSTD],
                           p[ACT_FCH], p[ACT_FCH_GELU], p[ACT_FCPROJ], p[ACT_RESIDUAL3], p[ACT_LNF], p[ACT_LNF_MEAN],
                           p[ACT_LNF_RSTD], p[ACT_LOGITS], p[ACT_LOSSES]};
    return a;
}

static const float *layer_input(const Model *m, int l) {
    return l == m->first ? m->act_ptr[ACT_ENCODED] : layer_acts(m, l - 1).residual3;
}

// The twelve tensors of a layer inside its unit buffer (parameters or gradients alike).
typedef struct {
    float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
} LayerWeights;

static LayerWeights layer_view(float *u, int C) {
    size_t c = C;
    LayerWeights w;
    w.ln1w = u; u += c;
    w.ln1b = u; u += c;
    w.qkvw = u; u += 3 * c * c;
    w.qkvb = u; u += 3 * c;
    w.attprojw = u; u += c * c;
    w.attprojb = u; u += c;
    w.ln2w = u; u += c;
    w.ln2b = u; u += c;
    w.fcw = u; u += 4 * c * c;
    w.fcb = u; u += 4 * c;
    w.fcprojw = u; u += 4 * c * c;
    w.fcprojb = u;
    return w;
}

// The outer unit: wte, wpe, lnfw, lnfb.
typedef struct { float *wte, *wpe, *lnfw, *lnfb; } OuterWeights;

static OuterWeights outer_view(float *u, const GPT2Config *c) {
    OuterWeights o;
    o.wte = u;
    o.wpe = o.wte + (size_t)c->padded_vocab_size * c->channels;
    o.lnfw = o.wpe + (size_t)c->max_seq_len * c->channels;
    o.lnfb = o.lnfw + c->channels;
    return o;
}

static void layer_forward(Model *m, int l, int B, int T) {
    int C = m->config.channels, NH = m->config.num_heads, BT = B * T;
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    const float *x = layer_input(m, l);
    layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, BT, C);
    matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, BT, C, 3 * C);
    attention_forward(a.atty, a.att, a.qkv, B, T, C, NH);
    matmul_forward(a.attproj, a.atty, w.attprojw, w.attprojb, BT, C, C);
    residual_forward(a.residual2, x, a.attproj, (long)BT * C);
    layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, BT, C);
    matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, BT, C, 4 * C);
    gelu_forward(a.fch_gelu, a.fch, (long)BT * 4 * C);
    matmul_forward(a.fcproj, a.fch_gelu, w.fcprojw, w.fcprojb, BT, 4 * C, C);
    residual_forward(a.residual3, a.residual2, a.fcproj, (long)BT * C);
}

// Rebuilds what the recompute level dropped, from what it kept. Deterministic kernels make the
// rebuilt tensors bit-identical to the originals, so every level gives the same numbers.
static void layer_recompute(Model *m, int l, int B, int T) {
    int C = m->config.channels, BT = B * T;
    if (m->recompute >= 3) { layer_forward(m, l, B, T); return; }
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    if (m->recompute >= 2) {
        layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, layer_input(m, l), w.ln1w, w.ln1b, BT, C);
        layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, BT, C);
    }
    if (m->recompute >= 1) gelu_forward(a.fch_gelu, a.fch, (long)BT * 4 * C);
}

// dresidual holds dloss/d(layer output) on entry and dloss/d(layer input) on return.
static void layer_backward(Model *m, int l, int B, int T) {
    int C = m->config.channels, NH = m->config.num_heads, BT = B * T;
    layer_recompute(m, l, B, T);
    ActivationTensors a = layer_acts(m, l);
    LayerWeights w = layer_view(m->uparams[1 + l], C);
    LayerWeights g = layer_view(m->ugrads[1 + l], C);
    GradActTensors *ga = &m->ga;
    const float *x = layer_input(m, l);
    // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    matmul_backward(ga->dfch_gelu, g.fcprojw, g.fcprojb, ga->dresidual, a.fch_gelu, w.fcprojw, BT, 4 * C, C);
    gelu_backward(ga->dfch, a.fch, ga->dfch_gelu, (long)BT * 4 * C);
    matmul_backward(ga->dln, g.fcw, g.fcb, ga->dfch, a.ln2, w.fcw, BT, C, 4 * C);
    layernorm_backward(ga->dresidual, g.ln2w, g.ln2b, ga->dln, a.residual2, w.ln2w, a.ln2_mean, a.ln2_rstd, BT, C);
    // residual2 = x + attproj(attention(qkv(ln1(x))))
    matmul_backward(ga->datty, g.attprojw, g.attprojb, ga->dresidual, a.atty, w.attprojw, BT, C, C);
    attention_backward(ga->dqkv, ga->datty, a.qkv, a.att, B, T, C, NH);
    matmul_backward(ga->dln, g.qkvw, g.qkvb, ga->dqkv, a.ln1, w.qkvw, BT, C, 3 * C);
    layernorm_backward(ga->dresidual, g.ln1w, g.ln1b, ga->dln, x, w.ln1w, a.ln1_mean, a.ln1_rstd, BT, C);
}

// ----------------------------------------------------------------------------
// The model interface that trainer.h drives (the CUDA build implements the same functions).

// The model in pieces, for the drivers in zero.h and pipeline.h: embedding, each layer, the head
// (final LayerNorm, tied classifier, loss), and their backward passes, in that order. A micro-batch
// is (B, T) with B and T at most what the model was created for.

static void model_embed_forward(Model *m, const int *inputs, int B, int T) {
    const GPT2Config *c = &m->config;
    int V = c->vocab_size, BT = B * T;
    if (B > m->B || T > m->T) fatal("micro-batch %dx%d is larger than the model's buffers %dx%d", B, T, m->B, m->T);
    for (int i = 0; i < BT; i++) {
        if (inputs[i] < 0 || inputs[i] >= V) fatal("input token %d at position %d is outside the vocabulary of %d", inputs[i], i, V);
    }
    backend_tokens_from_host(m->inputs, inputs, BT);
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
    OuterWeights o = outer_view(m->uparams[0], c);
    encoder_forward(m->act_ptr[ACT_ENCODED], m->inputs, o.wte, o.wpe, B, T, c->channels);
}

static void model_layer_forward(Model *m, int l) { layer_forward(m, l, m->cur_B, m->cur_T); }

// A pipeline stage's boundary: the input of its first layer (received from the stage before, in
// place of the embedding), its last layer's output, and the gradient buffer that holds dloss/d(output)
// before the stage's backward and dloss/d(input) after it.
static float *model_stage_input(Model *m, int B, int T) {
    m->cur_B = m->slot_B[m->slot] = B;
    m->cur_T = m->slot_T[m->slot] = T;
    return m->act_ptr[ACT_ENCODED];
}
static float *model_stage_output(Model *m) { return layer_acts(m, m->last - 1).residual3; }
static float *model_stage_grad(Model *m) { return m->ga.dresidual; }

// With targets: returns the mean loss and leaves dloss/dlogits, scaled by dloss (the weight of one
// token in the step's mean), for model_head_backward. Without: leaves the logits for sampling.
static float model_head_forward(Model *m, const int *targets, float dloss) {
    const GPT2Config *c = &m->config;
    int C = c->channels, V = c->vocab_size, Vp = c->padded_vocab_size, BT = m->cur_B * m->cur_T;
    OuterWeights o = outer_view(m->uparams[0], c);
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3, o.lnfw, o.lnfb, BT, C);
    matmul_forward(a.logits, a.lnf, o.wte, NULL, BT, C, Vp);
    m->mean_loss = -1.0f;
    if (targets) {
        for (int i = 0; i < BT; i++) {
            if (targets[i] < 0 || targets[i] >= V) fatal("target token %d at position %d is outside the vocabulary of %d", targets[i], i, V);
        }
        backend_tokens_from_host(m->targets, targets, BT);
        classifier_forward_backward(a.logits, a.losses, m->targets, BT, V, Vp, dloss);
        m->mean_loss = (float)(backend_sum_losses(a.losses, BT) / BT);
    }
    return m->mean_loss;
}

static const float *model_logits(Model *m, int b, int t) {
    return backend_logits_row(m->act_ptr[ACT_LOGITS] + ((size_t)b * m->cur_T + t) * m->config.padded_vocab_size,
                              m->config.padded_vocab_size);
}

// Accumulates the head's gradients into the outer unit's and leaves dloss/d(last layer output).
static void model_head_backward(Model *m) {
    const GPT2Config *c = &m->config;
    int C = c->channels, Vp = c->padded_vocab_size, BT = m->cur_B * m->cur_T;
    OuterWeights o = outer_view(m->uparams[0], c), g = outer_view(m->ugrads[0], c);
    ActivationTensors a = layer_acts(m, c->num_layers - 1);
    GradActTensors *ga = &m->ga;
    matmul_backward(ga->dlnf, g.wte, NULL, a.logits, a.lnf, o.wte, BT, C, Vp);
    backend_zero(ga->dresidual, (size_t)BT * C);
    layernorm_backward(ga->dresidual, g.lnfw, g.lnfb, ga->dlnf, a.residual3, o.lnfw, a.lnf_mean, a.lnf_rstd, BT, C);
}

static void model_layer_backward(Model *m, int l) { layer_backward(m, l, m->cur_B, m->cur_T); }

static void model_embed_backward(Model *m) {
    OuterWeights g = outer_view(m->ugrads[0], &m->config);
    encoder_backward(g.wte, g.wpe, m->ga.dresidual, m->inputs, m->cur_B, m->cur_T, m->config.channels);
}

#endif
