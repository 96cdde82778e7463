// attn_masks.h: the run's attention masks from its flags (--doc-mask, --doc-token, --doc-rope-restart,
// --attn-window, --attn-window-pattern): their checks, each layer's window, the document separator the shards
// record, the banner's words, and the record a checkpoint keeps of them (a resume with other masks is refused).
// The masks themselves are data (arch/attn_mask.h); the model holds the run's (model_set_masks), the loader
// gives each micro-batch's document starts (dataloader.h).
#ifndef TRAIN_ATTN_MASKS_H
#define TRAIN_ATTN_MASKS_H

#include <ctype.h>
#include "config.h"
#include "../dataloader.h"
#include "checkpoint_format.h"  // TrainState: what a checkpoint records of the masks

// The longest --attn-window-pattern: one entry a layer at most, as many as a model has layers.
#define ATTN_PATTERN_MAX 4096

// The pattern's entries as windows (-1: the --attn-window W, 0: global, else that window) into w; returns how many.
// A string of letters L and G is one entry a letter; anything with a comma or a digit is a comma-separated list of L,
// G or windows. A malformed pattern is a usage error naming the flag and the entry.
static int attn_pattern_parse(const char *p, int *w) {
    int n = 0, list = strchr(p, ',') != NULL;
    for (const char *c = p; *c; c++) list |= isdigit((unsigned char)*c);
    if (*p == '\0') usage_error("--attn-window-pattern: empty; give L (windowed) and G (global) letters, e.g. LLLG");
    for (const char *c = p; *c;) {
        if (n == ATTN_PATTERN_MAX) usage_error("--attn-window-pattern: more than %d entries", ATTN_PATTERN_MAX);
        const char *e = list ? strchr(c, ',') : c + 1;
        if (!e) e = c + strlen(c);
        int len = (int)(e - c);
        if (len == 1 && (*c == 'L' || *c == 'l')) w[n++] = -1;
        else if (len == 1 && (*c == 'G' || *c == 'g')) w[n++] = 0;
        else {
            char *end = NULL;
            long x = list ? strtol(c, &end, 10) : -1;
            if (!list || end != e || len == 0 || x < 0 || x > 1 << 30)
                usage_error("--attn-window-pattern %s: entry '%.*s' is not L, G or a window of 0 (global) or more", p, len, c);
            w[n++] = (int)x;
        }
        c = list && *e ? e + 1 : e;  // past the comma in a list
    }
    return n;
}

// The checks on the flags alone (config_validate's time): a window of at least 1 and within -t, documents' flags
// only with --doc-mask, a pattern that parses and has a window for its L entries, windows within -t.
static void attn_masks_validate(const TrainConfig *c) {
    if (c->attn_window == 0 || c->attn_window < -1)
        usage_error("--attn-window %d: a window is at least 1 key (the query itself); leave the flag out for none", c->attn_window);
    if (c->attn_window > c->seq_len)
        usage_error("--attn-window %d: beyond the context, -t/--seq-len %d (a window of %d keys sees the whole row: leave the flag out)",
                    c->attn_window, c->seq_len, c->seq_len);
    if (!c->doc_mask && c->doc_token != -1) usage_error("--doc-token %d: only with --doc-mask", c->doc_token);
    if (!c->doc_mask && c->doc_rope_restart) usage_error("--doc-rope-restart: only with --doc-mask (its documents)");
    if (c->doc_mask && c->doc_token < -1) usage_error("--doc-token %d: a token id is 0 or more", c->doc_token);
    if (!c->attn_window_pattern) return;
    static int w[ATTN_PATTERN_MAX];
    int n = attn_pattern_parse(c->attn_window_pattern, w);
    for (int i = 0; i < n; i++) {
        if (w[i] == -1 && c->attn_window < 0)
            usage_error("--attn-window-pattern %s: entry %d is L, the --attn-window, which is not given", c->attn_window_pattern, i);
        if (w[i] > c->seq_len)
            usage_error("--attn-window-pattern %s: entry %d, a window of %d, is beyond the context, -t/--seq-len %d",
                        c->attn_window_pattern, i, w[i], c->seq_len);
    }
}

// What a checkpoint records of the layers' windows (checkpoint_format.h's TrainState, words 27..): the shortest
// period n dividing L with window[l] = window[l % n] (0: no layer has one), and the first n windows. A resume must
// train with the same; scripts/export_hf.py reads them to say what transformers will do.
static int attn_masks_period(const int *window, int L) {
    int any = 0;
    for (int l = 0; l < L; l++) any |= window[l] > 0;
    if (!any) return 0;
    for (int n = 1; n < L; n++) {
        if (L % n) continue;
        int ok = 1;
        for (int l = n; l < L && ok; l++) ok = window[l] == window[l % n];
        if (ok) return n;
    }
    return L;
}

