// model_state.h: the model's memory, as both builds hold it for every family: the activation layout and its
// recompute levels, activation slots for pipelined micro-batches, the weights the kernels read (working copies made
// from zero.h's master units), each table row's role found once, and the tensors a layer and the outer unit read.
// model.h runs the passes over it.
#ifndef MODEL_STATE_H
#define MODEL_STATE_H
#include "../backend/backend.h"
#include "../backend/target.h"  // --gpu: the CUDA build's facts, where the CPU build plans a card
#include "../backend/timing.h"
#include "block.h"  // the block's choice points and the tensors a layer reads
#include "../parallel/tensor_parallel.h"  // --tp: the collectives around the block's matmuls, the vocabulary-parallel head

// --profile: each kernel call below is preceded by the module it belongs to and the FLOPs it does
// (timing.h charges its time there). FLOPs are counted for the matmuls (2 per multiply-add; backward
// twice forward: the input's and the weight's gradients) and causal attention (the scores and their
// use in the values, over the (T+1)/2 keys a query sees on average; backward twice forward), which is
// the model's arithmetic as 6N + attention counts it; the elementwise kernels are memory-bound and
// counted as 0. A recompute level's repeated kernels are counted again: that work is done.
#define PROF(module, flops) timing_module((module), (flops))
#define MATMUL_FLOPS(BT, IC, OC) (2.0 * (double)(BT) * (double)(IC) * (double)(OC))
#define ATTENTION_FLOPS(B, T, C) (2.0 * (double)(B) * (double)(T) * ((double)(T) + 1.0) * (double)(C))

// Element types. Activations, their gradients and the weights the kernels read are `floatX`: float
// in the CPU build; in the CUDA build an opaque element whose type --precision picks at run time
// (bf16, fp16 or fp32), which only kernels interpret, so this file moves floatX data by bytes
// (X_BYTES each). LayerNorm statistics, losses, attention's saved softmax state, the parameters'
// master copy and their gradients are always float.
static inline floatX *x_at(const floatX *p, size_t n) { return (floatX *)((char *)p + n * X_BYTES); }

// What the memory's sizes are computed from (backend/target.h): this build's own facts, or the CUDA build's where the
// CPU build plans a card (--gpu, which is --dry-run there: nothing this process allocates is sized by them).
static size_t target_x_bytes(void) { return plan_target.cuda_facts ? plan_target.x_bytes : X_BYTES; }
static int target_weights_copy(void) { return plan_target.cuda_facts ? plan_target.weights_copy : backend_weights_need_copy(); }
static size_t target_att_saved_floats(size_t B, size_t NH, size_t T) {
    return plan_target.cuda_facts ? gpu_att_saved_floats(B, NH, T) : backend_att_saved_floats(B, NH, T);
}
// masked: some layer's attention runs under a mask other than causal (the CUDA build's 16-bit backward then takes the
// KV-stationary kernel's room).
static size_t target_att_workspace_bytes(int B, int NH, int T, int C, int masked) {
    if (!plan_target.cuda_facts) return backend_att_workspace_bytes(B, NH, T, C, masked);
    const size_t rows = gpu_att_rows_floats(B, NH, T), m = masked ? gpu_att_masked_floats(plan_target.x_bytes, B, NH, T, C) : 0;
    return (m > rows ? m : rows) * sizeof(float);
}

// Activations. A tensor is kept for every layer only if the recompute level needs it in backward;
// otherwise one layer's copy is shared and backward recomputes it. The level-3 model keeps just
// each layer's output (the next layer's input) and reruns the whole layer. What the block keeps, its
// sizes and levels, is model_config.h's BLOCK_ACTS (rows present by the config's options), each row naming
// the ACT_ role this file reads it by (a role the options leave out is NULL).

// Bytes of one copy of each table entry (each tensor starts 256-byte aligned, as cuBLASLt's fastest kernels want).
static size_t act_entry_bytes(const ArchAct *a, const ArchShape *s, int NH, int B, int T) {
    size_t n = arch_act_elems(a, s, B, T, target_att_saved_floats(B, NH, T));
    return (n * (a->is_float ? sizeof(float) : target_x_bytes()) + 255) / 256 * 256;
}

