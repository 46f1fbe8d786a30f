// SPDX-License-Identifier: Apache-2.0
/* The engine step of docs/integration.md in C: the scheduler's side with the block manager, the
 * step's plan from the cache, and one command buffer that moves blocks, writes every layer's new
 * keys and values with rotary embedding and runs attention, with its barriers. Compiled as C11;
 * the regions between "[doc:NAME]" and "[/doc:NAME]" are the document's ```c snippets. */
#include "docs/integration_step.h"

#include <string.h>

/* [doc:c-schedule] */
/* Every vkpaged call returns a status: the first failure ends the function with it, and
 * vkp_last_error() names the argument and the value. */
#define TRY(call)                                \
  do {                                           \
    const vkp_status status_ = (call);           \
    if (status_ != VKP_OK) return status_;       \
  } while (0)

/* Room in the step's arrays for one more request of `tokens` new tokens (the scheduler keeps a
 * step within its budget; past it, VKP_ERROR_OUT_OF_MEMORY before anything changed). */
static int has_room(const engine_step* step, int32_t tokens) {
  return step->num_requests < ENGINE_MAX_REQUESTS && tokens <= ENGINE_MAX_STEP_TOKENS - (int32_t)step->num_tokens;
}

/* The request's arrays, its new tokens' slots already at step->slots[T...]: positions
 * [first, first + count), its context length, query start and block table. */
static vkp_status add_request(vkp_block_manager* blocks, engine_step* step, uint64_t seq, int32_t first,
                              int32_t count) {
  const uint32_t s = step->num_requests, t = step->num_tokens;
  const int32_t* table = NULL;
  size_t width = 0;
  TRY(vkp_block_manager_block_table(blocks, seq, ENGINE_MAX_BLOCKS_PER_SEQ, &table, &width));
  memcpy(&step->block_tables[s * ENGINE_MAX_BLOCKS_PER_SEQ], table, width * sizeof(int32_t));
  for (int32_t j = 0; j < count; ++j) step->positions[t + (uint32_t)j] = first + j;
  step->seqs[s] = seq;
  step->context_lens[s] = first + count;
  step->query_starts[s + 1] = (int32_t)t + count;
  step->num_requests = s + 1;
  step->num_tokens = t + (uint32_t)count;
  return VKP_OK;
}

/* A decode request: the newest token gets a slot (a new block when the last one is full; a
 * copy-on-write copy of the last block when another sequence shares it). */
vkp_status step_add_decode(vkp_block_manager* blocks, engine_step* step, uint64_t seq, int32_t token) {
  if (!has_room(step, 1)) return VKP_ERROR_OUT_OF_MEMORY;
  vkp_append_result appended;
  TRY(vkp_append_result_init(&appended));
  TRY(vkp_block_manager_append_token(blocks, seq, token, &appended));  /* can_append first, else preempt */
  if (appended.has_copy) step->copies[step->num_copies++] = appended.copy;
  int32_t len = 0;
  TRY(vkp_block_manager_context_len(blocks, seq, &len));
  step->slots[step->num_tokens] = appended.slot;
  return add_request(blocks, step, seq, len - 1, 1);
}

/* A new prompt: the prefix cache says how many leading tokens (whole blocks) are already in the
 * cache; the step prefills the rest (at most max_chunk now, the others in later steps' chunks),
 * attending the cached prefix through the block table. *prefill: the tokens left to prefill, or
 * -1 to try again later. */
vkp_status step_add_prompt(vkp_block_manager* blocks, engine_step* step, uint64_t seq, const int32_t* prompt,
                           int32_t len, int32_t max_chunk, int32_t* prefill) {
  *prefill = -1;
  if (!has_room(step, len < max_chunk ? len : max_chunk)) return VKP_ERROR_OUT_OF_MEMORY;
  vkp_admission admission;
  TRY(vkp_block_manager_can_allocate(blocks, prompt, (size_t)len, &admission));
  if (admission != VKP_ADMISSION_OK) return VKP_OK;  /* later (or never: too long) */
  int32_t cached = 0;
  TRY(vkp_block_manager_add_sequence(blocks, seq, prompt, (size_t)len, &cached));
  if (cached == len) cached = len - 1;  /* all cached: the last token still needs its query */
  const int32_t count = len - cached < max_chunk ? len - cached : max_chunk;
  TRY(vkp_block_manager_slot_mapping(blocks, seq, cached, count, &step->slots[step->num_tokens]));
  *prefill = len - cached;
  return add_request(blocks, step, seq, cached, count);
}
/* [/doc:c-schedule] */