// Each of the model's L layers' window into window[L] (0: global); returns whether any layer has one. The pattern
// repeats over the layers, so its length must divide L (gpt-oss's LG over 24 layers; Gemma 3's LLLLLG over 6k).
static int attn_masks_layers(const TrainConfig *c, int L, int *window) {
    for (int l = 0; l < L; l++) window[l] = c->attn_window > 0 ? c->attn_window : 0;
    if (c->attn_window_pattern) {
        static int w[ATTN_PATTERN_MAX];
        int n = attn_pattern_parse(c->attn_window_pattern, w);
        if (n > L || L % n != 0)
            usage_error("--attn-window-pattern %s: %d entries do not fit the model's %d layers (the pattern repeats over "
                        "them: give %d entries or a divisor of %d)", c->attn_window_pattern, n, L, L, L);
        for (int l = 0; l < L; l++) window[l] = w[l % n] == -1 ? c->attn_window : w[l % n];
    }
    if (attn_masks_period(window, L) > STATE_WINDOWS)
        usage_error("--attn-window-pattern: the layers' windows repeat every %d layers; a checkpoint records at most %d",
                    attn_masks_period(window, L), STATE_WINDOWS);
    int any = 0;
    for (int l = 0; l < L; l++) any |= window[l] > 0;
    return any;
}

// The separator --doc-mask cuts documents at: --doc-token, else the one every shard of the loader records. A shard
// with no record (written before ./tokenize kept it, or by another tool) or two that disagree stop the run, naming
// --doc-mask, the file and --doc-token. flag: the loader's flag (-i/--train-data).
static int attn_masks_doc_sep(const TrainConfig *c, const DataLoader *dl, const char *flag, int synthetic, int vocab) {
    if (c->doc_token >= 0) {
        if (c->doc_token >= vocab)
            usage_error("--doc-token %d: outside the model's vocabulary of %d tokens", c->doc_token, vocab);
        return c->doc_token;
    }
    if (synthetic)
        usage_error("--doc-mask: the built-in synthetic corpus has no document separator (each row is one document); give "
                    "shards (-i) that ./tokenize wrote, or name the separator with --doc-token ID");
    const char *file = NULL;
    int sep = dataloader_recorded_sep(dl, &file);
    if (sep == -1)
        fatal("--doc-mask: %s %s records no document separator in its header (words 3 and 4, which ./tokenize writes; "
              "docs/formats.md); name the separator's id with --doc-token ID", flag, file);
    if (sep == -2) {
        int other = -1;
        for (int i = 0; i < dl->nshards; i++) if (strcmp(dl->shards[i].path, file) == 0) other = dl->shards[i].doc_sep;
        fatal("--doc-mask: %s %s records separator %d, %s %d; name the one to use with --doc-token ID", flag, file, other,
              dl->shards[0].path, dl->shards[0].doc_sep);
    }
    if (sep >= vocab) fatal("--doc-mask: %s %s records separator %d, outside the model's vocabulary of %d", flag, file ? file : "",
                            sep, vocab);
    return sep;
}

// The banner's words for the masks (buf empty where attention is plain causal).
static void attn_masks_text(const TrainConfig *c, const int *window, int L, int sep, char *buf, size_t n) {
    buf[0] = '\0';
    size_t k = 0;
    if (c->doc_mask)
        k += snprintf(buf + k, n - k, "documents (separator %d, which ends its document%s)", sep,
                      c->doc_rope_restart ? "; RoPE positions restart in each" : "");
    int windowed = 0;
    for (int l = 0; l < L; l++) windowed += window[l] > 0;
    if (windowed && k < n) {
        k += snprintf(buf + k, n - k, "%ssliding window on %d of %d layers (", k ? " + " : "", windowed, L);
        for (int l = 0; l < L && l < 12 && k < n; l++) k += snprintf(buf + k, n - k, "%s%d", l ? "," : "", window[l]);
        if (L > 12 && k < n) k += snprintf(buf + k, n - k, ",...");
        if (k < n) snprintf(buf + k, n - k, "; 0 global)");
    }
}

// The layers' windows into a checkpoint's record (attn_masks_period's n of them).
static void attn_masks_record(const int *window, int L, TrainState *s) {
    s->window_period = attn_masks_period(window, L);
    memset(s->windows, 0, sizeof(s->windows));
    for (int i = 0; i < s->window_period; i++) s->windows[i] = window[i];
}
// Whether a checkpoint's record s holds these windows (and, as the caller checks, the same documents).
static int attn_masks_same_windows(const TrainState *s, const int *window, int L) {
    if (s->window_period != attn_masks_period(window, L)) return 0;
    for (int l = 0; l < L && s->window_period; l++)
        if (window[l] != s->windows[l % s->window_period]) return 0;
    return 1;
}

#endif
