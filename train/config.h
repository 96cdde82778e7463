// config.h: the command-line contract shared by the CPU build (train_gpt.c) and the CUDA build
// (train_gpt.cu): every flag, its llm.c letter, its default and its checks, plus the learning-rate
// schedule. Both builds parse with this file so they cannot drift apart. Options with a fixed set of
// values are held as enums (the names below), so nothing compares strings after parsing; every check
// across flags is here too (config_validate, and config_check_world / config_check_model once the world
// and the model are known), and every misuse leaves through usage_error (exit status 2).
#ifndef CONFIG_H
#define CONFIG_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/utils.h"
#include "../arch/model_config.h"  // the block's choices and their names (--mlp)
#include "../backend/target.h"  // --gpu: the cards the plan knows
#include "../optim/optim_args.h"  // --optimizer's kinds and each one's args, which optimizer_args fills

// Under mpirun every rank parses the same flags and reads the same model header, so every rank meets the
// same usage error at the same point: run.h sets these once MPI is up, and then rank 0 alone prints it and
// every rank leaves MPI cleanly before exit(2), so mpirun sees a job that ended, not one that aborted.
static int usage_error_rank = 0;              // this process's rank: only rank 0 prints
static void (*usage_error_leave)(void) = NULL;  // leaves MPI (MPI_Finalize) before the exit

// The one way out for a misused command line: "error: " and the message (which names the flag and
// what it expected), exit status 2.
static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (usage_error_rank == 0) {
        fprintf(stderr, "error: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        fflush(stderr);
    }
    va_end(ap);
    if (usage_error_leave) usage_error_leave();
    exit(2);
}

// The options with a fixed set of values; each names table is in the enum's order, NULL-terminated.
typedef enum { LR_COSINE, LR_LINEAR, LR_CONSTANT, LR_WSD } LrSchedule;
static const char *const LR_SCHEDULE_NAMES[] = {"cosine", "linear", "constant", "wsd", NULL};
typedef enum { COMM_FLAG_MPI, COMM_FLAG_NCCL } CommFlag;  // --comm; comm.h fixes each communicator's transport from it
static const char *const COMM_NAMES[] = {"mpi", "nccl", NULL};
typedef enum { OFFLOAD_NONE, OFFLOAD_OPTIMIZER, OFFLOAD_PARAMS } OffloadWhat;
static const char *const OFFLOAD_NAMES[] = {"none", "optimizer", "params", NULL};
typedef enum { OFFLOAD_TO_CPU, OFFLOAD_TO_NVME } OffloadDevice;
static const char *const OFFLOAD_DEVICE_NAMES[] = {"cpu", "nvme", NULL};
typedef enum { PRECISION_BUILD_DEFAULT = -1, PRECISION_BF16, PRECISION_FP16, PRECISION_FP32 } Precision;
static const char *const PRECISION_NAMES[] = {"bf16", "fp16", "fp32", NULL};
typedef enum { LOSS_SCALE_BY_PRECISION = -1, LOSS_SCALE_DYNAMIC, LOSS_SCALE_NONE, LOSS_SCALE_FIXED } LossScaleMode;
static const char *const LOSS_SCALE_NAMES[] = {"dynamic", "none", NULL};  // or a number: LOSS_SCALE_FIXED

typedef struct {
    // data and files
    const char *train_data;     // glob of train shards; NULL = the embedded synthetic corpus
    const char *val_data;       // glob of val shards
    const char *init;           // checkpoint file or "dN"
    int mlp;                    // --mlp: 0 the model's own ("model"), else MLP_ + 1 (OPT_CHOICE)
    const char *out_dir;        // checkpoints go here; NULL = none written
    const char *tokenizer;      // llm.c tokenizer .bin or tokenizer.json for decoding samples
    const char *log_path;       // JSON-lines log
    // batch
    int micro_batch;            // B
    int seq_len;                // T
    long total_batch_tokens;    // -1 = derive from grad_accum
    int grad_accum;             // -1 = derive from total_batch_tokens
    // optimisation
    int steps;
    int lr_steps;               // steps the schedule spans; 0 = -x (or, on resume, the saved run's)
    float lr, lr_final_frac, wsd_decay_frac;
    int warmup;
    LrSchedule lr_schedule;
    float weight_decay, beta1, beta2, eps, grad_clip;
    OptimizerKind optimizer;    // what updates the matrices inside the blocks (muon.h); AdamW keeps the rest
    float muon_momentum, muon_lr;  // muon_lr 0: --lr
    int muon_nesterov, muon_ns_steps;
    MuonLrAdjust muon_lr_adjust;
    AdafactorOpts adafactor;    // --adafactor-* (adafactor.h)
    int recompute;              // 0..3
    // attention's masks (train/attn_masks.h): documents of a packed row, sliding windows per layer
    int doc_mask;               // --doc-mask: attention within each document
    int doc_token;              // --doc-token: the separator's id; -1 = what the shards' headers record
    int doc_rope_restart;       // --doc-rope-restart: RoPE's positions from 0 in each document
    int attn_window;            // --attn-window W; -1 = none
    const char *attn_window_pattern;  // --attn-window-pattern: which layers are windowed; NULL = all (with a window)
    uint64_t seed;
    int shuffle;
    // evaluation, sampling, checkpoints
    int val_every, val_batches, sample_every, gen_tokens;
    int print_every;            // a step line on the console every N steps (the log has every step)
    const char *eval_mc;        // multiple-choice JSONL scored with each validation (eval_mc.h); NULL = none
    int checkpoint_every, keep_checkpoints, resume;
    int replace_checkpoints;    // a fresh run into an -o holding checkpoints: 1 moves them aside (run.h), 0 refuses
    int dry_run;
    const char *gpu;            // --gpu: the card the plan is for (backend/target.h's GPU_SPECS); NULL: this build's device
    int world;                  // --dry-run --world N: plan a layout of N ranks in this one process; 0 = the ranks started
    int timing;                 // print the step's time breakdown on the console
    int profile;                // time and count FLOPs per model module; a table at the end
    int autotune;               // time the configurations that fit, print them, and the best
    int autotune_world;         // the ranks of the run to tune for (children through mpirun when > 1)
    float mem_limit;            // GiB of memory the autotuner may plan for; 0 = the device's (or the machine's)
    long target_tokens;         // the training length the autotuner and --dry-run give days for
    float tokens_per_s;         // a measured speed, for --dry-run's days; 0 = none
    int zero_stage;             // 0..3
    float comm_timeout;         // seconds a rank may wait on the others; 0 = no watchdog
    int pp;                     // pipeline stages
    int tp;                     // tensor-parallel degree (ranks that split each layer)
    int sp;                     // sequence parallelism with --tp: 1 on, 0 off, -1 (default) on where tp > 1
    CommFlag comm;              // how device buffers move between ranks
    float reduce_bucket_mb;     // ZeRO-2/3 gradient bucket size; 0 = one layer per bucket
    OffloadWhat offload;
    OffloadDevice offload_device;  // host memory, or a swap file under nvme_path
    const char *nvme_path;      // --offload-device nvme: the directory of the swap files
    float nvme_buffer_mb;       // --offload-device nvme: size of each of the ring's buffers
    // precision and loss scaling
    Precision precision;        // PRECISION_BUILD_DEFAULT until config_resolve_precision
    int tf32;                   // fp32: let matmuls use TF32 tensor cores
    LossScaleMode loss_scale;   // LOSS_SCALE_BY_PRECISION until config_resolve_precision: dynamic for fp16, else none
    float loss_scale_fixed;     // LOSS_SCALE_FIXED: the scale
    int loss_scale_power;       // dynamic: the first scale is 2^power
    int loss_scale_window;      // dynamic: clean steps before the scale doubles
    int loss_scale_hysteresis;  // dynamic: overflows tolerated before the scale halves
    float loss_scale_min;       // dynamic: the floor; an overflow at the floor stops the run
} TrainConfig;