/* [doc:c-preempt] */
/* Out of blocks (can_append false): the newest running sequence leaves before anything is
 * recorded. Swapped out while the host pool has room ((device, host) pairs, copied first thing in
 * the step; *swapped = 1), else preempted for recompute (its blocks freed; *swapped = 0). */
vkp_status step_preempt(vkp_block_manager* blocks, engine_step* step, uint64_t victim, vkp_bool32* swapped) {
  size_t num_blocks = 0;
  const int32_t* table = NULL;
  TRY(vkp_block_manager_block_table(blocks, victim, 0, &table, &num_blocks));
  if (num_blocks > ENGINE_MAX_BLOCK_MOVES - step->num_swap_out) return VKP_ERROR_OUT_OF_MEMORY;
  TRY(vkp_block_manager_can_swap_out(blocks, &victim, 1, swapped));
  if (!*swapped) return vkp_block_manager_preempt(blocks, victim, NULL);
  const vkp_block_copy* pairs = NULL;  /* the manager's, until its next call that returns an array */
  size_t count = 0;
  TRY(vkp_block_manager_swap_out(blocks, &victim, 1, &pairs, &count));
  memcpy(&step->swap_out[step->num_swap_out], pairs, count * sizeof(*pairs));
  step->num_swap_out += count;
  return VKP_OK;
}

/* Back in when the device has room again: (host, device) pairs, copied before anything reads
 * its blocks (*resumed = 1). It then decodes as before. */
vkp_status step_resume(vkp_block_manager* blocks, engine_step* step, uint64_t seq, vkp_bool32* resumed) {
  size_t num_blocks = 0;
  const int32_t* table = NULL;
  TRY(vkp_block_manager_host_block_table(blocks, seq, &table, &num_blocks));
  if (num_blocks > ENGINE_MAX_BLOCK_MOVES - step->num_swap_in) return VKP_ERROR_OUT_OF_MEMORY;
  vkp_admission admission;
  TRY(vkp_block_manager_can_swap_in(blocks, &seq, 1, &admission));
  *resumed = admission == VKP_ADMISSION_OK;
  if (!*resumed) return VKP_OK;
  const vkp_block_copy* pairs = NULL;
  size_t count = 0;
  TRY(vkp_block_manager_swap_in(blocks, &seq, 1, &pairs, &count));
  memcpy(&step->swap_in[step->num_swap_in], pairs, count * sizeof(*pairs));
  step->num_swap_in += count;
  return VKP_OK;
}
/* [/doc:c-preempt] */

vkp_status engine_buffers_create(vkp_context* ctx, uint64_t scratch_bytes, engine_buffers* buf) {
  memset(buf, 0, sizeof(*buf));
  if (scratch_bytes > 0) TRY(vkp_buffer_create(ctx, (size_t)scratch_bytes, VKP_MEMORY_DEVICE, &buf->scratch));
  const size_t f16 = sizeof(uint16_t);
  const vkp_memory_kind host = VKP_MEMORY_HOST_VISIBLE, device = VKP_MEMORY_DEVICE;
  TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * sizeof(int64_t), host, &buf->slots));
  TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * sizeof(int64_t), host, &buf->positions));
  TRY(vkp_buffer_create(ctx, ENGINE_MAX_REQUESTS * ENGINE_MAX_BLOCKS_PER_SEQ * sizeof(int32_t), host,
                        &buf->block_tables));
  TRY(vkp_buffer_create(ctx, ENGINE_MAX_REQUESTS * sizeof(int32_t), host, &buf->context_lens));
  TRY(vkp_buffer_create(ctx, (ENGINE_MAX_REQUESTS + 1) * sizeof(int32_t), host, &buf->query_starts));
  for (uint32_t l = 0; l < ENGINE_LAYERS; ++l) {
    TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * ENGINE_HEADS * ENGINE_HEAD_SIZE * f16, device,
                          &buf->query[l]));
    TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * ENGINE_KV_HEADS * ENGINE_HEAD_SIZE * f16, device,
                          &buf->key[l]));
    TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * ENGINE_KV_HEADS * ENGINE_HEAD_SIZE * f16, device,
                          &buf->value[l]));
    TRY(vkp_buffer_create(ctx, ENGINE_MAX_STEP_TOKENS * ENGINE_HEADS * ENGINE_HEAD_SIZE * f16, device,
                          &buf->output[l]));
  }
  /* The cos/sin cache vLLM's RotaryEmbedding builds: [max_position, rotary_dim] f32. */
  float cos_sin[ENGINE_MAX_POSITION * ENGINE_HEAD_SIZE];
  vkp_host_tensor host_cos_sin = {cos_sin, VKP_DTYPE_F32, 2, {ENGINE_MAX_POSITION, ENGINE_HEAD_SIZE}};
  TRY(vkp_rotary_cos_sin_cache(ENGINE_MAX_POSITION, ENGINE_HEAD_SIZE, 10000.0, &host_cos_sin));
  TRY(vkp_buffer_create(ctx, sizeof(cos_sin), device, &buf->cos_sin));
  const vkp_buffer_view cos_sin_view = vkp_buffer_view_of(buf->cos_sin, 0, sizeof(cos_sin));
  TRY(vkp_upload(ctx, &cos_sin_view, cos_sin, sizeof(cos_sin)));
  const uint32_t zero = 0;
  TRY(vkp_buffer_create(ctx, sizeof(zero), device, &buf->status));
  const vkp_buffer_view status_view = vkp_buffer_view_of(buf->status, 0, sizeof(zero));
  return vkp_upload(ctx, &status_view, &zero, sizeof(zero));
}