// An entry's bytes for a config: its TP rank's widths, and with --sp the rows of an entry the table's seq_sharded
// column says each rank keeps B T / tp of (the residual stream and the norms).
static size_t act_config_bytes(const ModelConfig *c, const ArchAct *a, const ArchShape *s, int B, int T) {
    if (c->seq_parallel && c->tp_size > 1 && a->seq_sharded) return act_entry_bytes(a, s, model_heads(c), 1, B * T / c->tp_size);
    return act_entry_bytes(a, s, model_heads(c), B, T);
}
// --sp: the full (B T, C) buffer the gathered rows and the row-parallel matmuls' partial sums pass through.
static size_t model_sp_full_bytes(const ModelConfig *c, size_t BT) {
    return c->seq_parallel && c->tp_size > 1 ? BT * c->channels * target_x_bytes() : 0;
}

// The backward's scratch (block.h's GradActTensors), elements.
static size_t gradact_elems(const ArchShape *s, size_t BT) {
    const size_t *d = s->dim;
    size_t spare = s->opt[ARCH_OPT_QK_NORM] ? d[DIM_QKV] : d[DIM_C];
    return BT * (3 * d[DIM_C] + d[DIM_ATT] + spare + d[DIM_QKV] + d[DIM_FC] + d[DIM_HID]);
}

typedef struct {
    ModelConfig config;
    const Arch *arch;                    // the family's parameter table and its values (arch.h)
    ArchShape shape;
    size_t w_off[NUM_WEIGHT_ROLES];      // where each weight role starts in its unit (SIZE_MAX: none), from the table
    size_t num_params;
    // Each unit's full parameters and where its gradient accumulates (gpt2.h's unit layout). zero.h
    // owns the memory and points these: at every moment, to whatever is resident for that unit.
    float **uparams, **ugrads;
    // The weights the kernels read (floatX). Where floatX is float they are uparams themselves;
    // otherwise a converted copy per unit, remade when the unit's parameters change (wvalid). A
    // model whose layers stream through one buffer (ZeRO-3) keeps one layer copy, for the layer in use.
    floatX **wparams;
    int *wvalid, wcopy, stream_layers, wlayer;
    floatX *wmemory;
    uint64_t wversion;                   // AdamW updates the weights have had: the stochastic rounding's seed
    int B, T, recompute;                 // activation buffers are sized for these
    int first, last;                     // the layers [first, last) this model runs (a pipeline stage)
    // Activation slots: a pipeline stage keeps several micro-batches in flight, one slot each.
    int nslots, slot;
    char *slot_memory;                   // nslots * act_bytes
    int *slot_inputs, *slot_targets, *slot_B, *slot_T;
    size_t act_off[NUM_ACTS];            // bytes, by role
    int act_has[NUM_ACTS];               // the family's table has the role
    size_t act_bytes, gradact_elems;
    char *act_ptr[NUM_ACTS];             // the current slot's tensors
    size_t act_stride[NUM_ACTS];         // bytes between layers (0 for a single shared copy)
    floatX *gradact_memory;
    GradActTensors ga;
    int *inputs, *targets;               // the last forward's micro-batch
    int cur_B, cur_T;
    // The heads' losses since the last model_take_loss, in host memory: each micro-batch's B*T of them
    // copied as its head finishes (asynchronously on a GPU) and summed once the step has synchronised.
    float *loss_host;
    size_t loss_used, loss_cap;
    int *loss_count, loss_items, loss_items_cap;
    // Generation (model_decode_*): while `decoding`, a forward is one token at position kv_pos, and
    // each layer's cached rows of the tokens before it are in kv_cache ((last - first) x kv_len x
    // model_kv_width: GPT-2's whole q, k, v rows; the Llama family's k rows then, apart, its v rows).
    int decoding, kv_len, kv_pos;
    floatX *kv_cache;
    // The run's cache, reserved once for the sample length the memory plan counts (model_kv_reserve): room for
    // kv_reserved positions, or none (0: model_decode_begin allocates for each generation, as the tests' callers do).
    floatX *kv_memory;
    int kv_reserved;
    float *rope_cos, *rope_sin;          // POS_ROPE: the angle tables (maxT, hd/2) each, scratch
    // Attention's masks (arch/attn_mask.h, model_set_masks; none: causal). attn_window: each layer's window (the
    // model's L, by global index; 0 global), NULL for none. With doc_mask, each slot's micro-batch has its rows'
    // document starts (B, T) in device memory (slot_doc, filled by model_doc_starts each micro-batch; the memory
    // plan's model_doc_start_bytes), and slot_doc_on says whether that micro-batch has them (a sample, a multiple-
    // choice item: one document, none). doc_host: the current slot's starts on the host (RoPE's restarts read them).
    int *attn_window, doc_mask, rope_restart;
    int *slot_doc, *slot_doc_on, *doc_start, *doc_host, *slot_doc_host;
    double doc_pairs;                    // visible pairs of every layer summed over the micro-batches given documents since
    long doc_tokens;                     // the caller zeroed these (the step's MFU), and their tokens
    // --tp: this rank's TP group (NULL without), the cross-entropy's scratch, a gathered row of logits (host), and
    // with --sp the full buffer (model_sp_full_bytes)
    TpGroup *tp;
    float *tp_scratch, *tp_logits;
    floatX *tp_full;
} Model;

