// SPDX-License-Identifier: Apache-2.0
/* vkpaged from C: a block manager lays out the paged KV cache of three sequences, the GPU
 * decodes one query per sequence over it with per-call values (a logit scale and a soft cap),
 * and the CPU reference checks the result. Prints one line; exits non-zero on any error or
 * mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vkpaged/vkpaged.h>

enum { S = 3, H = 8, HKV = 2, D = 64, B = 16, N = 32, X = 4 /* 16 bytes of f32 */, LONGEST = 100 };
enum { M = (LONGEST + B - 1) / B /* block-table columns */ };

static void check(vkp_status status, const char* what) {
  if (status != VKP_OK) {
    fprintf(stderr, "vkpaged C example: %s failed (%s): %s\n", what, vkp_status_name(status), vkp_last_error());
    exit(1);
  }
}

/* Reproducible values in (-1, 1). */
static float next_value(uint32_t* state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

static vkp_host_tensor host_tensor(void* data, vkp_dtype dtype, int32_t rank, const int64_t* shape) {
  vkp_host_tensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  memcpy(t.shape, shape, sizeof(int64_t) * (size_t)rank);
  return t;
}

int main(void) {
  if (vkp_version() != VKPAGED_VERSION) {
    fprintf(stderr, "vkpaged C example: headers %d but library %s\n", VKPAGED_VERSION, vkp_version_string());
    return 1;
  }

  /* Block tables from the block manager: each sequence's prompt takes the blocks it needs. */
  const int32_t lens[S] = {5, 37, LONGEST};
  vkp_block_manager* manager = NULL;
  check(vkp_block_manager_create(N, B, NULL, &manager), "vkp_block_manager_create");
  uint64_t ids[S];
  for (int s = 0; s < S; ++s) {
    int32_t prompt[LONGEST];
    for (int t = 0; t < lens[s]; ++t) prompt[t] = 1000 * s + t; /* distinct tokens: no prefix sharing */
    ids[s] = (uint64_t)(s + 1);
    check(vkp_block_manager_add_sequence(manager, ids[s], prompt, (size_t)lens[s], NULL), "add_sequence");
  }
  int32_t block_tables[S * M], context_lens[S];
  check(vkp_block_manager_build_batch(manager, ids, S, M, block_tables, context_lens), "build_batch");

  /* f32 query and caches in the contract's layouts, filled with values in (-1, 1). */
  static float query[S * H * D], key_cache[N * HKV * D * B], value_cache[N * HKV * D * B];
  static float output[S * H * D], expected[S * H * D];
  uint32_t state = 7;
  for (size_t i = 0; i < sizeof(query) / sizeof(float); ++i) query[i] = next_value(&state);
  for (size_t i = 0; i < sizeof(key_cache) / sizeof(float); ++i) key_cache[i] = next_value(&state);
  for (size_t i = 0; i < sizeof(value_cache) / sizeof(float); ++i) value_cache[i] = next_value(&state);

  const int64_t query_shape[3] = {S, H, D};
  const int64_t key_shape[5] = {N, HKV, D / X, B, X};
  const int64_t value_shape[4] = {N, HKV, D, B};
  const int64_t tables_shape[2] = {S, M};
  const int64_t lens_shape[1] = {S};
  /* Every extensible struct starts from its init, which records the size this program was
   * compiled with (struct_size) and fills in the defaults: here alibi_slopes and sinks absent. */
  vkp_decode_inputs inputs;
  check(vkp_decode_inputs_init(&inputs), "vkp_decode_inputs_init");
  inputs.query = host_tensor(query, VKP_DTYPE_F32, 3, query_shape);
  inputs.key_cache = host_tensor(key_cache, VKP_DTYPE_F32, 5, key_shape);
  inputs.value_cache = host_tensor(value_cache, VKP_DTYPE_F32, 4, value_shape);
  inputs.block_tables = host_tensor(block_tables, VKP_DTYPE_I32, 2, tables_shape);
  inputs.context_lens = host_tensor(context_lens, VKP_DTYPE_I32, 1, lens_shape);
  inputs.cache_dtype = VKP_DTYPE_F32;
  /* The per-call values (a plan recorded with vkp_record_decode takes them at each call): a
   * logit scale other than the default 1 / sqrt(D), and a soft cap, which the convenience
   * path's plan then has (its shape's softcap). */
  vkp_decode_params params;
  check(vkp_decode_params_init(&params), "vkp_decode_params_init");
  params.has_scale = VKP_TRUE;
  params.scale = 0.1f;
  params.softcap = 20.0f;

  /* The default device (VKPAGED_DEVICE chooses another): upload, run, wait, download. */
  vkp_context* context = NULL;
  check(vkp_context_create(NULL, &context), "vkp_context_create");
  vkp_device_info info;
  check(vkp_device_info_init(&info), "vkp_device_info_init");
  check(vkp_context_device_info(context, &info), "vkp_context_device_info");
  /* Options NULL: the defaults (automatic split and kernel). */
  check(vkp_decode_attention(context, &inputs, NULL, &params, output, sizeof(output), NULL, 0), "vkp_decode_attention");
  check(vkp_reference_decode_attention(&inputs, NULL, &params, expected, sizeof(expected), NULL, 0),
        "vkp_reference_decode_attention");

  double worst = 0.0;
  int ok = 1;
  for (size_t i = 0; i < sizeof(output) / sizeof(float); ++i) {
    const double diff = fabs((double)output[i] - (double)expected[i]);
    if (!(diff <= 1e-4)) ok = 0; /* the contract's f32 tolerance; a NaN fails too */
    if (diff > worst) worst = diff;
  }
  printf("vkpaged C example: decode of %d sequences (lengths %d, %d, %d; scale 0.1, soft cap 20) on %s: "
         "max |gpu - reference| = %.2e -> %s\n",
         S, context_lens[0], context_lens[1], context_lens[2], info.name, worst, ok ? "ok" : "MISMATCH");

  vkp_context_destroy(context);
  vkp_block_manager_destroy(manager);
  return ok ? 0 : 1;
}