void engine_buffers_destroy(engine_buffers* buf) {
  vkp_buffer* all[] = {buf->slots, buf->positions, buf->block_tables, buf->context_lens, buf->query_starts,
                       buf->cos_sin, buf->scratch, buf->status};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) vkp_buffer_destroy(all[i]);
  for (uint32_t l = 0; l < ENGINE_LAYERS; ++l) {
    vkp_buffer_destroy(buf->query[l]);
    vkp_buffer_destroy(buf->key[l]);
    vkp_buffer_destroy(buf->value[l]);
    vkp_buffer_destroy(buf->output[l]);
  }
  memset(buf, 0, sizeof(*buf));
}

/* [doc:c-plan] */
/* Once, at start-up: a plan for a bucket of up to ENGINE_MAX_REQUESTS requests and `tokens` new
 * tokens, max_query_tokens at most per request, contexts of up to M * B; the cache fills in what
 * it knows (heads, head size, block size, blocks, dtype, layout). *scratch_bytes becomes the
 * larger of its value and the plan's scratch. */
static vkp_status plan_bucket(vkp_context* ctx, const vkp_kv_cache* cache, uint32_t tokens, uint32_t max_query_tokens,
                              vkp_attention_plan** plan, uint64_t* scratch_bytes) {
  vkp_attention_shape batch, shape;
  vkp_attention_plan_info info;
  TRY(vkp_attention_shape_init(&batch));
  TRY(vkp_attention_shape_init(&shape));
  TRY(vkp_attention_plan_info_init(&info));
  batch.num_requests = ENGINE_MAX_REQUESTS;
  batch.num_query_tokens = tokens;
  batch.num_heads = ENGINE_HEADS;
  batch.max_blocks_per_seq = ENGINE_MAX_BLOCKS_PER_SEQ;
  batch.query_dtype = VKP_DTYPE_F16;
  TRY(vkp_kv_cache_attention_shape(cache, &batch, &shape));
  TRY(vkp_attention_plan_create_bucket(ctx, &shape, max_query_tokens, NULL, plan));
  TRY(vkp_attention_plan_info_get(*plan, &info));
  if (info.scratch_bytes > *scratch_bytes) *scratch_bytes = info.scratch_bytes;
  return VKP_OK;
}

/* Decode-only steps (each request one new token) on the decode kernels, steps with prompt chunks
 * on the attention kernels: every step of a bucket runs its plan, so the scratch is allocated
 * once (engine_buffers_create), for the larger. One plan serves every layer. */
vkp_status engine_plans_create(vkp_context* ctx, const vkp_kv_cache* cache, engine_plans* plans) {
  memset(plans, 0, sizeof(*plans));
  TRY(plan_bucket(ctx, cache, ENGINE_MAX_REQUESTS, 1, &plans->decode, &plans->scratch_bytes));
  return plan_bucket(ctx, cache, ENGINE_MAX_STEP_TOKENS, ENGINE_MAX_STEP_TOKENS, &plans->mixed, &plans->scratch_bytes);
}
/* [/doc:c-plan] */

void engine_plans_destroy(engine_plans* plans) {
  vkp_attention_plan_destroy(plans->decode);
  vkp_attention_plan_destroy(plans->mixed);
  memset(plans, 0, sizeof(*plans));
}

/* [doc:c-record] */
/* Makes src_access of src_stage available and visible to dst_access of dst_stage. */
static void barrier(VkCommandBuffer cmd, VkPipelineStageFlags src_stage, VkAccessFlags src_access,
                    VkPipelineStageFlags dst_stage, VkAccessFlags dst_access) {
  const VkMemoryBarrier b = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, src_access, dst_access};
  vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, &b, 0, NULL, 0, NULL);
}
#define COMPUTE VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
#define TRANSFER VK_PIPELINE_STAGE_TRANSFER_BIT
#define SHADER_RW (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT)
#define TRANSFER_RW (VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