// Bytes of the weights' working copies of a model running `layers` layers (whether it holds the
// outer unit too in `outer`), one layer copy only when the layers stream through (ZeRO-3).
static size_t model_working_bytes(const ModelConfig *c, int layers, int outer, int stream_layers) {
    if (!target_weights_copy()) return 0;
    size_t n = outer ? model_unit_size(c, 0) : 0;
    n += (size_t)(stream_layers && layers > 0 ? 1 : layers) * model_unit_size(c, 1);
    return n * target_x_bytes();
}

// RoPE's two angle tables (a learned position table is among the parameters instead).
static size_t model_rope_bytes(const ModelConfig *c) {
    return c->positions == POS_ROPE ? 2 * (size_t)c->max_seq_len * (c->head_dim / 2) * sizeof(float) : 0;
}

// --profile's rows as the block's choices name them (NULL: timing.h's name): the norm row is RMSNorm's, the q/k/v
// row holds QK-norm and RoPE, the attention row grouped-query attention's, the activation row the MLP's activation.
// The caller hands them to timing.h (trainer.h); one model per process, so one array serves.
static const char *const *model_row_names(const ModelConfig *c) {
    static const char *names[NUM_ROWS];
    memset(names, 0, sizeof(names));
    if (c->norm != NORM_LAYERNORM) names[MOD_LAYERNORM] = NORM_CHOICES[c->norm].name;
    if (c->positions == POS_ROPE) names[MOD_QKV] = "qkv+rope";
    if (c->num_kv_heads != c->num_heads) names[MOD_ATTENTION] = "gqa attention";
    if (c->mlp != MLP_GELU) names[MOD_GELU] = MLP_CHOICES[c->mlp].name;
    return names;
}

// Where each weight role starts inside its unit, by walking the family's table once: outer tensors in unit 0, a
// layer's in its unit, each in file order; a role the table or the options leave out, or an end stage does not
// hold (the other end's tensors), stays SIZE_MAX.
static void model_find_roles(Model *m) {
    for (int r = 0; r < NUM_WEIGHT_ROLES; r++) m->w_off[r] = SIZE_MAX;
    size_t off[2] = {0, 0};  // outer, per layer
    for (int k = 0; k < m->arch->num_params; k++) {
        const ArchParam *p = &m->arch->params[k];
        size_t sz = arch_tensor_size(p, &m->shape);
        if (sz == 0 || !arch_param_held(p, &m->shape)) continue;
        if (p->role != W_NONE) m->w_off[p->role] = off[p->per_layer];
        off[p->per_layer] += p->per_layer ? sz / m->shape.num_layers : sz;
    }
}

static void model_use_slot(Model *m, int k) {
    m->slot = k;
    char *base = m->slot_memory + (size_t)k * m->act_bytes;
    for (int i = 0; i < NUM_ACTS; i++) m->act_ptr[i] = m->act_has[i] ? base + m->act_off[i] : NULL;
    size_t BT = (size_t)m->B * m->T;
    m->inputs = m->slot_inputs + k * BT;
    m->targets = m->slot_targets + k * BT;
    m->cur_B = m->slot_B[k];
    m->cur_T = m->slot_T[k];
    if (m->slot_doc) {
        m->doc_start = m->slot_doc_on[k] ? m->slot_doc + k * BT : NULL;
        m->doc_host = m->slot_doc_on[k] ? m->slot_doc_host + k * BT : NULL;
    }
}

// The bytes of the document starts a model with --doc-mask keeps (one (B, T) of ints per slot): the memory plan's.
static size_t model_doc_start_bytes(int doc_mask, int B, int T, int slots) {
    return doc_mask ? (size_t)slots * B * T * sizeof(int) : 0;
}

