// backend.h: the contract between the shared code (model.h, zero.h, pipeline.h, trainer.h and the headers
// they use) and a build. Everything the shared code asks of a build is declared here and nowhere else;
// train_gpt.c (with cpu/) implements it on host memory with OpenMP, train_gpt.cu (with cuda/) on a GPU. A
// third backend is a directory of headers that implement every function below, and a file that includes
// them, this header and the shared ones (as train_gpt.c does); nothing need be defined before any of them.
//
// Memory comes in four kinds, named by what it holds, because each build places them differently:
//   state    the model's parameters, gradients and AdamW moments: device memory, counted for the memory plan
//   scratch  activations, their gradients, workspaces: device memory, counted apart
//   host     a host tier of optimizer state (--offload): page-locked in the CUDA build so copies overlap
//   pinned   small page-locked staging buffers the host reads or fills while the device runs (tokens, losses)
// Every device function is ordered on the build's compute stream: a call returns when the work is issued,
// not done, unless its comment says it waits.
#ifndef BACKEND_H
#define BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include "../arch/family.h"  // ModelConfig, the families and their tables
#include "adamw_args.h"     // AdamWArgs and AdamWSegment, which the AdamW calls take
#include "../arch/attn_mask.h"  // AttnMask: which keys a query sees, every attention call's last argument

// ---- the element of activations and working weights ----
// floatX, X_BYTES: a build whose element is chosen at run time (the CUDA build) declares floatX as an incomplete
// type and X_BYTES as a variable before this header (cuda/common.cuh, cuda/backend.cuh), so shared code moves
// floatX by bytes and only kernels read it. Elsewhere it is float, the CPU build's: a type cannot be declared
// later, and this default cannot hide a mistake, since a build that declared its own floatX after this header
// would declare it twice (a compile error), and its kernels' definitions would not match the declarations below.
#ifndef X_BYTES
typedef float floatX;
#define X_BYTES sizeof(float)
#endif

// ---- the build ----
static const char *backend_build_name(void);         // "cpu" or "cuda": what --help and the run's banner say
static const char *backend_precision_default(void);  // the --precision a run gets when it names none
static const char *backend_precisions_built(void);   // every --precision the build has, for --help
static const char *backend_build_extra(void);        // one more line of --help about the build, or NULL
// Floats attention's forward saves for its backward (the full softmax on the CPU, one log-sum-exp per row on the
// GPU), and the bytes of the backward's workspace (0: none), for the memory plan and model_create; masked: some layer
// runs under a mask other than causal (--doc-mask, --attn-window), whose backward may take another kernel's room.
static size_t backend_att_saved_floats(size_t B, size_t NH, size_t T);
static size_t backend_att_workspace_bytes(int B, int NH, int T, int C, int masked);

// ---- the device ----
static void backend_init(int local_rank);                        // picks this rank's device and prepares it
static void backend_set_precision(const char *precision, int tf32);
static int backend_has_tf32(void);  // 1: --tf32 1 runs fp32 matmuls on TF32 tensor cores; 0: the build refuses it
static const char *backend_device_name(void);                    // for the banner: the card, or the CPU's threads
static double backend_peak_flops(void);                          // dense peak FLOP/s of one device, 0 = unknown
static double backend_profile_peak_flops(const char **source);   // the same for --profile, measured if need be;
                                                                 // *source says where the figure comes from
static size_t backend_peak_device_bytes(void);                   // high-water mark of device memory, 0 = none
static size_t backend_device_capacity(void);                     // what the autotuner plans against

// ---- kernels: the model's layers, forward and backward; shapes as in cpu/ ----
// (The kernels keep llm.c's names, the same in both builds and in dev/cuda/kernels.cu; every other function
// the shared code calls carries the backend_ prefix.)
// Weights and activations are floatX; LayerNorm statistics, losses, attention's saved state and every
// parameter gradient are float. A backward accumulates (+=) into parameter gradients and overwrites dinp.
// matmul_backward with dinp NULL makes the weight's (and bias's) gradient alone, with dweight NULL the input's alone.
static void encoder_forward(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C);
static void encoder_backward(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C);
static void layernorm_forward(floatX *out, float *mean, float *rstd, const floatX *inp, const floatX *weight,
                              const floatX *bias, int N, int C);