static void config_defaults(TrainConfig *c) {
    memset(c, 0, sizeof(*c));
    c->init = "d2";
    c->micro_batch = 8;
    c->seq_len = 64;
    c->total_batch_tokens = -1;
    c->grad_accum = -1;
    c->steps = 300;
    c->lr = 3e-3f;
    c->lr_final_frac = 0.1f;
    c->wsd_decay_frac = 0.2f;
    c->warmup = 30;
    c->lr_schedule = LR_COSINE;
    c->weight_decay = 0.1f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->grad_clip = 1.0f;
    c->optimizer = OPTIMIZER_ADAMW;
    c->muon_momentum = 0.95f;
    c->muon_nesterov = 1;
    c->muon_ns_steps = 5;
    c->muon_lr_adjust = MUON_ADJUST_MATCH_RMS_ADAMW;
    c->adafactor = (AdafactorOpts){1e-2f, -0.8f, 0.0f, 1e-3f, 1.0f, 0.0f, 0};  // torch.optim.Adafactor's defaults
    c->recompute = 0;
    c->doc_token = -1;
    c->attn_window = -1;
    c->seed = 1337;
    c->shuffle = 1;
    c->val_every = 50;
    c->val_batches = 10;
    c->sample_every = 100;
    c->gen_tokens = 64;
    c->print_every = 1;
    c->checkpoint_every = 0;
    c->keep_checkpoints = 2;
    c->resume = 0;
    c->comm_timeout = 900.0f;
    c->pp = 1;
    c->tp = 1;
    c->sp = -1;
    c->comm = COMM_FLAG_MPI;
    c->offload = OFFLOAD_NONE;
    c->offload_device = OFFLOAD_TO_CPU;
    c->precision = PRECISION_BUILD_DEFAULT;
    c->loss_scale = LOSS_SCALE_BY_PRECISION;
    c->nvme_buffer_mb = 64.0f;
    c->loss_scale_power = 16;
    c->loss_scale_window = 1000;
    c->loss_scale_hysteresis = 2;
    c->loss_scale_min = 1.0f;
    c->target_tokens = 100000000000L;
    c->autotune_world = 1;
}

// OPT_CHOICE: a block's choice (model_config.h), read through its one table of names: the field is 0 for "model"
// (the model's own), else the choice's value + 1.
typedef enum { OPT_STR, OPT_INT, OPT_LONG, OPT_U64, OPT_FLOAT, OPT_FLAG, OPT_ENUM, OPT_LOSS_SCALE, OPT_CHOICE } OptKind;

typedef struct {
    const char *shortname;      // llm.c's letter, or NULL
    const char *longname;
    OptKind kind;
    size_t offset;
    const char *help;
    const char *dflt;           // how --help shows the default; NULL: the value config_defaults sets
    const char *const *names;   // OPT_ENUM: the values' names, in the enum's order
    const char *(*choice)(int, const char **);  // OPT_CHOICE: value i's name and help, NULL past the last (model_config.h)
} OptSpec;

