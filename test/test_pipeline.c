// test_pipeline.c: the 1F1B schedule and the layer split, as pure functions. For many (stages,
// micro-batches): every micro-batch goes forward then backward exactly once on every stage, each
// operation's dependencies hold, no stage holds more than (stages - stage) micro-batches' activations,
// a simulation of all stages together pairs every send with its receive and never deadlocks, and with
// equal forward/backward costs its idle time is exactly the 1F1B bubble (p-1)/(m+p-1).
#include <math.h>
#include "base/utils.h"
#include "arch/gpt2.h"
#include "parallel/pipeline_schedule.h"
#include "check.h"

#define MAXS 8
#define MAXM 24

// Checks one stage's list on its own; returns an error message or NULL.
static const char *check_stage(int s, int S, int M, const PPOp *ops, int n) {
    int fwd[MAXM] = {0}, bwd[MAXM] = {0}, live = 0, max_live = 0, next_f = 0, next_b = 0;
    for (int k = 0; k < n; k++) {
        PPOp o = ops[k];
        if (o.micro < 0 || o.micro >= M) return "micro-batch index out of range";
        switch (o.kind) {
            case PP_RECV_ACT:
                if (s == 0) return "the first stage receives activations";
                if (k + 1 >= n || ops[k + 1].kind != PP_FWD || ops[k + 1].micro != o.micro) return "recv-act not right before its fwd";
                break;
            case PP_FWD:
                if (o.micro != next_f++) return "forwards out of order";
                fwd[o.micro]++;
                live++;
                if (live > max_live) max_live = live;
                break;
            case PP_SEND_ACT:
                if (s == S - 1) return "the last stage sends activations";
                if (k == 0 || ops[k - 1].kind != PP_FWD || ops[k - 1].micro != o.micro) return "send-act not right after its fwd";
                break;
            case PP_RECV_GRAD:
                if (s == S - 1) return "the last stage receives gradients";
                if (k + 1 >= n || ops[k + 1].kind != PP_BWD || ops[k + 1].micro != o.micro) return "recv-grad not right before its bwd";
                break;
            case PP_BWD:
                if (o.micro != next_b++) return "backwards out of order";
                if (!fwd[o.micro]) return "backward before forward";
                bwd[o.micro]++;
                live--;
                break;
            case PP_SEND_GRAD:
                if (s == 0) return "the first stage sends gradients";
                if (k == 0 || ops[k - 1].kind != PP_BWD || ops[k - 1].micro != o.micro) return "send-grad not right after its bwd";
                break;
        }
    }
    for (int i = 0; i < M; i++) if (fwd[i] != 1 || bwd[i] != 1) return "a micro-batch is not run exactly once each way";
    if (max_live > pp_max_in_flight(s, S, M)) return "more activations in flight than stages - stage";
    return NULL;
}

// Runs all stages together: sends are buffered (FIFO per direction and kind), receives block until
// the message is there, fwd costs 1 and bwd 2 time units. Returns 0 on deadlock or a mismatched pair.
static int simulate(int S, int M, double *idle, double *makespan) {
    static PPOp ops[MAXS][6 * MAXM];
    int n[MAXS], pc[MAXS] = {0};
    double clock[MAXS] = {0}, busy[MAXS] = {0};
    // queues: [stage][0] activations arriving from s-1, [stage][1] gradients arriving from s+1
    int q_micro[MAXS][2][MAXM];
    double q_time[MAXS][2][MAXM];
    int q_head[MAXS][2] = {{0}}, q_tail[MAXS][2] = {{0}};
    for (int s = 0; s < S; s++) n[s] = pp_schedule(s, S, M, ops[s]);
    for (;;) {
        int progressed = 0, done = 1;
        for (int s = 0; s < S; s++) {
            while (pc[s] < n[s]) {
                PPOp o = ops[s][pc[s]];
                int ok = 1;
                if (o.kind == PP_RECV_ACT || o.kind == PP_RECV_GRAD) {
                    int d = o.kind == PP_RECV_GRAD;
                    if (q_head[s][d] == q_tail[s][d]) { ok = 0; }
                    else {
                        int h = q_head[s][d]++;
                        if (q_micro[s][d][h] != o.micro) return 0;
                        if (q_time[s][d][h] > clock[s]) clock[s] = q_time[s][d][h];
                    }
                } else if (o.kind == PP_FWD || o.kind == PP_BWD) {
                    double c = o.kind == PP_FWD ? 1.0 : 2.0;
                    clock[s] += c;
                    busy[s] += c;
                } else {
                    int to = o.kind == PP_SEND_ACT ? s + 1 : s - 1, d = o.kind == PP_SEND_GRAD;
                    int t = q_tail[to][d]++;
                    q_micro[to][d][t] = o.micro;
                    q_time[to][d][t] = clock[s];
                }
                if (!ok) break;
                pc[s]++;
                progressed = 1;
            }
            if (pc[s] < n[s]) done = 0;
        }
        if (done) break;
        if (!progressed) return 0;
    }
    *makespan = 0;
    for (int s = 0; s < S; s++) if (clock[s] > *makespan) *makespan = clock[s];
    for (int s = 0; s < S; s++) idle[s] = 1.0 - busy[s] / *makespan;
    for (int s = 0; s < S; s++) for (int d = 0; d < 2; d++) if (q_head[s][d] != q_tail[s][d]) return 0;
    return 1;
}