// The run's masks (train/attn_masks.h resolves the flags): window[l] for each of the model's layers (NULL: none),
// and whether micro-batches bring document starts (doc_mask: their device buffer allocated here, per slot), and
// whether RoPE's positions restart with each document (rope_restart).
static void model_set_masks(Model *m, const int *window, int doc_mask, int rope_restart) {
    int L = m->config.num_layers;
    if (window) {
        m->attn_window = (int *)mallocCheck((size_t)L * sizeof(int));
        memcpy(m->attn_window, window, (size_t)L * sizeof(int));
    }
    m->doc_mask = doc_mask;
    m->rope_restart = rope_restart;
    if (doc_mask) {
        size_t BT = (size_t)m->B * m->T;
        m->slot_doc = (int *)backend_alloc_scratch(model_doc_start_bytes(1, m->B, m->T, m->nslots));
        m->slot_doc_host = (int *)callocCheck((size_t)m->nslots * BT, sizeof(int));
        m->slot_doc_on = (int *)callocCheck(m->nslots, sizeof(int));
    }
    model_use_slot(m, m->slot);
}

// The (query, key) pairs attention visits in B rows of T tokens over the model's L layers, layer l with window[l]
// (NULL: none) and the rows' document starts doc (host, (B, T); NULL: none): the FLOPs' count of the visible area.
static double model_mask_pairs(const int *window, int L, const int *doc, int B, int T) {
    double n = 0.0;
    for (int l = 0; l < L; l++) {
        AttnMask k = {window ? window[l] : 0, doc};
        for (int b = 0; b < B; b++) n += (double)attn_mask_visible_pairs(&k, b, T);
    }
    return n;
}

// The current slot's micro-batch's document starts ((B, T), dataloader.h's), or NULL: one document per row (a
// sample, a multiple-choice item). Copied to the device each micro-batch, on every pipeline stage.
static void model_doc_starts(Model *m, const int *doc_start, int B, int T) {
    if (!m->slot_doc) return;  // no --doc-mask: causal
    m->slot_doc_on[m->slot] = doc_start != NULL;
    if (doc_start) {
        size_t BT = (size_t)m->B * m->T;
        int *host = m->slot_doc_host + m->slot * BT;
        // the rows packed as (B, T) of the micro-batch, as the kernels index them
        memcpy(host, doc_start, (size_t)B * T * sizeof(int));
        backend_tokens_from_host(m->slot_doc + m->slot * BT, doc_start, (size_t)B * T);
        m->doc_pairs += model_mask_pairs(m->attn_window, m->config.num_layers, doc_start, B, T);
        m->doc_tokens += (long)B * T;
    }
    model_use_slot(m, m->slot);
}

// Layer l's mask (arch/attn_mask.h): its window, and the micro-batch's document starts (none while decoding).
static AttnMask model_layer_mask(const Model *m, int l) {
    AttnMask k = {m->attn_window ? m->attn_window[l] : 0, m->decoding ? NULL : m->doc_start};
    return k;
}