static void layernorm_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                               const floatX *weight, const float *mean, const float *rstd, int N, int C);
static void matmul_forward(floatX *out, const floatX *inp, const floatX *weight, const floatX *bias, int N, int C, int OC);
static void matmul_backward(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                            const floatX *weight, int N, int C, int OC);
// The fused forms (the CUDA build's cuBLASLt epilogues; the CPU build runs the two kernels). model.h takes them when
// the backend says they are on (backend_fuses_*), and otherwise the separate kernels.
static int backend_fuses_gelu(void);      // matmul_forward_gelu and matmul_backward_dgelu for the MLP
static int backend_fuses_residual(void);  // matmul_forward_residual for the two projections
static void matmul_forward_gelu(floatX *out, floatX *pre, const floatX *inp, const floatX *weight, const floatX *bias, int N,
                                int C, int OC);  // pre = matmul_forward, out = gelu(pre)
static void matmul_forward_residual(floatX *out, const floatX *residual, const floatX *inp, const floatX *weight,
                                    const floatX *bias, int N, int C, int OC);  // out = residual + matmul_forward
static void matmul_backward_dgelu(floatX *dinp, float *dweight, float *dbias, const floatX *dout, const floatX *inp,
                                  const floatX *weight, const floatX *pre, int N, int C, int OC);  // dinp *= gelu'(pre)
// Attention's mask (arch/attn_mask.h; NULL or {0, NULL}: plain causal): the forward and backward read its doc_start
// in device memory ((B, T) ints); the decode takes a window only (the generated token's document is the prompt's,
// so doc_start must be NULL there): the keys it reads are the window's, rows max(0, t - window + 1)..t.
static void attention_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int C, int NH,
                              const AttnMask *mask);
static void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out, const float *att,
                               int B, int T, int C, int NH, const AttnMask *mask);
static void attention_decode(floatX *out, const floatX *qkv, int t, int C, int NH,
                             const AttnMask *mask);  // one new token vs the cache
// The backward's workspace (backend_att_workspace_bytes(B, NH, T, C, masked), the memory plan's; a build without one
// says 0): model_create allocates it and hands it over here.
static void attention_workspace(void *p, size_t bytes);
static void gelu_forward(floatX *out, const floatX *inp, long N);
static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N);
// ReLU² (--mlp relu2): out = relu(x)^2; dinp = 2 relu(x) dout (overwritten).
static void relu2_forward(floatX *out, const floatX *inp, long N);
static void relu2_backward(floatX *dinp, const floatX *inp, const floatX *dout, long N);
static void residual_forward(floatX *out, const floatX *a, const floatX *b, long N);
// out (N, C) = res + (x + bias) on each row: a row-parallel projection's parts summed (x), its bias added once after the
// sum (Megatron's RowParallelLinear), onto the residual stream (--tp; tensor_parallel.h)
static void residual_bias_forward(floatX *out, const floatX *res, const floatX *x, const floatX *bias, int N, int C);
static void classifier_forward_backward(floatX *logits, float *losses, const int *targets, int N, int V, int Vp,
                                        float dloss);  // targets NULL: logits only; dloss 0: no gradient
// ---- tensor parallelism's kernels (--tp; tensor_parallel.h) ----
// backend_has_tp: whether the build runs --tp > 1 (both builds do).
// The vocabulary-parallel embedding: this rank holds wte's rows [v0, v0 + vn) (row id - v0 here); a token outside
// them contributes zero, so the TP all-reduce leaves the owner's row. wpe, dwpe as encoder_forward's (NULL: none).
// The vocabulary-parallel cross-entropy over this rank's Vpl logit columns (global v0 + j), the first Vl valid, in
// three steps around the TP collectives: _max writes each row's max (-inf with no valid column) to rowmax; _exp
// takes the row's max over the nshards gathered maxima (maxes: nshards blocks of N), replaces the valid logits by
// exp(logit - max) (the row until _finish is the backend's own: the CUDA build keeps the logits and recomputes them),
// and writes the row's sum of them but the target's to sums[i] and its target's logit to sums[N + i] (0 where the
// target is another rank's; every rank remakes the target's term from it); _finish, with sums added over the ranks,
// writes the loss (the whole vocabulary's, the same on every rank) and replaces the row by
// dloss/dlogits = (softmax - onehot(target)) * dloss (0 in padding).
static int backend_has_tp(void);
static void encoder_forward_vocab(floatX *out, const int *inp, const floatX *wte, const floatX *wpe, int B, int T, int C,
                                  int v0, int vn);