#define OPT(s, l, k, field, h) { s, l, k, offsetof(TrainConfig, field), h, NULL, NULL, NULL }
#define OPTD(s, l, k, field, h, d) { s, l, k, offsetof(TrainConfig, field), h, d, NULL, NULL }
#define OPTE(s, l, field, names, h) { s, l, OPT_ENUM, offsetof(TrainConfig, field), h, NULL, names, NULL }
#define OPTC(l, field, choice, h) { NULL, l, OPT_CHOICE, offsetof(TrainConfig, field), h, NULL, NULL, choice }
static const OptSpec OPTIONS[] = {
    OPTD("-i", "--train-data", OPT_STR, train_data, "glob of train token shards", "built-in synthetic corpus"),
    OPTD("-j", "--val-data", OPT_STR, val_data, "glob of validation token shards (the synthetic corpus has its own)", "none"),
    OPT("-e", "--init", OPT_STR, init, "model .bin (llm.c GPT-2 v3/v5, or a Llama-family file), dN for a fresh GPT-2 of depth N, llama-dN for a fresh Llama, or a Llama preset: smollm-135m, llama-3.2-1b, tinyllama-1.1b, qwen2.5-0.5b, llama-3.1-8b (docs/llama.md)"),
    OPTC("--mlp", mlp, mlp_choice_name, "the MLP's activation of a fresh model: GPT-2's file stores only gelu, the Llama family's any (-e llama-dN --mlp relu2: header slot 21 keeps it); model: the model's own (GPT-2 gelu, the Llama family swiglu, a file its header's)"),
    OPTD("-o", "--out-dir", OPT_STR, out_dir, "directory for checkpoints and training state, made with its parents if missing: the run's end is always saved there, -n adds periodic checkpoints (none: nothing is saved)", "none"),
    OPTD(NULL, "--tokenizer", OPT_STR, tokenizer, "llm.c tokenizer .bin or Hugging Face tokenizer.json used to decode samples", "tokenizer.bin (else tokenizer.json) beside the train shards"),
    OPTD(NULL, "--log", OPT_STR, log_path, "write a JSON-lines log here (one line per step, and val lines)", "none"),
    OPT("-b", "--micro-batch", OPT_INT, micro_batch, "sequences per micro-batch B"),
    OPT("-t", "--seq-len", OPT_INT, seq_len, "sequence length T, at most the model's"),
    OPTD("-d", "--total-batch-tokens", OPT_LONG, total_batch_tokens, "tokens per optimizer step; sets the accumulation", "B x T x accumulation x ranks"),
    OPTD(NULL, "--grad-accum", OPT_INT, grad_accum, "micro-batches per optimizer step", "1, or what -d implies"),
    OPT("-x", "--steps", OPT_INT, steps, "optimizer steps to train"),
    OPTD(NULL, "--lr-steps", OPT_INT, lr_steps, "steps the learning-rate schedule spans; a resumed run keeps the saved run's unless this is given", "-x, or on resume the saved run's"),
    OPT("-l", "--lr", OPT_FLOAT, lr, "peak learning rate"),
    OPT("-u", "--warmup", OPT_INT, warmup, "linear warmup steps"),
    OPT("-q", "--lr-final-frac", OPT_FLOAT, lr_final_frac, "final lr as a fraction of the peak"),
    OPTE("-k", "--lr-schedule", lr_schedule, LR_SCHEDULE_NAMES, "cosine | linear | constant | wsd"),
    OPT(NULL, "--wsd-decay-frac", OPT_FLOAT, wsd_decay_frac, "wsd: fraction of the steps spent decaying"),
    OPT("-c", "--weight-decay", OPT_FLOAT, weight_decay, "AdamW decoupled weight decay on matmul and embedding weights"),
    OPT(NULL, "--beta1", OPT_FLOAT, beta1, "AdamW beta1"),
    OPT(NULL, "--beta2", OPT_FLOAT, beta2, "AdamW beta2"),
    OPT(NULL, "--eps", OPT_FLOAT, eps, "AdamW epsilon"),
    OPT(NULL, "--grad-clip", OPT_FLOAT, grad_clip, "clip the global gradient norm to this; 0 = off"),
    OPTE(NULL, "--optimizer", optimizer, OPTIMIZER_NAMES, "adamw | muon: Muon (torch.optim.Muon's update) on each matrix inside the blocks (q, k, v apart, attention's output, the MLP's matrices: GPT-2's fc and proj, the Llama family's up, gate and down apart); AdamW keeps the embeddings, the head, the norms and the biases | adafactor: Adafactor (torch.optim.Adafactor's update) on every tensor, factored second moments for matrices (its settings: --adafactor-lr and the flags after it)"),
    OPT(NULL, "--muon-momentum", OPT_FLOAT, muon_momentum, "Muon's momentum mu: B = mu B + (1 - mu) g"),
    OPT(NULL, "--muon-nesterov", OPT_INT, muon_nesterov, "1: Muon orthogonalises (1 - mu) g + mu B (Nesterov); 0: B"),
    OPT(NULL, "--muon-ns-steps", OPT_INT, muon_ns_steps, "Newton-Schulz iterations of Muon's orthogonalisation"),
    OPTD(NULL, "--muon-lr", OPT_FLOAT, muon_lr, "Muon's peak learning rate (the same schedule, warmup and decay; 0: --lr)", "--lr"),
    OPTE(NULL, "--muon-lr-adjust", muon_lr_adjust, MUON_LR_ADJUST_NAMES, "match_rms_adamw: lr 0.2 sqrt(max(rows, cols)) (Moonshot's, so Muon shares AdamW's lr and decay) | original: lr sqrt(max(1, rows/cols)) (Keller Jordan's)"),
    OPT(NULL, "--adafactor-lr", OPT_FLOAT, adafactor.lr, "Adafactor's peak learning rate (the schedule's; rho = min(lr, 1/sqrt(t)))"),
    OPT(NULL, "--adafactor-beta2-decay", OPT_FLOAT, adafactor.beta2_decay, "Adafactor's beta2 decay (<= 0): the second moments' new weight is t^beta2_decay"),
    OPTD(NULL, "--adafactor-eps1", OPT_FLOAT, adafactor.eps1, "Adafactor's eps1, the second moment's floor (0: torch's None, float32's epsilon)", "0 (None)"),
    OPT(NULL, "--adafactor-eps2", OPT_FLOAT, adafactor.eps2, "Adafactor's eps2, the floor of the parameters' RMS in the step size"),
    OPT(NULL, "--adafactor-d", OPT_FLOAT, adafactor.d, "Adafactor's clipping threshold d: the update is divided by max(1, RMS(U)/d)"),
    OPT(NULL, "--adafactor-weight-decay", OPT_FLOAT, adafactor.weight_decay, "Adafactor's decoupled weight decay, p (1 - lr wd), on matmul and embedding weights"),
    OPT(NULL, "--adafactor-maximize", OPT_INT, adafactor.maximize, "1: Adafactor maximizes (steps along +g)"),
    OPT("-r", "--recompute", OPT_INT, recompute, "0 store all; 1 recompute GELU; 2 also LayerNorm; 3 keep only layer inputs"),
    OPT(NULL, "--doc-mask", OPT_FLAG, doc_mask, "attention within each document of a packed row (block-diagonal causal, Llama 3's): the token after a separator starts a document, the separator ends its own; the separator is the one ./tokenize recorded in the shards' headers, or --doc-token"),
    OPTD(NULL, "--doc-token", OPT_INT, doc_token, "with --doc-mask: the document separator's token id, for shards that record none (or to override theirs)", "the shards' record"),
    OPT(NULL, "--doc-rope-restart", OPT_FLAG, doc_rope_restart, "with --doc-mask and RoPE: each document's positions start at 0"),
    OPTD(NULL, "--attn-window", OPT_INT, attn_window, "sliding-window attention: a query sees itself and the W - 1 keys before it (Mistral's sliding_window), at most -t; on every layer, or those --attn-window-pattern names", "none"),
    OPTD(NULL, "--attn-window-pattern", OPT_STR, attn_window_pattern, "which layers take which window, repeated over the layers: one letter a layer, L (--attn-window) or G (global), e.g. LG for gpt-oss (even layers windowed), LLLG for every 4th layer global; or comma-separated windows (0 global), e.g. 1024,512,512,0; its length must divide the layers", "every layer L"),
    OPT(NULL, "--seed", OPT_U64, seed, "seed for initialisation, data order and sampling"),
    OPT(NULL, "--shuffle", OPT_INT, shuffle, "1 shuffle the training order each epoch, 0 read in order"),
    OPT("-v", "--val-every", OPT_INT, val_every, "validation loss every N steps; 0 = off"),
    OPT("-m", "--val-batches", OPT_INT, val_batches, "micro-batches per validation"),
    OPTD(NULL, "--eval-mc", OPT_STR, eval_mc, "multiple-choice JSONL (token ids; scripts/mc_tokenize.py converts text and HellaSwag) scored with each validation: acc_norm by mean log-likelihood per ending token, and acc", "none"),
    OPT("-s", "--sample-every", OPT_INT, sample_every, "sample text every N steps; 0 = off"),
    OPT("-g", "--gen-tokens", OPT_INT, gen_tokens, "tokens per sample"),
    OPT(NULL, "--print-every", OPT_INT, print_every, "print the step line every N steps (and the first and last, and any skipped step); the --log has every step"),
    OPT("-n", "--checkpoint-every", OPT_INT, checkpoint_every, "with -o, also checkpoint every N steps; 0 = only the run's end (and on SIGTERM/SIGUSR1)"),
    OPT(NULL, "--keep-checkpoints", OPT_INT, keep_checkpoints, "keep the last K checkpoints"),
    OPT("-y", "--resume", OPT_INT, resume, "1 = continue from the latest complete checkpoint in --out-dir"),
    OPT(NULL, "--replace-checkpoints", OPT_INT, replace_checkpoints, "1 = a fresh run (-y 0) into an -o that holds another run's checkpoints moves them aside into -o/replaced-K/ and starts; 0 refuses such a run"),
    OPT("-z", "--zero-stage", OPT_INT, zero_stage, "ZeRO: 0 replicate; 1 shard AdamW state; 2 also gradients; 3 also parameters"),
    OPT(NULL, "--reduce-bucket-mb", OPT_FLOAT, reduce_bucket_mb, "ZeRO-2/3: reduce-scatter gradients in buckets of whole layers up to this size"),
    OPTE(NULL, "--offload", offload, OFFLOAD_NAMES, "none | optimizer (AdamW state and master weights in host memory, or on disk with --offload-device nvme, updated on the CPU) | params (also the ZeRO-3 parameter shards)"),
    OPTE(NULL, "--offload-device", offload_device, OFFLOAD_DEVICE_NAMES, "cpu | nvme: where --offload keeps what it offloads: host memory, or a swap file under --nvme-path streamed through a ring of aligned buffers with direct I/O (ZeRO-Infinity), asynchronous through io_uring where the build has liburing (the run's banner says which)"),
    OPTD(NULL, "--nvme-path", OPT_STR, nvme_path, "--offload-device nvme: directory for the swap file (one per rank, made per run, removed at exit)", "none"),
    OPT(NULL, "--nvme-buffer-mb", OPT_FLOAT, nvme_buffer_mb, "--offload-device nvme: size of each of the ring's 4 host buffers (one piece of master weights, m and v)"),
    OPT(NULL, "--pp", OPT_INT, pp, "pipeline stages (1F1B); the world is tp x data-parallel x pp ranks"),
    OPT(NULL, "--tp", OPT_INT, tp, "tensor-parallel ranks per layer (Megatron's split: heads, the MLP's hidden columns, the vocabulary); the world is tp x data-parallel x pp, TP ranks consecutive"),
    OPTD(NULL, "--sp", OPT_INT, sp, "sequence parallelism with --tp > 1: 1 keeps the residual stream, the norms and their saved activations on B*T/tp token rows per rank (all-gathered before the column-parallel matmuls, reduce-scattered after the row-parallel ones); 0 replicates them", "1 with --tp > 1"),
    OPTE(NULL, "--comm", comm, COMM_NAMES, "mpi (host-staged; several ranks may share a GPU) or nccl (CUDA build, one GPU per rank)"),
    OPT(NULL, "--comm-timeout", OPT_FLOAT, comm_timeout, "abort the job if a rank waits this many seconds on the others; 0 = off"),
    OPTE(NULL, "--precision", precision, PRECISION_NAMES, "bf16 | fp16 | fp32: activations and matmuls (master weights and AdamW stay fp32)"),
    OPT(NULL, "--tf32", OPT_FLAG, tf32, "with --precision fp32 in the CUDA build: let matmuls use TF32 tensor cores (the CPU build refuses it)"),
    OPTD(NULL, "--loss-scale", OPT_LOSS_SCALE, loss_scale, "dynamic | none | a fixed scale", "dynamic with fp16, else none"),
    OPT(NULL, "--loss-scale-power", OPT_INT, loss_scale_power, "dynamic scaling starts at 2^K"),
    OPT(NULL, "--loss-scale-window", OPT_INT, loss_scale_window, "dynamic: double the scale after this many steps without overflow"),
    OPT(NULL, "--loss-scale-hysteresis", OPT_INT, loss_scale_hysteresis, "dynamic: overflows tolerated before the scale halves"),
    OPT(NULL, "--loss-scale-min", OPT_FLOAT, loss_scale_min, "dynamic: the lowest scale; an overflow there stops the run"),
    OPT(NULL, "--timing", OPT_FLAG, timing, "print each step's time breakdown (data, forward, backward, comm, optimizer, other) under its line; with several ranks also comm by axis (tp, pipe_send, pipe_wait, dp_reduce, gather, other), time and bytes, and at the end every rank's bytes per step, a line per stage"),
    OPT(NULL, "--profile", OPT_FLAG, profile, "time each module (embedding, LayerNorm, matmuls, attention, head, optimizer, collectives) over the run; a table of calls, ms, share, GFLOP, GFLOP/s and fraction of peak at the end, and one JSON line in the log"),
    OPT(NULL, "--autotune", OPT_FLAG, autotune, "time every micro-batch size x recompute level x offload that fits the memory plan for this model, data and batch; print them by tokens/s and a 'best:' line of flags"),
    OPT(NULL, "--autotune-world", OPT_INT, autotune_world, "--autotune for a run of this many ranks: also enumerates ZeRO stages, TP degrees and pipeline stages, timing each through mpirun; with --dry-run, lists every layout of N ranks that fits (--gpu's card or --mem-limit) with its memory, communication per step by kind and bubble, in one process"),
    OPTD(NULL, "--mem-limit", OPT_FLOAT, mem_limit, "GiB per rank the autotuner and the memory plan's check may plan for (pretend a smaller device; in the CPU build, less RAM)", "the device's memory (--gpu's card when named); on CPUs the machine's"),
    OPT(NULL, "--target-tokens", OPT_LONG, target_tokens, "the training length (tokens) that --autotune and --dry-run give days for"),
    OPTD(NULL, "--tokens-per-s", OPT_FLOAT, tokens_per_s, "a measured speed (the step line's tok/s): --dry-run then says how many days --target-tokens take", "none"),
    OPT(NULL, "--dry-run", OPT_FLAG, dry_run, "print the configuration and memory plan, then exit (no model memory is allocated, no weight read or made)"),
    OPTD(NULL, "--gpu", OPT_STR, gpu, "plan for this card: h100, h100-nvl, h200, b200, a100-80, a100-40, l40s, a10, l4, rtx4090 (its memory from NVIDIA's datasheet, checked without --mem-limit); in the CPU build (--dry-run only) the plan is what the CUDA build would allocate on it, at --precision (bf16 by default)", "this build's own device"),
    OPTD(NULL, "--world", OPT_INT, world, "with --dry-run: plan a layout of N ranks (with --tp, --pp, -z) in this one process, without starting them: the memory plan of each pipeline stage's ranks", "the ranks started"),
};
#undef OPT
#undef OPTD
#undef OPTE
#undef OPTC
#define NUM_OPTIONS ((int)(sizeof(OPTIONS) / sizeof(OPTIONS[0])))