// Activations and scratch for (B, T) micro-batches through layers [first, last), with `slots`
// micro-batches in flight; the parameters come from zero.h (model_set_unit). stream_layers: the
// layers' parameters are resident one at a time (ZeRO-3), so one working copy serves them all. attn_masked: some
// layer will run under a mask other than causal (model_set_masks'), whose backward's workspace may be larger.
static Model *model_create(const ModelConfig *config, int B, int T, int recompute, int first, int last, int slots,
                           int stream_layers, int attn_masked) {
    Model *m = (Model *)callocCheck(1, sizeof(Model));
    m->config = *config;
    m->arch = model_arch(config);
    m->shape = model_shape(config);
    model_find_roles(m);
    if (config->norm == NORM_LAYERNORM && config->norm_eps != 1e-5f)
        internal_fault("LayerNorm with eps %g: the layernorm kernels are built for llm.c's 1e-5", config->norm_eps);
    m->num_params = model_num_params(config);
    m->B = B; m->T = T; m->recompute = recompute;
    m->first = first; m->last = last; m->nslots = slots;
    m->uparams = (float **)callocCheck(model_num_units(config), sizeof(float *));
    m->ugrads = (float **)callocCheck(model_num_units(config), sizeof(float *));
    int nu = model_num_units(config), outer = first == 0 || last == config->num_layers;
    m->wparams = (floatX **)callocCheck(nu, sizeof(floatX *));
    m->wvalid = (int *)callocCheck(nu, sizeof(int));
    m->wcopy = backend_weights_need_copy();
    m->stream_layers = stream_layers;
    m->wlayer = -1;
    if (m->wcopy) {  // one allocation, carved: the outer unit, then a copy per layer (or one shared)
        m->wmemory = (floatX *)backend_alloc_scratch(model_working_bytes(config, last - first, outer, stream_layers));
        floatX *w = m->wmemory;
        if (outer) { m->wparams[0] = w; w = x_at(w, model_unit_size(config, 0)); }
        for (int l = first; l < last; l++) {
            m->wparams[1 + l] = w;
            if (!stream_layers) w = x_at(w, model_unit_size(config, 1));
        }
    }

    const ArchActs *t = model_act_table(config);
    m->act_bytes = 0;
    for (int i = 0; i < t->num_acts; i++) {  // in the table's order
        const ArchAct *a = &t->acts[i];
        int r = a->role;
        size_t per = act_config_bytes(config, a, &m->shape, B, T);
        int copies = arch_act_copies(a, last - first, recompute);
        m->act_has[r] = per > 0;
        m->act_off[r] = m->act_bytes;
        m->act_stride[r] = copies > 1 ? per : 0;
        m->act_bytes += per * copies;
    }
    m->slot_memory = (char *)backend_alloc_scratch((size_t)slots * m->act_bytes);
    size_t BT = (size_t)B * T, C = config->channels;
    const size_t *d = m->shape.dim;
    m->gradact_elems = gradact_elems(&m->shape, BT);
    m->gradact_memory = (floatX *)backend_alloc_scratch(m->gradact_elems * X_BYTES);
    const size_t att_ws = backend_att_workspace_bytes(B, model_heads(config), T, (int)d[DIM_ATT], attn_masked);
    if (model_sp_full_bytes(config, BT)) m->tp_full = (floatX *)backend_alloc_scratch(model_sp_full_bytes(config, BT));
    if (tp_scratch_floats(config->tp_size, BT)) m->tp_scratch = (float *)backend_alloc_scratch(tp_scratch_floats(config->tp_size, BT) * sizeof(float));
    if (att_ws) attention_workspace(backend_alloc_scratch(att_ws), att_ws);
    floatX *q = m->gradact_memory;
    m->ga.dresidual = q; q = x_at(q, BT * C);
    m->ga.dln = q; q = x_at(q, BT * C);
    m->ga.datty = q; q = x_at(q, BT * d[DIM_ATT]);
    m->ga.dlnf = q; q = x_at(q, BT * C);
    m->ga.dqkv_pre = q;  // QK-norm's; otherwise a spare that keeps the plan's arithmetic simple
    q = x_at(q, BT * (m->shape.opt[ARCH_OPT_QK_NORM] ? d[DIM_QKV] : C));
    m->ga.dqkv = q; q = x_at(q, BT * d[DIM_QKV]);
    m->ga.dfch = q; q = x_at(q, BT * d[DIM_FC]);
    m->ga.dfch_gelu = q;
    m->slot_inputs = (int *)backend_alloc_scratch((size_t)slots * BT * sizeof(int));
    m->slot_targets = (int *)backend_alloc_scratch((size_t)slots * BT * sizeof(int));
    m->slot_B = (int *)callocCheck(slots, sizeof(int));
    m->slot_T = (int *)callocCheck(slots, sizeof(int));
    if (model_rope_bytes(config)) {  // RoPE's angles, computed on the host as transformers computes them
        size_t n = (size_t)config->max_seq_len * (config->head_dim / 2);
        float *host = (float *)mallocCheck(2 * n * sizeof(float));
        rope_table(host, host + n, config->max_seq_len, config->head_dim, &config->rope);
        m->rope_cos = (float *)backend_alloc_scratch(2 * n * sizeof(float));
        m->rope_sin = m->rope_cos + n;
        backend_from_host(m->rope_cos, host, 2 * n);
        free(host);
    }
    model_use_slot(m, 0);
    return m;
}

// --tp: the rank's TP group (its config's tp_size > 1), which the block's collectives run over.
static void model_set_tp(Model *m, TpGroup *tp) {
    if ((tp != NULL) != (m->config.tp_size > 1)) internal_fault("a TP group for a model of tp_size %d", m->config.tp_size);
    m->tp = tp;
}

