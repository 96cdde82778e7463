// train_gpt.cu: the CUDA build of the trainer, `./train_gpt`. It defines the same kernels as the CPU
// reference (train_gpt.c with cpu/), with the same names and argument order, on device memory, and the same
// memory backend; the model code (model.h), ZeRO (zero.h), the pipeline (pipeline.h) and the
// training loop (trainer.h) are shared, so the two builds run the same operations in the same order.
// The kernels live in cuda/, one header per layer family (as llm.c's llmc/); cuda/common.cuh says how
// precision is chosen and how the emulator (dev/cuda/emu) builds the same device code with g++.
#include "cuda/common.cuh"      // defines: cudaCheck, LAUNCH, floatX and WITH_X, XVec and with_vec_width, scratch_get
#include "cuda/encoder.cuh"     // defines: encoder_forward, encoder_backward
#include "cuda/norms.cuh"       // defines: layernorm_*, rmsnorm_*, qknorm_* (the block's norms), column_sums
#include "cuda/matmul.cuh"      // defines: matmul_forward, matmul_backward and their fused forms (cuBLASLt epilogues, plan cache)
#include "cuda/attention.cuh"   // defines: attention_forward, attention_backward (flash, fp32 and mma.sync)
#include "cuda/decode.cuh"      // defines: attention_decode (one token against the key/value cache)
#include "cuda/activations.cuh" // defines: gelu_*, relu2_*, swiglu_* (the MLP's activations), residual_forward
#include "cuda/classifier.cuh"  // defines: classifier_forward_backward
#include "cuda/vocab.cuh"       // defines: --tp's encoder_*_vocab, classifier_vocab_* (not built yet: backend_has_tp 0)
#include "cuda/rope.cuh"        // defines: rope_* (rotary positions; in the attention kernels' loads: attention.cuh)
#include "cuda/adamw.cuh"       // defines: adamw_kernel, weights_bf16_kernel, weights_fp16_kernel
#include "cuda/backend.cuh"     // defines: backend_* (memory, copies, offload stream, AdamW launch, the step's clock, device facts)
#include "cuda/muon.cuh"        // defines: backend_muon_* (Muon's momentum and step kernels, Newton-Schulz on cuBLASLt)
#include "cuda/comm_nccl.cuh"   // defines: backend_comm_* (NCCL, the device transport for comm.h's collectives)

#include "backend/backend.h"  // declares: the contract the headers above implement (a mismatch fails the build)

#include "model/model.h"    // defines: Model, the layer pieces both builds run on the functions above
#include "train/trainer.h"  // defines: train_main, the training loop both builds share

#ifndef TESTING
int main(int argc, char **argv) { return train_main(argc, argv); }
#endif