// What --help says about the binary itself, filled in by the build (trainer.h) before parse_args.
typedef struct {
    const char *name;               // "cpu" or "cuda"
    const char *precisions;         // what --precision accepts
    const char *precision_default;
    int mpi;                        // built with MPI: runs as several ranks under mpirun / srun
    const char *extra;              // anything else the build wants said (the CUDA build's head sizes), or NULL
} BuildInfo;
static BuildInfo build_info = {"unknown", "fp32", "fp32", 0, NULL};

// A flag's default as --help shows it: the value config_defaults sets, or the spec's text.
static void format_default(const OptSpec *o, const TrainConfig *d, char *buf, size_t n) {
    const void *field = (const char *)d + o->offset;
    if (o->offset == offsetof(TrainConfig, precision)) { snprintf(buf, n, "%s in this build", build_info.precision_default); return; }
    if (o->dflt) { snprintf(buf, n, "%s", o->dflt); return; }
    switch (o->kind) {
        case OPT_STR: snprintf(buf, n, "%s", *(const char *const *)field ? *(const char *const *)field : "none"); break;
        case OPT_INT: case OPT_FLAG: snprintf(buf, n, "%d", *(const int *)field); break;
        case OPT_LONG: snprintf(buf, n, "%ld", *(const long *)field); break;
        case OPT_U64: snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)field); break;
        case OPT_FLOAT: snprintf(buf, n, "%g", *(const float *)field); break;
        case OPT_ENUM: snprintf(buf, n, "%s", o->names[*(const int *)field]); break;
        case OPT_CHOICE: snprintf(buf, n, "%s", *(const int *)field ? o->choice(*(const int *)field - 1, NULL) : "model"); break;
        case OPT_LOSS_SCALE: break;  // its spec has the text (OPTD)
    }
}