static void model_set_unit(Model *m, int u, float *params, float *grads) {
    if (m->uparams[u] != params) m->wvalid[u] = 0;
    m->uparams[u] = params;
    m->ugrads[u] = grads;
}

// zero.h calls this whenever it has changed parameters in place (the optimizer, a load). `version`
// is the number of AdamW updates the parameters have had, which a checkpoint saves, so a resumed run
// rounds its working weights with the same seeds as the run that was never interrupted.
static void model_weights_changed(Model *m, uint64_t version) {
    m->wversion = version;
    memset(m->wvalid, 0, model_num_units(&m->config) * sizeof(int));
    m->wlayer = -1;
}

// The working copy of unit u that an update may write in the same pass as the master (zero.h at stage 0):
// NULL where there is none (fp32) or one buffer serves every layer in turn.
static floatX *model_working_copy(Model *m, int u) { return m->wcopy && !m->stream_layers ? m->wparams[u] : NULL; }

// The update wrote every unit's working copy itself (from the master, at this version's rounding).
static void model_weights_converted(Model *m, uint64_t version) {
    model_weights_changed(m, version);
    for (int u = 0; u < model_num_units(&m->config); u++) m->wvalid[u] = m->wparams[u] != NULL;
}

// An update issued on the device skipped itself (a non-finite gradient): nothing changed, the copies
// are those of the version before.
static void model_weights_kept(Model *m, uint64_t version) { m->wversion = version; }

// Unit u's working copy from its master at the rounding's seed: each element keyed by its offset in the unit as a
// holder of every outer tensor lays it out (ParamRun's full_off), so a pipeline's end stage, whose outer unit packs
// only its own tensors, rounds every element as one process does.
static void model_convert_unit(Model *m, int u, uint64_t seed) {
    if (u > 0 || m->shape.ends == 0) {
        backend_weights_from_master(m->wparams[u], m->uparams[u], model_unit_size(&m->config, u), 0, seed);
        return;
    }
    size_t local = 0, full = 0;
    for (int k = 0; k < m->arch->num_params; k++) {
        const ArchParam *p = &m->arch->params[k];
        size_t sz = arch_tensor_size(p, &m->shape);
        if (p->per_layer || sz == 0) continue;
        if (arch_param_held(p, &m->shape)) {
            backend_weights_from_master(x_at(m->wparams[0], local), m->uparams[0] + local, sz, full, seed);
            local += sz;
        }
        full += sz;
    }
}

// Unit u's weights as the kernels read them, converted from the master copy if they changed.
static floatX *model_weights(Model *m, int u) {
    if (!m->wcopy) return (floatX *)m->uparams[u];
    int shared = m->stream_layers && u > 0;
    if (shared ? m->wlayer != u || !m->wvalid[u] : !m->wvalid[u]) {
        // the seed depends on the update count and the unit only, so a unit converted again (ZeRO-3
        // gathers it for backward too) gets the same bits
        model_convert_unit(m, u, mix_seed(m->wversion * 1000003u + (uint64_t)u));
        m->wvalid[u] = 1;
        if (shared) m->wlayer = u;
    }
    return m->wparams[u];
}

static void model_free(Model *m) {
    backend_graphs_drop();  // they replay kernels on the buffers freed here
    free(m->uparams);
    free(m->ugrads);
    free(m->wparams);
    free(m->wvalid);
    if (m->wmemory) backend_free(m->wmemory);
    backend_free(m->slot_memory);
    backend_free(m->gradact_memory);
    backend_free(m->slot_inputs);
    backend_free(m->slot_targets);
    if (m->rope_cos) backend_free(m->rope_cos);
    if (m->slot_doc) backend_free(m->slot_doc);
    free(m->slot_doc_host);
    free(m->slot_doc_on);
    free(m->attn_window);
    if (m->tp_scratch) backend_free(m->tp_scratch);
    if (m->tp_full) backend_free(m->tp_full);
    free(m->tp_logits);
    if (m->kv_memory) backend_free(m->kv_memory);
    free(m->slot_B);
    free(m->slot_T);
    if (m->loss_host) backend_free_pinned(m->loss_host);
    free(m->loss_count);
    free(m);
}

