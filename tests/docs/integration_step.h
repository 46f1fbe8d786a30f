// SPDX-License-Identifier: Apache-2.0
/* The engine step of docs/integration.md in C ("The same step in C"): integration_step.c holds
 * it, compiled as C11 into the test binary; tests/docs/test_integration.cpp runs it for three
 * steps on each cache layout and checks every layer's attention against the CPU reference. Each
 * region between the comments "[doc:NAME]" and "[/doc:NAME]" here and in integration_step.c is a
 * ```c snippet of the document, which IntegrationDoc.CSnippetsAreTheCStepsCode compares with it. */
#ifndef VKPAGED_TESTS_DOCS_INTEGRATION_STEP_H
#define VKPAGED_TESTS_DOCS_INTEGRATION_STEP_H

#include <stddef.h>
#include <stdint.h>
#include <vkpaged/vkpaged.h>

#ifdef __cplusplus
extern "C" {
#endif

/* [doc:c-model] */
/* The model's attention shape, and what one step may hold (the C++ section's). */
enum {
  ENGINE_LAYERS = 2, ENGINE_HEADS = 8, ENGINE_KV_HEADS = 2, ENGINE_HEAD_SIZE = 64, ENGINE_BLOCK_SIZE = 16,
  ENGINE_MAX_BLOCKS_PER_SEQ = 8,  /* M: contexts of up to 128 tokens */
  ENGINE_MAX_POSITION = ENGINE_MAX_BLOCKS_PER_SEQ * ENGINE_BLOCK_SIZE,
  ENGINE_MAX_REQUESTS = 16,       /* S: requests in one step */
  ENGINE_MAX_STEP_TOKENS = 128,   /* T: new tokens in one step (the scheduler's budget) */
  ENGINE_MAX_BLOCK_MOVES = ENGINE_MAX_REQUESTS * ENGINE_MAX_BLOCKS_PER_SEQ  /* swaps or copies */
};

/* One step as the scheduler decides it on the host with the block manager: the block moves,
 * and one request per sequence that runs (new tokens [first, first + count) of it). Starts
 * zeroed. */
typedef struct engine_step {
  vkp_block_copy swap_out[ENGINE_MAX_BLOCK_MOVES], swap_in[ENGINE_MAX_BLOCK_MOVES], copies[ENGINE_MAX_BLOCK_MOVES];
  size_t num_swap_out, num_swap_in, num_copies;
  uint32_t num_requests, num_tokens;  /* S, T */
  uint64_t seqs[ENGINE_MAX_REQUESTS];
  int64_t slots[ENGINE_MAX_STEP_TOKENS];      /* where each new token's keys and values go */
  int64_t positions[ENGINE_MAX_STEP_TOKENS];  /* its position in its sequence */
  int32_t query_starts[ENGINE_MAX_REQUESTS + 1];
  int32_t context_lens[ENGINE_MAX_REQUESTS];  /* positions attended, the new tokens included */
  int32_t block_tables[ENGINE_MAX_REQUESTS * ENGINE_MAX_BLOCKS_PER_SEQ];  /* [S, M], padded with block 0 */
} engine_step;

/* What a step's calls read and write: the arrays are host-visible (the host writes them before
 * the submission), the activations per layer (an engine reuses one set across layers). */
typedef struct engine_buffers {
  vkp_buffer *slots, *positions, *block_tables, *context_lens, *query_starts;  /* host-visible */
  vkp_buffer *query[ENGINE_LAYERS], *key[ENGINE_LAYERS], *value[ENGINE_LAYERS], *output[ENGINE_LAYERS];
  vkp_buffer *cos_sin, *scratch, *status;
} engine_buffers;

/* The model's kernels that write a layer's queries, keys and values for the step's tokens. */
typedef vkp_status (*engine_project_qkv)(VkCommandBuffer cmd, uint32_t layer, const vkp_tensor_view* query,
                                         const vkp_tensor_view* key, const vkp_tensor_view* value, void* user_data);

/* A plan per bucket of steps, made once (the C++ section's EnginePlans), and the scratch the
 * larger of them needs. */
typedef struct engine_plans {
  vkp_attention_plan *decode, *mixed;  /* decode-only steps; steps with prompt chunks */
  uint64_t scratch_bytes;
} engine_plans;
/* [/doc:c-model] */

/* Every function returns VKP_OK or the status of the first call that failed; vkp_last_error()
 * then names what was refused, except for VKP_ERROR_OUT_OF_MEMORY from a step whose arrays are
 * full (the scheduler's budget exceeded; nothing changed then). */
vkp_status step_add_prompt(vkp_block_manager* blocks, engine_step* step, uint64_t seq, const int32_t* prompt,
                           int32_t len, int32_t max_chunk, int32_t* prefill);
vkp_status step_add_decode(vkp_block_manager* blocks, engine_step* step, uint64_t seq, int32_t token);
vkp_status step_preempt(vkp_block_manager* blocks, engine_step* step, uint64_t victim, vkp_bool32* swapped);
vkp_status step_resume(vkp_block_manager* blocks, engine_step* step, uint64_t seq, vkp_bool32* resumed);

/* The buffers of every step (zeroed status word, the cos/sin cache uploaded, the scratch once).
 * Whether it succeeded or not, engine_buffers_destroy destroys what it made (after a failure,
 * read vkp_last_error() first: every vkpaged call clears it). */
vkp_status engine_buffers_create(vkp_context* ctx, uint64_t scratch_bytes, engine_buffers* buf);
void engine_buffers_destroy(engine_buffers* buf);

/* The buckets' plans; engine_plans_destroy destroys what it made, whether it succeeded or not. */
vkp_status engine_plans_create(vkp_context* ctx, const vkp_kv_cache* cache, engine_plans* plans);
void engine_plans_destroy(engine_plans* plans);
vkp_status engine_record_step(VkCommandBuffer cmd, const vkp_kv_cache* cache, const engine_step* step,
                       const vkp_attention_plan* plan, const engine_buffers* buf, engine_project_qkv project_qkv,
                       void* user_data);
/* Picks the step's bucket, writes its arrays padded to it, records, submits and waits; error
 * (error_bytes > 0) receives the message of a failure. */
vkp_status engine_run_step(vkp_context* ctx, const vkp_kv_cache* cache, const engine_plans* plans,
                           const engine_step* step, engine_buffers* buf, engine_project_qkv project_qkv,
                           void* user_data, char* error, size_t error_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VKPAGED_TESTS_DOCS_INTEGRATION_STEP_H */