// An OPT_CHOICE's line: "model | " and the choice's names from its table, then each one's definition.
static void print_choice_help(const OptSpec *o, const char *names, const char *dflt) {
    char list[512] = "model";
    const char *help;
    for (int i = 0; o->choice(i, &help); i++) snprintf(list + strlen(list), sizeof(list) - strlen(list), " | %s", o->choice(i, &help));
    printf("  %-28s %s: %s (default: %s)\n", names, list, o->help, dflt);
    for (int i = 0; o->choice(i, &help); i++) printf("  %-28s   %s: %s\n", "", o->choice(i, &help), help);
}

static void config_defaults(TrainConfig *c);
static void print_help(const char *prog) {
    TrainConfig d;
    config_defaults(&d);
    printf("usage: %s [flags]\n", prog);
    printf("With no flags it trains a small GPT-2 on a built-in synthetic corpus whose entropy is known,\n");
    printf("and prints that floor beside the validation loss.\n\nflags (long form --flag VALUE or --flag=VALUE):\n");
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptSpec *o = &OPTIONS[i];
        char names[64], dflt[96];
        snprintf(names, sizeof(names), "%s%s%s", o->shortname ? o->shortname : "", o->shortname ? ", " : "    ", o->longname);
        format_default(o, &d, dflt, sizeof(dflt));
        if (o->kind == OPT_FLAG && o->offset == offsetof(TrainConfig, dry_run)) printf("  %-28s %s\n", names, o->help);
        else if (o->kind == OPT_CHOICE) print_choice_help(o, names, dflt);
        else printf("  %-28s %s (default: %s)\n", names, o->help, dflt);
    }
    printf("  %-28s %s\n", "-h, --help", "print this help and exit");
    printf("\nthis binary: %s build | precisions %s (default %s) | MPI: %s%s%s\n", build_info.name, build_info.precisions,
           build_info.precision_default, build_info.mpi ? "yes, runs as several ranks under mpirun or srun"
                                                        : "no, one process only (make rebuilds it with MPI once mpicc is on the PATH)",
           build_info.extra ? " | " : "", build_info.extra ? build_info.extra : "");
}

static void parse_value(const OptSpec *o, const char *flagname, const char *v, TrainConfig *c) {
    char *end = NULL;
    void *field = (char *)c + o->offset;
    errno = 0;
    switch (o->kind) {
        case OPT_STR: *(const char **)field = v; return;
        case OPT_INT: {
            long x = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || errno || x < -2147483647L || x > 2147483647L) {
                usage_error("%s: '%s' is not an integer", flagname, v);
            }
            *(int *)field = (int)x; return;
        }
        case OPT_LONG: {
            long x = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || errno) { usage_error("%s: '%s' is not an integer", flagname, v); }
            *(long *)field = x; return;
        }
        case OPT_U64: {
            unsigned long long x = strtoull(v, &end, 10);
            if (*v == '\0' || *v == '-' || *end != '\0' || errno) {
                usage_error("%s: '%s' is not a non-negative integer", flagname, v);
            }
            *(uint64_t *)field = x; return;
        }
        case OPT_FLOAT: {
            float x = strtof(v, &end);
            if (*v == '\0' || *end != '\0' || errno || !isfinite(x)) {
                usage_error("%s: '%s' is not a number", flagname, v);
            }
            *(float *)field = x; return;
        }
        case OPT_FLAG: {
            if (strcmp(v, "1") == 0) *(int *)field = 1;
            else if (strcmp(v, "0") == 0) *(int *)field = 0;
            else { usage_error("%s: '%s' should be 0 or 1", flagname, v); }
            return;
        }
        case OPT_ENUM: {
            char list[128] = "";
            for (int i = 0; o->names[i]; i++) {
                if (strcmp(v, o->names[i]) == 0) { *(int *)field = i; return; }
                snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", o->names[i]);
            }
            usage_error("%s: '%s' is not one of %s", flagname, v, list);
        }
        case OPT_CHOICE: {
            char list[256] = "model";
            if (strcmp(v, "model") == 0) { *(int *)field = 0; return; }
            for (int i = 0; o->choice(i, NULL); i++) {
                if (strcmp(v, o->choice(i, NULL)) == 0) { *(int *)field = i + 1; return; }
                snprintf(list + strlen(list), sizeof(list) - strlen(list), ", %s", o->choice(i, NULL));
            }
            usage_error("%s: '%s' is not one of %s", flagname, v, list);
        }
        case OPT_LOSS_SCALE: {  // dynamic, none, or a positive number a float holds
            for (int i = 0; LOSS_SCALE_NAMES[i]; i++) if (strcmp(v, LOSS_SCALE_NAMES[i]) == 0) { *(int *)field = i; return; }
            double x = strtod(v, &end);
            if (!(x > 0) || *end != '\0' || !isfinite(strtof(v, NULL))) usage_error("%s: '%s' is not dynamic, none or a positive number", flagname, v);
            *(int *)field = LOSS_SCALE_FIXED;
            c->loss_scale_fixed = strtof(v, NULL);
            return;
        }
    }
}