/* A tensor view [d0, d1, d2] (the first `rank` of them) at the start of a buffer. */
static vkp_status tensor(const vkp_buffer* buffer, vkp_dtype dtype, int32_t rank, int64_t d0, int64_t d1, int64_t d2,
                         vkp_tensor_view* out) {
  const int64_t shape[3] = {d0, d1, d2};
  return vkp_buffer_tensor(buffer, dtype, shape, rank, 0, out);
}

vkp_status engine_record_step(VkCommandBuffer cmd, const vkp_kv_cache* cache, const engine_step* step,
                       const vkp_attention_plan* plan, const engine_buffers* buf, engine_project_qkv project_qkv,
                       void* user_data) {
  vkp_attention_shape bucket;  /* the plan's: every view is its S requests and T tokens */
  TRY(vkp_attention_shape_init(&bucket));
  TRY(vkp_attention_plan_shape_get(plan, &bucket));
  const int64_t S = bucket.num_requests, T = bucket.num_query_tokens;
  /* The previous step's cache writes and reads finish before this step's copies touch blocks. */
  barrier(cmd, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, TRANSFER, TRANSFER_RW);
  /* 1. Swaps, out before in: a block a swap-out frees may be where a swap-in lands. */
  if (step->num_swap_out > 0) {
    TRY(vkp_kv_cache_record_swap_out(cache, cmd, step->swap_out, step->num_swap_out));
    barrier(cmd, TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, TRANSFER, TRANSFER_RW);
  }
  if (step->num_swap_in > 0) {
    TRY(vkp_kv_cache_record_swap_in(cache, cmd, step->swap_in, step->num_swap_in));
    barrier(cmd, TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, TRANSFER, TRANSFER_RW);
  }
  /* 2. Copy-on-write copies, before a new token is written into a copy. */
  if (step->num_copies > 0) TRY(vkp_kv_cache_record_copy_blocks(cache, cmd, step->copies, step->num_copies));
  barrier(cmd, TRANSFER, VK_ACCESS_TRANSFER_WRITE_BIT, COMPUTE, SHADER_RW);

  /* 3. Layer by layer: the new tokens' keys and values into the cache, the keys rotated on their
   *    way in and the queries in place (one dispatch); then attention of every request at once. */
  vkp_new_tokens tokens;      /* key and value: layer l's, below */
  vkp_rotary_inputs rotary;   /* query: layer l's, below */
  vkp_attention_views views;  /* key_cache and value_cache left absent: the cache's own, of layer l */
  vkp_attention_plan_info info;
  TRY(vkp_new_tokens_init(&tokens));
  TRY(vkp_rotary_inputs_init(&rotary));
  TRY(vkp_attention_views_init(&views));
  TRY(vkp_attention_plan_info_init(&info));
  TRY(vkp_attention_plan_info_get(plan, &info));
  TRY(tensor(buf->slots, VKP_DTYPE_I64, 1, T, 0, 0, &tokens.slot_mapping));
  TRY(tensor(buf->positions, VKP_DTYPE_I64, 1, T, 0, 0, &rotary.positions));
  TRY(tensor(buf->cos_sin, VKP_DTYPE_F32, 2, ENGINE_MAX_POSITION, ENGINE_HEAD_SIZE, 0, &rotary.cos_sin_cache));
  TRY(tensor(buf->block_tables, VKP_DTYPE_I32, 2, S, ENGINE_MAX_BLOCKS_PER_SEQ, 0, &views.block_tables));
  TRY(tensor(buf->context_lens, VKP_DTYPE_I32, 1, S, 0, 0, &views.context_lens));
  TRY(tensor(buf->query_starts, VKP_DTYPE_I32, 1, S + 1, 0, 0, &views.query_starts));
  if (info.scratch_bytes > 0) views.scratch = vkp_buffer_view_of(buf->scratch, 0, info.scratch_bytes);
  tokens.status = views.status = vkp_buffer_view_of(buf->status, 0, sizeof(uint32_t));
  for (uint32_t l = 0; l < ENGINE_LAYERS; ++l) {
    TRY(tensor(buf->query[l], VKP_DTYPE_F16, 3, T, ENGINE_HEADS, ENGINE_HEAD_SIZE, &views.query));
    TRY(tensor(buf->key[l], VKP_DTYPE_F16, 3, T, ENGINE_KV_HEADS, ENGINE_HEAD_SIZE, &tokens.key));
    TRY(tensor(buf->value[l], VKP_DTYPE_F16, 3, T, ENGINE_KV_HEADS, ENGINE_HEAD_SIZE, &tokens.value));
    TRY(tensor(buf->output[l], VKP_DTYPE_F16, 3, T, ENGINE_HEADS, ENGINE_HEAD_SIZE, &views.output));
    rotary.query = views.query;
    TRY(project_qkv(cmd, l, &views.query, &tokens.key, &tokens.value, user_data));
    barrier(cmd, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, SHADER_RW);
    TRY(vkp_kv_cache_record_reshape_and_cache(cache, cmd, l, &tokens, &rotary, NULL));
    barrier(cmd, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, SHADER_RW);
    TRY(vkp_kv_cache_record_attention(cache, cmd, l, plan, &views, NULL));
    /* The output for the layer's next kernels; the scratch free for the next layer's attention. */
    barrier(cmd, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, COMPUTE, SHADER_RW);
  }
  /* The outputs and the status word for whoever reads them next (here transfers and the host). */
  barrier(cmd, COMPUTE, VK_ACCESS_SHADER_WRITE_BIT, TRANSFER | VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
  return VKP_OK;
}
/* [/doc:c-record] */

/* [doc:c-run] */
struct recording {
  const vkp_kv_cache* cache;
  const engine_step* step;
  const vkp_attention_plan* plan;
  const engine_buffers* buf;
  engine_project_qkv project_qkv;
  void* user_data;
};

static vkp_status VKP_CALL record(VkCommandBuffer cmd, void* user_data) {
  const struct recording* r = user_data;
  return engine_record_step(cmd, r->cache, r->step, r->plan, r->buf, r->project_qkv, r->user_data);
}

/* The step's arrays, padded to the plan's bucket: its requests first, then requests of no new
 * tokens and length 0; its tokens first, then tokens of no slot (skipped) at position 0. Written
 * before the submission (a step in flight keeps its own). */
static vkp_status write_arrays(const engine_step* step, const vkp_attention_plan* plan, const engine_buffers* buf) {
  vkp_attention_shape bucket;
  TRY(vkp_attention_shape_init(&bucket));
  TRY(vkp_attention_plan_shape_get(plan, &bucket));
  int64_t* slots = vkp_buffer_mapped(buf->slots);
  int64_t* positions = vkp_buffer_mapped(buf->positions);
  int32_t* tables = vkp_buffer_mapped(buf->block_tables);
  int32_t* lens = vkp_buffer_mapped(buf->context_lens);
  int32_t* starts = vkp_buffer_mapped(buf->query_starts);
  for (uint32_t t = 0; t < bucket.num_query_tokens; ++t) {
    slots[t] = t < step->num_tokens ? step->slots[t] : -1;
    positions[t] = t < step->num_tokens ? step->positions[t] : 0;
  }
  starts[0] = 0;
  for (uint32_t s = 0; s < bucket.num_requests; ++s) {
    const int real = s < step->num_requests;
    lens[s] = real ? step->context_lens[s] : 0;
    starts[s + 1] = real ? step->query_starts[s + 1] : (int32_t)step->num_tokens;
    for (uint32_t m = 0; m < ENGINE_MAX_BLOCKS_PER_SEQ; ++m)
      tables[s * ENGINE_MAX_BLOCKS_PER_SEQ + m] = real ? step->block_tables[s * ENGINE_MAX_BLOCKS_PER_SEQ + m] : 0;
  }
  return VKP_OK;
}

vkp_status engine_run_step(vkp_context* ctx, const vkp_kv_cache* cache, const engine_plans* plans,
                           const engine_step* step, engine_buffers* buf, engine_project_qkv project_qkv,
                           void* user_data, char* error, size_t error_bytes) {
  /* The step's bucket: decode-only steps (each request one new token), else prompt chunks. */
  const vkp_attention_plan* plan = step->num_tokens == step->num_requests ? plans->decode : plans->mixed;
  vkp_status status = write_arrays(step, plan, buf);
  if (status == VKP_OK) {
    /* An engine records the step into its own command buffer, between the model's other kernels,
     * and submits it to its own queue (or replays one recorded before, as the C++ section 8
     * shows); here the context's convenience records, submits and waits. */
    const struct recording r = {cache, step, plan, buf, project_qkv, user_data};
    status = vkp_run_and_wait(ctx, record, (void*)&r);
  }
  /* The message first: the next vkpaged call clears it. */
  if (status != VKP_OK && error_bytes > 0) {
    strncpy(error, vkp_last_error(), error_bytes - 1);
    error[error_bytes - 1] = '\0';
  }
  return status;
}
/* [/doc:c-run] */