static void encoder_backward_vocab(float *dwte, float *dwpe, const floatX *dout, const int *inp, int B, int T, int C,
                                   int v0, int vn);
static void classifier_vocab_max(const floatX *logits, float *rowmax, int N, int Vl, int Vpl);
static void classifier_vocab_exp(floatX *logits, float *sums, const float *maxes, int nshards, const int *targets, int N,
                                 int Vl, int Vpl, int v0);
static void classifier_vocab_finish(floatX *logits, float *losses, const float *sums, const float *maxes, int nshards,
                                    const int *targets, int N, int Vl, int Vpl, int v0, float dloss);
// ---- kernels of the Llama family (issue 31; arch.h's LLAMA tables, docs/llama.md) ----
// The CPU build implements them from cpu/norms.h, cpu/rope.h, cpu/activations.h; the CUDA build's are cuda/norms.cuh, cuda/rope.cuh, cuda/activations.cuh's. Conventions as above: floatX
// activations and weights, float statistics and parameter gradients, a backward accumulates (+=) into parameter
// gradients. Shapes: N rows (B*T tokens), C channels, NH query heads, KV key/value heads (NH % KV == 0), hd the head
// size (even), H SwiGLU's hidden width. A token's packed qkv row is NH query heads, then KV key heads, then KV value
// heads, hd each: R = (NH + 2 KV) hd elements. Semantics are transformers' LlamaForCausalLM in fp32.
// RMSNorm: out = w * x * rstd, rstd = 1 / sqrt(mean(x^2) + eps) (float, N of them). dinp ACCUMULATES (+=): it is the
// residual stream's gradient, as in layernorm_backward.
static void rmsnorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *weight, int N, int C, float eps);
static void rmsnorm_backward(floatX *dinp, float *dweight, const floatX *dout, const floatX *inp, const floatX *weight,
                             const float *rstd, int N, int C);
// QK-norm (Qwen 3, OLMo 2): RMSNorm over hd of every query head (weight q_w, hd) and key head (k_w, hd) of the packed
// qkv (N rows of R); value heads copied. out != inp. rstd (N, NH + KV). The backward OVERWRITES dinp (N rows of R:
// q, k through the norm, v copied) and accumulates dq_w, dk_w.
static void qknorm_forward(floatX *out, float *rstd, const floatX *inp, const floatX *q_w, const floatX *k_w, int N,
                           int NH, int KV, int hd, float eps);
static void qknorm_backward(floatX *dinp, float *dq_w, float *dk_w, const floatX *dout, const floatX *inp,
                            const floatX *q_w, const floatX *k_w, const float *rstd, int N, int NH, int KV, int hd);