// Parses argv into c (after config_defaults). Exits 2 on anything it does not understand, naming it.
static void parse_args(TrainConfig *c, int argc, char **argv) {
    const OptSpec *value_of = NULL;  // the flag (taking a path or glob) whose value the previous argument was
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {  // under mpirun: once, and MPI left cleanly
            if (usage_error_rank == 0) print_help(argv[0]);
            fflush(stdout);
            if (usage_error_leave) usage_error_leave();
            exit(0);
        }
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        size_t namelen = eq ? (size_t)(eq - arg) : strlen(arg);
        const OptSpec *o = NULL;
        for (int k = 0; k < NUM_OPTIONS && !o; k++) {
            const OptSpec *s = &OPTIONS[k];
            if ((strlen(s->longname) == namelen && strncmp(arg, s->longname, namelen) == 0) ||
                (s->shortname && !eq && strcmp(arg, s->shortname) == 0)) o = s;
        }
        if (!o && arg[0] != '-' && value_of)  // `-i data/train_*.bin` unquoted: the shell made it several words
            usage_error("%s%s%s: '%s' after its value: an unquoted glob that the shell expanded into several files? quote the "
                        "glob (%s 'data/train_*.bin') so that the trainer expands it", value_of->shortname ? value_of->shortname : "",
                        value_of->shortname ? "/" : "", value_of->longname, arg, value_of->shortname ? value_of->shortname : value_of->longname);
        if (!o && arg[0] != '-') usage_error("unexpected argument '%s': every value follows its flag (see --help)", arg);
        if (!o) { usage_error("unknown flag '%s' (see --help)", arg); }
        const char *v;
        if (eq) v = eq + 1;
        else if (o->kind == OPT_FLAG && (i + 1 >= argc || argv[i + 1][0] == '-')) v = "1";
        else if (i + 1 < argc) v = argv[++i];
        else { usage_error("flag %s needs a value", arg); }
        char flagname[80];
        snprintf(flagname, sizeof(flagname), "%s%s%s", o->shortname ? o->shortname : "", o->shortname ? "/" : "", o->longname);
        parse_value(o, flagname, v, c);
        value_of = o->kind == OPT_STR ? o : NULL;
    }
}

static void bad_value(const char *flag, const char *what) {
    usage_error("%s: %s", flag, what);
}

