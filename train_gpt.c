// train_gpt.c: the CPU reference build of the trainer, `./train_gpt_cpu`. Plain fp32 C with OpenMP on every
// hot loop. The kernels and the host-memory backend live in cpu/, one header per layer family (as the CUDA
// build's in cuda/); the model code (model.h), ZeRO (zero.h), the pipeline (pipeline.h) and the training loop
// (trainer.h) are shared with train_gpt.cu, so the two builds run the same loop and differ only in these.
#include "cpu/encoder.h"     // defines: encoder_forward, encoder_backward
#include "cpu/norms.h"       // defines: layernorm_*, rmsnorm_*, qknorm_* (the block's norms)
#include "cpu/matmul.h"      // defines: matmul_forward, matmul_backward and their fused forms (gemm, gemv)
#include "cpu/attention.h"   // defines: attention_forward, attention_backward, attention_decode
#include "cpu/activations.h" // defines: gelu_*, relu2_*, swiglu_* (the MLP's activations), residual_forward
#include "cpu/classifier.h"  // defines: classifier_forward_backward
#include "cpu/vocab.h"       // defines: --tp's vocabulary-parallel encoder_*_vocab, classifier_vocab_*, backend_has_tp
#include "cpu/rope.h"        // defines: rope_* (rotary positions)
#include "cpu/backend.h"     // defines: backend_* (host memory, copies, AdamW, the CPU's device facts)
#include "cpu/muon.h"        // defines: backend_muon_* (Muon's momentum, Newton-Schulz through gemm, step)

#include "backend/backend.h"  // declares: the contract the headers above implement (a mismatch fails the build)

#include "model/model.h"    // defines: Model, the layer pieces both builds run on the functions above
#include "train/trainer.h"  // defines: train_main, the training loop both builds share

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