// RoPE, rotate-half form, IN PLACE on the q and k heads of qkv (B, T, R); v untouched. cos, sin: float tables in
// device (scratch) memory, (rows, hd/2) each, row p holding position p's angles; token t of every sequence reads
// row t, so the caller passes the tables offset by p0 rows for tokens at positions p0.. (decoding: B = T = 1).
// rope_backward applies the transpose (the inverse rotation) to dqkv in place.
static void rope_forward(floatX *qkv, const float *cos, const float *sin, int B, int T, int NH, int KV, int hd);
static void rope_backward(floatX *dqkv, const float *cos, const float *sin, int B, int T, int NH, int KV, int hd);
// SwiGLU: inp (N, 2H) is the packed fc output, up's H columns then gate's H; out (N, H) = silu(gate) * up. The
// backward OVERWRITES dinp (N, 2H).
static void swiglu_forward(floatX *out, const floatX *inp, int N, int H);
static void swiglu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H);
// GeGLU (Gemma's, --mlp geglu): SwiGLU's packing and contract with GELU (tanh approximation) for SiLU:
// out = gelu_tanh(gate) * up; the backward OVERWRITES dinp (N, 2H).
static void geglu_forward(floatX *out, const floatX *inp, int N, int H);
static void geglu_backward(floatX *dinp, const floatX *dout, const floatX *inp, int N, int H);
// Grouped-query causal attention on the packed qkv: query head h reads key/value head h / (NH / KV),
// scale 1 / sqrt(hd). out (B, T, NH hd); att: backend_att_saved_floats(B, NH, T) floats kept for the backward;
// the workspace is attention_workspace's (backend_att_workspace_bytes(B, NH, T, NH * hd)). The backward OVERWRITES
// dqkv (B, T, R). With KV = NH these are attention_forward/backward's maths (the CPU build's, bit for bit).
// rope_cos, rope_sin NULL: q and k in qkv are after RoPE. Not NULL (RoPE's tables, row t for token t): q and k are
// before it, the calls are rope_forward on a copy and then attention, and the backward's dqkv is rope_backward's
// (the gradient before RoPE). backend_fuses_rope says whether the build does that in the attention kernels' loads
// (the CUDA build: no pass of its own over q and k), which is when model.h passes the tables.
static int backend_fuses_rope(void);
static void attention_gqa_forward(floatX *out, float *att, const floatX *qkv, int B, int T, int NH, int KV, int hd,
                                  const float *rope_cos, const float *rope_sin, const AttnMask *mask);
static void attention_gqa_backward(floatX *dqkv, const floatX *dout, const floatX *qkv, const floatX *out,
                                   const float *att, int B, int T, int NH, int KV, int hd, const float *rope_cos,
                                   const float *rope_sin, const AttnMask *mask);
// Decoding one token at position t: q (NH hd, after RoPE) against the key/value cache rows 0..t (its own key and
// value already stored at row t). kcache, vcache: (rows, KV hd) each, of one layer. out (NH hd).
static void attention_gqa_decode(floatX *out, const floatX *q, const floatX *kcache, const floatX *vcache, int t, int NH,
                                 int KV, int hd, const AttnMask *mask);
// The encoder without a position table: encoder_forward/backward are called with wpe = NULL and dwpe = NULL
// (out = wte[token] only); a build's encoder must accept that. encoder_backward(_vocab) with dwte = NULL adds the
// position table's part alone (a pipeline's input end, whose tied token table the output end updates: pipeline.h).
static void backend_decode_begin(void);  // generation starts: the weights hold still until backend_decode_end
static void backend_decode_end(void);

// ---- graphs: device work recorded once and replayed (the CUDA build's CUDA graphs; the CPU build has none) ----
// The caller brackets a run of device work that issues nothing else (no copy to or from the host, no wait, no
// collective, no host work that must happen every time):
//     if (!backend_graph_begin(g, shape, variant)) { the work; backend_graph_end(g); }
// begin returns 1 when graph g, recorded for the same shape and variant, was launched in place of the work;
// otherwise the caller issues the work, which runs eagerly (a build without graphs, TRAIN_GPT_GRAPHS=0, the first
// run of a shape) or is recorded and then launched by backend_graph_end. A graph freezes every argument its
// kernels were given: shape and variant must tell apart every host value the work depends on (variant: the
// values that change from step to step).
enum { GRAPH_FORWARD, GRAPH_BACKWARD, NUM_GRAPHS };
static int backend_graph_begin(int g, uint64_t shape, uint64_t variant);
static void backend_graph_end(int g);
static void backend_graphs_drop(void);  // every graph forgotten and freed: the buffers they recorded are about to go

// ---- the step's clock (timing.h) ----
// Marks on the compute stream's timeline, numbered from 0 in each step: backend_mark(i) records mark i, the
// moment the device finishes the work issued before it (the CPU build, which runs its work before returning:
// now), and may reuse mark i of an earlier step. backend_step_sync(last) is the step's one synchronisation: the
// host waits until mark `last` has passed, so all the step's work is done. After it, backend_mark_ms(i) is the
// time in ms between marks i - 1 and i (1 <= i <= last).
static void backend_mark(int i);
static void backend_step_sync(int last);
static double backend_mark_ms(int i);