// Checks that do not depend on the model or the world size; batch arithmetic is finished in
// config_resolve_batch once the number of data-parallel ranks is known.
static void config_validate(const TrainConfig *c) {
    if (c->micro_batch < 1) bad_value("-b/--micro-batch", "must be >= 1");
    if (c->seq_len < 1) bad_value("-t/--seq-len", "must be >= 1");
    if (c->steps < 0) bad_value("-x/--steps", "must be >= 0");
    if (c->lr < 0) bad_value("-l/--lr", "must be >= 0");
    if (c->warmup < 0) bad_value("-u/--warmup", "must be >= 0");
    if (c->lr_steps < 0) bad_value("--lr-steps", "must be >= 1 (or 0: as long as -x/--steps)");
    if (c->lr_final_frac < 0 || c->lr_final_frac > 1) bad_value("-q/--lr-final-frac", "must be in [0, 1]");
    if (c->wsd_decay_frac < 0 || c->wsd_decay_frac > 1) bad_value("--wsd-decay-frac", "must be in [0, 1]");
    if (c->weight_decay < 0) bad_value("-c/--weight-decay", "must be >= 0");
    if (c->beta1 < 0 || c->beta1 >= 1) bad_value("--beta1", "must be in [0, 1)");
    if (c->beta2 < 0 || c->beta2 >= 1) bad_value("--beta2", "must be in [0, 1)");
    if (c->eps <= 0) bad_value("--eps", "must be > 0");
    if (c->grad_clip < 0) bad_value("--grad-clip", "must be >= 0 (0 turns clipping off)");
    if (c->muon_momentum < 0 || c->muon_momentum >= 1) bad_value("--muon-momentum", "must be in [0, 1)");
    if (c->muon_nesterov != 0 && c->muon_nesterov != 1) bad_value("--muon-nesterov", "must be 0 or 1");
    if (c->muon_ns_steps < 1 || c->muon_ns_steps > 100) bad_value("--muon-ns-steps", "must be in [1, 100]");
    if (c->muon_lr < 0) bad_value("--muon-lr", "must be >= 0");
    const AdafactorOpts *af = &c->adafactor;
    if (!(af->lr >= 0)) bad_value("--adafactor-lr", "must be >= 0");
    if (!(af->beta2_decay <= 0)) bad_value("--adafactor-beta2-decay", "must be <= 0");
    if (!(af->eps1 >= 0)) bad_value("--adafactor-eps1", "must be >= 0 (0: None)");
    if (!(af->eps2 >= 0)) bad_value("--adafactor-eps2", "must be >= 0");
    if (!(af->d > 0)) bad_value("--adafactor-d", "must be > 0");
    if (!(af->weight_decay >= 0)) bad_value("--adafactor-weight-decay", "must be >= 0");
    if (af->maximize != 0 && af->maximize != 1) bad_value("--adafactor-maximize", "must be 0 or 1");
    if (c->recompute < 0 || c->recompute > 3) bad_value("-r/--recompute", "must be 0, 1, 2 or 3");
    if (c->shuffle != 0 && c->shuffle != 1) bad_value("--shuffle", "must be 0 or 1");
    if (c->val_every < 0) bad_value("-v/--val-every", "must be >= 0 (0 turns it off)");
    if (c->val_batches < 1) bad_value("-m/--val-batches", "must be >= 1");
    if (c->eval_mc && (c->val_every == 0 || (c->train_data && !c->val_data)))
        bad_value("--eval-mc", "is scored with each validation: needs -j/--val-data and -v/--val-every > 0");
    if (c->sample_every < 0) bad_value("-s/--sample-every", "must be >= 0 (0 turns it off)");
    if (c->gen_tokens < 1) bad_value("-g/--gen-tokens", "must be >= 1");
    if (c->print_every < 1) bad_value("--print-every", "must be >= 1");
    if (c->checkpoint_every < 0) bad_value("-n/--checkpoint-every", "must be >= 0 (0: no periodic checkpoints; with -o the end is still saved)");
    if (c->keep_checkpoints < 1) bad_value("--keep-checkpoints", "must be >= 1");
    if (c->resume != 0 && c->resume != 1) bad_value("-y/--resume", "must be 0 or 1");
    if (c->replace_checkpoints != 0 && c->replace_checkpoints != 1) bad_value("--replace-checkpoints", "must be 0 or 1");
    if (c->replace_checkpoints && c->resume) bad_value("--replace-checkpoints", "moves the checkpoints -y 1 would resume from; give one of the two");
    if ((c->checkpoint_every > 0 || c->resume) && c->out_dir == NULL) {
        bad_value(c->resume ? "-y/--resume" : "-n/--checkpoint-every", "needs -o/--out-dir");
    }
    if (c->zero_stage < 0 || c->zero_stage > 3) bad_value("-z/--zero-stage", "must be 0, 1, 2 or 3");
    if (c->offload == OFFLOAD_PARAMS && c->zero_stage != 3) {
        usage_error("--offload params: only ZeRO-3 shards the parameters (got -z %d); use -z 3, or --offload optimizer",
                    c->zero_stage);
    }
    if (c->offload_device == OFFLOAD_TO_NVME) {
        if (c->offload == OFFLOAD_NONE)
            bad_value("--offload-device nvme", "needs --offload optimizer or --offload params (what to put on the disk)");
        if (!c->nvme_path) bad_value("--offload-device nvme", "needs --nvme-path DIR (a directory on a fast local disk)");
    } else if (c->nvme_path) {
        bad_value("--nvme-path", "is only used with --offload-device nvme");
    }
    if (!(c->nvme_buffer_mb > 0) || c->nvme_buffer_mb > 1024) bad_value("--nvme-buffer-mb", "must be in (0, 1024]: one buffer is one transfer");
    if (c->reduce_bucket_mb < 0) bad_value("--reduce-bucket-mb", "must be >= 0");
    if (c->autotune_world < 1) bad_value("--autotune-world", "must be >= 1");
    if (c->world < 0) bad_value("--world", "must be >= 1 (the ranks of the layout to plan)");
    if (c->gpu && !gpu_spec(c->gpu)) {
        char msg[256];
        int n = snprintf(msg, sizeof(msg), "'%s' is not a card the plan knows; expected one of", c->gpu);
        for (size_t i = 0; i < NUM_GPU_SPECS && n < (int)sizeof(msg); i++) n += snprintf(msg + n, sizeof(msg) - n, " %s", GPU_SPECS[i].key);
        bad_value("--gpu", msg);
    }
    if (c->world > 0 && (!c->dry_run || c->autotune))
        usage_error("--world %d plans a layout without starting it: it needs --dry-run%s (to train on %d ranks, start them: "
                    "mpirun -np %d ...)", c->world, c->autotune ? ", not --autotune (which takes --autotune-world)" : "",
                    c->world, c->world);
    if (c->world > 0 && c->autotune_world > 1)
        usage_error("--autotune-world %d with --world %d: give one (with --dry-run, --autotune-world lists every layout of "
                    "its ranks that fits; --world plans the one --tp, --pp and -z name)", c->autotune_world, c->world);
    if (c->mem_limit < 0) bad_value("--mem-limit", "must be > 0 GiB (or 0: the device's memory)");
    if (c->target_tokens < 1) bad_value("--target-tokens", "must be >= 1");
    if (c->tokens_per_s < 0) bad_value("--tokens-per-s", "must be > 0");
    if (c->comm_timeout < 0) bad_value("--comm-timeout", "must be >= 0 (0 turns the watchdog off)");
    if (c->val_data && !c->train_data) bad_value("-j/--val-data", "given without -i/--train-data");
    if (c->loss_scale_power < 0 || c->loss_scale_power > 60) bad_value("--loss-scale-power", "must be in [0, 60]");
    if (c->loss_scale_window < 1) bad_value("--loss-scale-window", "must be >= 1");
    if (c->loss_scale_hysteresis < 1) bad_value("--loss-scale-hysteresis", "must be >= 1");
    if (!(c->loss_scale_min > 0) || c->loss_scale_min > ldexpf(1.0f, c->loss_scale_power)) {
        bad_value("--loss-scale-min", "must be > 0 and at most the first scale 2^--loss-scale-power");
    }
}

// Fills in what depends on the build: the default precision, and whether the build has it.
static void config_resolve_precision(TrainConfig *c, const char *build_default, const char *build_has) {
    if (c->precision == PRECISION_BUILD_DEFAULT)
        for (int i = 0; PRECISION_NAMES[i]; i++) if (strcmp(PRECISION_NAMES[i], build_default) == 0) c->precision = (Precision)i;
    if (c->precision == PRECISION_BUILD_DEFAULT) internal_fault("the build's default precision %s is not one --precision names", build_default);
    if (!strstr(build_has, PRECISION_NAMES[c->precision])) {
        usage_error("--precision %s: this build computes in %s only; ./train_gpt (the CUDA build) runs bf16, fp16 and fp32",
                    PRECISION_NAMES[c->precision], build_has);
    }
    if (c->tf32 && c->precision != PRECISION_FP32) {
        usage_error("--tf32 1: TF32 is a mode of --precision fp32 (this run has %s, whose matmuls already use tensor cores)",
                    PRECISION_NAMES[c->precision]);
    }
    if (c->loss_scale == LOSS_SCALE_BY_PRECISION) c->loss_scale = c->precision == PRECISION_FP16 ? LOSS_SCALE_DYNAMIC : LOSS_SCALE_NONE;
}

// The checks that need the world's size: the pipeline's stages divide it, and ZeRO 2-3 (layer by layer
// within one micro-batch's backward) do not meet 1F1B (which interleaves micro-batches).
static void config_check_world(const TrainConfig *c, int world) {
    // a newcomer's first --pp 2 or --tp 2 is often one process: say how to get a world of several
    const char *one = world == 1 ? "; one process is a world of 1: start the ranks with mpirun -np N, or plan the layout "
                                   "in one process with --dry-run --world N" : "";
    if (c->tp < 1) usage_error("--tp: %d, expected a tensor-parallel degree >= 1", c->tp);
    if (c->sp < -1 || c->sp > 1) usage_error("--sp: %d, expected 0 or 1", c->sp);
    if (c->pp < 1) usage_error("--pp: %d, expected a number of pipeline stages >= 1", c->pp);
    const char *ranks = world == 1 ? "rank" : "ranks";  // "a world of 1 rank"
    if (world % c->pp != 0) usage_error("--pp: %d stages do not divide the world of %d %s%s", c->pp, world, ranks, one);
    if (world % ((long)c->tp * c->pp) != 0)
        usage_error("--tp %d x --pp %d = %ld ranks does not divide the world of %d %s (the world is tp x data-parallel x "
                    "pp%s)", c->tp, c->pp, (long)c->tp * c->pp, world, ranks, one);
    if (c->pp > 1 && c->zero_stage >= 2)
        usage_error("-z/--zero-stage %d with --pp %d: stages 2 and 3 reduce gradients and gather weights layer by layer within "
                    "one micro-batch's backward, which 1F1B interleaves across micro-batches; use -z 0 or 1", c->zero_stage, c->pp);
}