// 1F1B's order, stated as its two invariants rather than as a loop: stage s of S runs w = S - s - 1
// warm-up forwards, so (a) when backward k starts, exactly min(M, k + w + 1) forwards have run (its own
// micro-batch's and the one that follows it in the steady state), and (b) when forward j > w starts,
// exactly j - w backwards have run (each steady-state forward follows a backward). A schedule that runs
// a backward before the forward it alternates with, or fills the pipeline with more or fewer forwards,
// breaks one of them. Returns NULL or what is wrong.
static const char *check_1f1b_order(int s, int S, int M, const PPOp *ops, int n) {
    int w = S - s - 1 < M ? S - s - 1 : M, f = 0, b = 0;
    for (int k = 0; k < n; k++) {
        if (ops[k].kind == PP_BWD) {
            int want = b + w + 1 < M ? b + w + 1 : M;
            if (f != want) return "a backward starts with the wrong number of forwards done (1F1B: min(M, k + stages - stage))";
            b++;
        } else if (ops[k].kind == PP_FWD) {
            if (f > w && b != f - w) return "a steady-state forward does not follow exactly one backward per forward";
            if (f <= w && b != 0) return "a backward runs during the warm-up forwards";
            f++;
        }
    }
    return f == M && b == M ? NULL : "not every micro-batch runs forward and backward";
}

int main(void) {
    int cases = 0, bad_stage = 0, bad_sim = 0, bad_bubble = 0, bad_order = 0;
    char first_error[256] = "", order_error[256] = "";
    for (int S = 1; S <= MAXS; S++)
        for (int M = 1; M <= MAXM; M++) {
            cases++;
            for (int s = 0; s < S; s++) {
                PPOp ops[6 * MAXM];
                int n = pp_schedule(s, S, M, ops);
                const char *err = check_stage(s, S, M, ops, n);
                if (err) {
                    if (!bad_stage) snprintf(first_error, sizeof(first_error), "stages %d micro %d stage %d: %s", S, M, s, err);
                    bad_stage++;
                }
                err = check_1f1b_order(s, S, M, ops, n);
                if (err) {
                    if (!bad_order) snprintf(order_error, sizeof(order_error), "stages %d micro %d stage %d: %s", S, M, s, err);
                    bad_order++;
                }
            }
            double idle[MAXS], makespan;
            if (!simulate(S, M, idle, &makespan)) { bad_sim++; continue; }
            // with fwd 1 and bwd 2 units, 1F1B finishes in (m + p - 1) * 3 units, each stage idle (p-1)/(m+p-1)
            double want = pp_bubble_formula(S, M);
            for (int s = 0; s < S; s++) if (fabs(idle[s] - want) > 1e-9 || fabs(makespan - 3.0 * (M + S - 1)) > 1e-9) { bad_bubble++; break; }
        }
    check(bad_stage == 0, "%d (stages, micro-batches) cases: each stage runs every micro-batch forward then backward once, "
          "in order, receives right before and sends right after, at most stages - stage in flight%s%s", cases,
          bad_stage ? ": " : "", first_error);
    check(bad_order == 0, "%d cases: every stage's forwards and backwards follow 1F1B's order (warm-up forwards, then one "
          "forward then one backward, then the drain)%s%s", cases, bad_order ? ": " : "", order_error);
    check(bad_sim == 0, "simulating all stages together: every send meets its receive, no deadlock (%d of %d failed)", bad_sim, cases);
    check(bad_bubble == 0, "simulated idle time equals the 1F1B bubble (p-1)/(m+p-1) on every stage (%d of %d differ)", bad_bubble, cases);
    {
        PPOp ops[6 * MAXM];
        int n = pp_schedule(0, 1, 4, ops), plain = n == 8;
        for (int k = 0; k < n && plain; k++) plain = ops[k].kind == (k % 2 ? PP_BWD : PP_FWD) && ops[k].micro == k / 2;
        check(plain, "one stage is plain gradient accumulation: fwd 0, bwd 0, fwd 1, bwd 1, ...");
    }

    // the split: contiguous, at least a layer a stage, and no other split has a smaller largest stage
    ModelConfig c = {0};
    if (!gpt2_config_from_descriptor("d8", 50257, &c)) fatal("d8 is not a descriptor");
    int T = 1024, good = 1;
    for (int S = 1; S <= 8 && good; S++) {
        int first[MAXS + 1];
        double imb = pp_split(&c, T, S, first);
        double layer = 24.0 * c.channels * c.channels + 4.0 * T * c.channels, head = 2.0 * c.padded_vocab_size * c.channels;
        double worst = 0;
        for (int s = 0; s < S; s++) {
            if (first[s + 1] <= first[s]) good = 0;
            double cost = (first[s + 1] - first[s]) * layer + (s == S - 1 ? head : 0);
            if (cost > worst) worst = cost;
        }
        if (first[0] != 0 || first[S] != c.num_layers) good = 0;
        // brute force over every split of 8 layers into S contiguous non-empty ranges
        double best = INFINITY;
        for (int mask = 0; mask < (1 << (c.num_layers - 1)); mask++) {
            if (__builtin_popcount(mask) != S - 1) continue;
            double w = 0, cur = 0;
            for (int l = 0; l < c.num_layers; l++) {
                cur += layer;
                if (l == c.num_layers - 1) cur += head;
                if (l == c.num_layers - 1 || (mask >> l & 1)) { if (cur > w) w = cur; cur = 0; }
            }
            if (w < best) best = w;
        }
        if (fabs(worst - best) > 1e-6 * best || fabs(imb - worst / ((c.num_layers * layer + head) / S)) > 1e-9) good = 0;
    }
    check(good, "layer split for 8 layers over 1-8 stages: contiguous, non-empty, and as balanced as the best of all splits");

    return check_summary();
}