// ---- the device transport for collectives (comm.h's COMM_DEVICE: NCCL in the CUDA build with MPI) ----
// A build without one says 0 to backend_comm_id_bytes, and comm.h never calls the rest. With one, comm.h
// hands the id that rank 0 made (backend_comm_id) to every rank of a group over MPI, and each opens its end
// (backend_comm_open). A collective works in place on the build's memory (world equal shards of `shard` floats,
// as comm.h's of the same name); it is issued after the compute stream's work so far and runs beside it, in the
// order the host issues collectives (the same on every rank). backend_comm_join makes the compute stream's next
// work wait for every collective issued; the host never waits for one (a copy to the host does, as it follows
// the compute stream).
typedef struct BackendComm BackendComm;  // one rank's end of a group, the build's own
static size_t backend_comm_id_bytes(void);  // the size of a group's id; 0: no device transport in this build
static void backend_comm_id(void *id);      // rank 0 of a group makes its id
static BackendComm *backend_comm_open(const void *id, int world, int rank);
static BackendComm *backend_comm_split(BackendComm *dc, int color, int key);  // as MPI_Comm_split, collective
static void backend_comm_close(BackendComm *dc);
static void backend_comm_allreduce_sum(BackendComm *dc, float *buf, size_t n);
static void backend_comm_reduce_scatter_sum(BackendComm *dc, float *buf, size_t shard, int rank);
static void backend_comm_allgather(BackendComm *dc, float *buf, size_t shard, int rank);
// The same three on the build's floatX (--tp's activations, tensor_parallel.h), summed in that type: in the CUDA
// build fp32, bf16 or fp16 (NCCL's sums of them).
static void backend_comm_allreduce_sum_x(BackendComm *dc, floatX *buf, size_t n);
static void backend_comm_reduce_scatter_sum_x(BackendComm *dc, floatX *buf, size_t shard, int rank);
static void backend_comm_allgather_x(BackendComm *dc, floatX *buf, size_t shard, int rank);
static void backend_comm_join(void);

// ---- memory ----
// The builds count what they hand out, which the memory plan is checked against after the model is built.
static size_t backend_state_allocated(void);         // bytes of state and host tier handed out so far
static size_t backend_scratch_allocated(void);       // bytes of scratch handed out so far
static float *backend_alloc_state(size_t n);         // state: n floats, zeroed
static void *backend_alloc_scratch(size_t bytes);    // scratch, zeroed
static void backend_free(void *p);                   // either of the two above
static void backend_zero_state(float *buf, size_t n);
static void backend_zero_scratch(void *p, size_t bytes);
static float *backend_alloc_host_state(size_t n);    // host tier: n floats, zeroed
static void backend_free_host_state(float *p);
static void *backend_alloc_pinned(size_t bytes);     // staging
static void backend_free_pinned(void *p);

// ---- transfers between host and device ----
static void backend_to_host(float *host, const float *buf, size_t n);    // waits
static void backend_from_host(float *buf, const float *host, size_t n);  // the host buffer may be reused at return
static void backend_tokens_from_host(int *dst, const int *src, size_t n);  // src may be reused at return
static void backend_losses_to_host(float *host, const float *losses, int n);  // host: staging; read after _wait
static void backend_losses_wait(void);
static const float *backend_logits_row(const floatX *row, int Vp);  // a row of logits as host floats (waits)

// Bytes of the build's memory (state, scratch) to or from plain host memory, for comm.h's staging and
// point-to-point messages (16-bit activations too, so counted in bytes). Both are ordered after the compute
// stream's work issued so far and finished at return: the host may read `host`, or reuse it, at once.
static int backend_memory_is_host(void);  // 1: the build's memory is host memory, which MPI may move directly
static void backend_bytes_to_host(void *host, const void *buf, size_t bytes);
static void backend_bytes_from_host(void *buf, const void *host, size_t bytes);
// inout[i] += in[i] for n values of the build's floatX in host memory, each sum rounded once to floatX: comm.h's
// MPI path for --tp's 16-bit collectives (fp32 in the CPU build), as NCCL sums two 16-bit values.
static void backend_x_add_host(void *inout, const void *in, size_t n);