// The checks that need the model: a stage per layer at most, and a sequence the model can hold (the masks' checks
// are train/attn_masks.h's).
static void config_check_model(const TrainConfig *c, int num_layers, int max_seq_len) {
    if (c->pp > num_layers)
        usage_error("--pp: %d stages for a model of %d layers; each stage needs at least one layer", c->pp, num_layers);
    if (c->seq_len > max_seq_len)
        usage_error("-t/--seq-len: %d is longer than the model's maximum sequence length %d", c->seq_len, max_seq_len);
}

// Sets grad_accum from total_batch_tokens (or the other way round) for dp data-parallel ranks.
static void config_resolve_batch(TrainConfig *c, int dp) {
    long per_micro = (long)c->micro_batch * c->seq_len * dp;
    if (c->total_batch_tokens > 0) {
        if (c->total_batch_tokens % per_micro != 0) {
            usage_error("-d/--total-batch-tokens: total batch tokens %ld != micro-batch %d x seq %d x accumulation A "
                        "x data-parallel %d for any whole A (%ld is not a multiple of %ld)", c->total_batch_tokens,
                        c->micro_batch, c->seq_len, dp, c->total_batch_tokens, per_micro);
        }
        long accum = c->total_batch_tokens / per_micro;
        if (c->grad_accum > 0 && c->grad_accum != accum) {
            usage_error("total batch tokens %ld != micro-batch %d x seq %d x accumulation %d x data-parallel %d "
                        "(= %ld); drop one of -d and --grad-accum", c->total_batch_tokens, c->micro_batch, c->seq_len,
                        c->grad_accum, dp, per_micro * c->grad_accum);
        }
        c->grad_accum = (int)accum;
    } else if (c->total_batch_tokens == 0 || c->total_batch_tokens < -1) {
        bad_value("-d/--total-batch-tokens", "must be > 0");
    } else {
        if (c->grad_accum == -1) c->grad_accum = 1;
        if (c->grad_accum < 1) bad_value("--grad-accum", "must be >= 1");
        c->total_batch_tokens = per_micro * c->grad_accum;
    }
}

// Loss scaling, as DeepSpeed's fp16 optimizer does it: the loss (so every gradient) is multiplied
// by the scale, so small fp16 gradients do not flush to zero; gradients are divided by it again
// before the update. A step whose gradients overflow (a non-finite norm) is skipped. An overflow
// spends one unit of hysteresis; with none left the scale halves (and hysteresis is refilled only
// by a doubling). After `window` steps without overflow since the last one, the scale doubles.
// Powers of two keep the scaling exact: in fp32, a scaled run gives the unscaled run's numbers.
typedef struct {
    int dynamic;           // 0: a fixed scale (1 when loss scaling is off)
    float scale, min_scale;
    int window, hysteresis, hysteresis_left;
    int iter;              // steps seen (applied and skipped)
    int last_overflow;     // iter of the last overflow, -1 before any
    int skipped;           // skipped steps so far
} LossScaler;

static void loss_scaler_init(LossScaler *s, const TrainConfig *c) {
    memset(s, 0, sizeof(*s));
    s->last_overflow = -1;
    s->window = c->loss_scale_window;
    s->hysteresis = s->hysteresis_left = c->loss_scale_hysteresis;
    s->min_scale = c->loss_scale_min;
    if (c->loss_scale == LOSS_SCALE_DYNAMIC) { s->dynamic = 1; s->scale = ldexpf(1.0f, c->loss_scale_power); }
    else s->scale = c->loss_scale == LOSS_SCALE_FIXED ? c->loss_scale_fixed : 1.0f;
}

// After a step's gradients are known: returns 1 if the step must be skipped. A fixed scale skips
// overflowed steps too, rather than applying infinities. An overflow at the floor is fatal (returns
// -1): the run cannot make progress, and going on would hide it.
static int loss_scaler_update(LossScaler *s, int overflow) {
    int it = s->iter++;
    if (overflow) {
        s->skipped++;
        if (!s->dynamic) return 1;
        if (s->hysteresis_left <= 1) {
            if (s->scale <= s->min_scale) return -1;
            s->scale = fmaxf(s->scale * 0.5f, s->min_scale);
        } else {
            s->hysteresis_left--;
        }
        s->last_overflow = it;
        return 1;
    }
    if (s->dynamic && (it - s->last_overflow) % s->window == 0) {
        s->hysteresis_left = s->hysteresis;
        s->scale *= 2.0f;
    }
    return 0;
}

// Learning rate at 0-based step `step` of `total` steps: linear warmup to the peak, then decay to
// lr * final_frac by the chosen schedule.
static float lr_at(const TrainConfig *c, int step, int total) {
    float lr = c->lr, lr_min = c->lr * c->lr_final_frac;
    if (step < c->warmup) return lr * (float)(step + 1) / (float)c->warmup;
    LrSchedule k = c->lr_schedule;
    if (k == LR_CONSTANT) return lr;
    int decay_start = c->warmup;
    if (k == LR_WSD) {
        decay_start = total - (int)lroundf(c->wsd_decay_frac * (float)total);
        if (decay_start < c->warmup) decay_start = c->warmup;
        if (step < decay_start) return lr;
    }
    int span = total - decay_start;
    if (span <= 1) return lr_min;
    float progress = (float)(step - decay_start) / (float)(span - 1);  // 0 at the first decay step, 1 at the last
    if (progress > 1.0f) progress = 1.0f;
    if (k == LR_COSINE) return lr_min + 0.5f * (1.0f + cosf((float)M_PI * progress)) * (lr - lr_min);
    return lr - progress * (lr - lr_min);  // linear, and the decay phase of wsd
}

// The run's optimizer as the flags say it (optim/optimizers.h makes it): each optimizer's args, built here once, so
// that no optimizer reads the TrainConfig.
static OptimizerArgs optimizer_args(const TrainConfig *c) {
    OptimizerArgs a = {c->optimizer, c->lr, c->muon_lr > 0 ? c->muon_lr : c->lr, {c->beta1, c->beta2, c->eps, c->weight_decay},
                       {c->muon_momentum, c->muon_nesterov, c->muon_ns_steps, c->muon_lr_adjust}, c->adafactor};
    return a;
}

#endif
