// llama_cfg.h: the tests' Llama-family configs, written from their fields in the order of the family's file header.
#ifndef TEST_LLAMA_CFG_H
#define TEST_LLAMA_CFG_H
#include "arch/llama.h"

// A Llama-family config from its fields in the order of the family's file header (slots 2..20).
static ModelConfig llama_cfg(int maxT, int V, int Vp, int L, int NH, int KV, int C, int hd, int H, int tied, int qkv_bias,
                             int qk_norm, int scaling, float eps, float theta, float factor, float low, float high, int orig) {
    ModelConfig c;
    llama_defaults(&c);
    c.max_seq_len = maxT, c.vocab_size = V, c.padded_vocab_size = Vp, c.num_layers = L, c.num_heads = NH;
    c.num_kv_heads = KV, c.channels = C, c.head_dim = hd, c.ffn_hidden = H, c.tied = tied, c.qkv_bias = qkv_bias;
    c.qk_norm = qk_norm, c.norm_eps = eps;
    c.rope = (RopeParams){scaling, theta, factor, low, high, orig};
    return c;
}

#endif