// The activation pointers of layer l (shared copies where the recompute level drops a tensor; NULL for a role
// the family lacks). Strides are in elements of a (B, T) sized buffer; a smaller micro-batch uses the front of each.
static ActivationTensors layer_acts(const Model *m, int l) {
    char *p[NUM_ACTS];
    for (int i = 0; i < NUM_ACTS; i++) p[i] = m->act_ptr[i] ? m->act_ptr[i] + (size_t)(l - m->first) * m->act_stride[i] : NULL;
    ActivationTensors a;
    a.encoded = (floatX *)p[ACT_ENCODED]; a.ln1 = (floatX *)p[ACT_LN1];
    a.ln1_mean = (float *)p[ACT_LN1_MEAN]; a.ln1_rstd = (float *)p[ACT_LN1_RSTD];
    a.qkv = (floatX *)p[ACT_QKV]; a.atty = (floatX *)p[ACT_ATTY]; a.att = (float *)p[ACT_ATT];
    a.attproj = (floatX *)p[ACT_ATTPROJ]; a.residual2 = (floatX *)p[ACT_RESIDUAL2]; a.ln2 = (floatX *)p[ACT_LN2];
    a.ln2_mean = (float *)p[ACT_LN2_MEAN]; a.ln2_rstd = (float *)p[ACT_LN2_RSTD];
    a.fch = (floatX *)p[ACT_FCH]; a.fch_gelu = (floatX *)p[ACT_FCH_GELU]; a.fcproj = (floatX *)p[ACT_FCPROJ];
    a.residual3 = (floatX *)p[ACT_RESIDUAL3]; a.lnf = (floatX *)p[ACT_LNF];
    a.lnf_mean = (float *)p[ACT_LNF_MEAN]; a.lnf_rstd = (float *)p[ACT_LNF_RSTD];
    a.logits = (floatX *)p[ACT_LOGITS]; a.losses = (float *)p[ACT_LOSSES];
    a.qkv_pre = (floatX *)p[ACT_QKV_PRE]; a.qk_rstd = (float *)p[ACT_QK_RSTD];
    return a;
}

static const floatX *layer_input(const Model *m, int l) {
    return l == m->first ? (const floatX *)m->act_ptr[ACT_ENCODED] : layer_acts(m, l - 1).residual3;
}

// A layer's weights (floatX) and gradients (float) by role, at model_find_roles' offsets.
static LayerWeights layer_weights(const Model *m, floatX *u) {
    floatX *p[NUM_LAYER_ROLES];
    for (int r = 0; r < NUM_LAYER_ROLES; r++) p[r] = m->w_off[r] == SIZE_MAX ? NULL : x_at(u, m->w_off[r]);
    LayerWeights w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]};
    return w;
}

static LayerGrads layer_grads(const Model *m, float *u) {
    float *p[NUM_LAYER_ROLES];
    for (int r = 0; r < NUM_LAYER_ROLES; r++) p[r] = m->w_off[r] == SIZE_MAX ? NULL : u + m->w_off[r];
    LayerGrads g = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13]};
    return g;
}

// The outer unit: wte, wpe (GPT-2), the final norm's weight and bias (GPT-2's), and the head (wte when tied, else
// lm_head).
typedef struct { floatX *wte, *wpe, *lnfw, *lnfb, *head; } OuterWeights;
typedef struct { float *wte, *wpe, *lnfw, *lnfb, *head; } OuterGrads;

static OuterWeights outer_weights(const Model *m, floatX *u) {
    floatX *p[NUM_WEIGHT_ROLES] = {0};
    for (int r = W_WTE; r < NUM_WEIGHT_ROLES; r++) p[r] = m->w_off[r] == SIZE_MAX ? NULL : x_at(u, m->w_off[r]);
    OuterWeights w = {p[W_WTE], p[W_WPE], p[W_LNFW], p[W_LNFB], p[W_LM_HEAD] ? p[W_LM_HEAD] : p[W_WTE]};
    return w;
}

static OuterGrads outer_grads(const Model *m, float *u) {
    float *p[NUM_WEIGHT_ROLES] = {0};
    for (int r = W_WTE; r < NUM_WEIGHT_ROLES; r++) p[r] = m->w_off[r] == SIZE_MAX ? NULL : u + m->w_off[r];
    OuterGrads g = {p[W_WTE], p[W_WPE], p[W_LNFW], p[W_LNFB], p[W_LM_HEAD] ? p[W_LM_HEAD] : p[W_WTE]};
    return g;
}


#endif