// ---- offload: the update's copies on a stream of their own (a ticket per unit) ----
static void backend_offload_begin(void);  // after the gradients are complete
static void backend_offload_to_host(float *host, const float *buf, size_t n, int ticket);
static void backend_offload_wait(int ticket);  // the host waits until ticket's copy has landed
static void backend_offload_from_host(float *buf, const float *host, size_t n);
static void backend_offload_end(void);  // the compute stream waits for the copies back

// ---- element-wise and reductions on state ----
static void backend_copy(float *dst, const float *src, size_t n);
// rows x cols floats between strided matrices (row i at dst + i * dst_stride, src + i * src_stride): a column block
// of a row-major matrix in one launch, not one copy a row.
static void backend_copy_rows(float *dst, size_t dst_stride, const float *src, size_t src_stride, size_t rows, size_t cols);
static void backend_add(float *dst, const float *src, size_t n);
// Sums of squares of `count` buffers in a fixed order: _start issues them, _finish waits and returns doubles.
static void backend_sum_squares_start(const float **xs, const size_t *ns, int count);
static void backend_sum_squares_finish(double *out, int count);

// ---- the optimizer ----
// The whole step's AdamW in one call over a table of tensors' slices, made once (backend_adamw_plan; on a GPU
// the table lives in device memory, so a step copies nothing for it). A segment whose w is not NULL gets its
// working copy (backend_weights_from_master's rounding, seeded as model.h seeds unit `unit` at version a->t,
// w_index the key of p[0], its index in its unit where every outer tensor is held) in the same pass. verdict 1: the gradients' scale and whether to skip
// come from the last backend_update_verdict, not from a->grad_scale, so the update can be issued before the
// host has seen the norm.
static void *backend_adamw_plan(const AdamWSegment *segs, int count);
static void backend_adamw_run(void *plan, const AdamWArgs *a, int verdict);
static void backend_adamw_plan_free(void *plan);
// AdamW on n floats of the host tier (--offload: the host runs it), as backend_muon_*(host = 1) run Muon there.
static void backend_adamw_host(float *p, const float *g, float *m, float *v, size_t n, int decayed, const AdamWArgs *a);
// The update's verdict on the device, in two calls so that ranks can exchange their sums in between:
// backend_norm_local writes this rank's sum of squares (the buffers last started, in order, as _finish adds
// them) as a double into slot (scratch memory, 2 floats); backend_update_verdict adds `count` such slots up in
// rank order and decides: norm = sqrt(sum) / loss_scale; a norm that is not finite skips the update; one over
// clip (> 0) scales the gradients by clip / (norm + 1e-6), and every gradient by 1 / loss_scale. The host's own
// arithmetic (zero.h adds the ranks' sums in the same order), so trainer.h's norm, skip and scale after the
// step's synchronisation are the same numbers.
static void backend_norm_local(float *slot);
static void backend_update_verdict(const float *slots, int count, float loss_scale, float clip);
// Muon (muon.h) on state memory, or with host = 1 on the host tier (--offload: the host runs them). backend_has_muon
// 0: the build refuses --optimizer muon. _momentum on n floats: b = mu b + (1 - mu) g scale, u = nesterov ?
// (1 - mu) g scale + mu b : b. _orthogonalize: x (rows x cols, row-major) becomes its Newton-Schulz
// orthogonalisation in place (muon.h's formula, the coefficients MUON_NS_A, _B, _C, `steps` iterations), work holding
// muon_ns_workspace(rows, cols) floats. _apply: p = p decay - step o.
#define MUON_NS_A 3.4445f
#define MUON_NS_B (-4.7750f)
#define MUON_NS_C 2.0315f
static int backend_has_muon(void);
static void backend_muon_momentum(float *b, float *u, const float *g, size_t n, float mu, float scale, int nesterov, int host);
static void backend_muon_orthogonalize(float *x, int rows, int cols, int steps, float *work, int host);
static void backend_muon_apply(float *p, const float *o, size_t n, float decay, float step, int host);
static int backend_weights_need_copy(void);  // 1: kernels read a floatX working copy of the float master
// n floats of a master to the working copy (bf16: stochastic rounding, each element's draw keyed by seed and its index
// in its unit, index + i for src[i]: model.h passes the offset where every outer tensor is held, so every layout rounds alike)
static void backend_weights_from_master(floatX *dst, const float *src, size_t n, size_t index, uint64_t seed);

#endif
