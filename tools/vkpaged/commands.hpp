// SPDX-License-Identifier: Apache-2.0
#pragma once
// The subcommands of the `vkpaged` tool, callable from tests. Each returns the process exit
// status and throws vkpaged::Error on bad input; run_reporting_errors turns any exception into
// the CLI's one line on stderr.
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

namespace vkpaged::cli {

// `vkpaged info`: vkpaged's version, the Vulkan devices and the features vkpaged uses on each.
int run_info(std::ostream& out);

// `vkpaged attend`: docs/contract.md, "The command-line contract". Paths are .npy files.
struct AttendArgs {
  std::string query;
  std::string key_cache;
  std::string value_cache;
  std::string block_tables;      // "" with the CSR form
  std::string context_lens;      // "" with the CSR form
  std::string kv_indptr;         // FlashInfer's CSR page tables, in place of the two above
  std::string kv_indices;
  std::string kv_last_page_len;
  std::string out;
  std::optional<float> scale;  // default 1/sqrt(D)
  std::string alibi_slopes;    // "" = none
  float softcap = 0.0f;
  std::string sinks;           // "" = none
  uint32_t sliding_window = 0;
  std::string kv_dtype = "auto";  // auto | fp8_e4m3 | fp8_e5m2
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  std::string dtype = "auto";  // auto | f32 | f16 | bf16 (bf16: <u2 arrays hold bf16 bits)
  std::string device;          // "" = default Vulkan device; INDEX, NAME substring or "cpu"
  std::string split = "auto";  // auto | single | split
  uint32_t partition_tokens = 0;
  std::string kernel = "auto";  // auto | scalar | matrix
  // Multi-query attention (docs/contract.md): with query_starts the query and output are
  // [T, H, D]. Without it an nhd or hnd layout runs as single-token requests on the same operator.
  std::string query_starts;       // "" = one token per request
  std::string tree_mask;          // "" = none (needs query_starts)
  std::string lse;                // "" = not written; else <f4 [T, H] (or [S, H])
  std::string kv_layout = "vllm";  // vllm | nhd | hnd
  // MLA (docs/contract.md, "Multi-head latent attention"), in place of key_cache and value_cache:
  // one pool [N, B, Dk] with value_head_size Dv, or ckv [N, B, Dv] and kpe [N, B, R].
  std::string mla_cache;
  uint32_t value_head_size = 0;
  std::string ckv_cache;
  std::string kpe_cache;
};
int run_attend(const AttendArgs& args);

// `vkpaged demo`: a batch of sequences run as an engine runs them on the paged cache: prompts
// in chunks, then decode steps, each step's new tokens written with rotary embedding and
// attended in one multi-query attention call, checked against the CPU reference every few
// steps. Returns 1 when a check failed.
struct DemoArgs {
  uint32_t batch = 8;
  uint32_t min_len = 1;
  uint32_t max_len = 300;
  uint32_t steps = 64;             // decode tokens per sequence after its prompt
  uint32_t chunk = 64;             // most prompt tokens a sequence brings to one step
  uint32_t heads = 8;
  uint32_t kv_heads = 2;
  uint32_t head_size = 128;
  uint32_t block_size = 16;
  std::string dtype = "f16";      // f32 | f16 | bf16: queries, new keys/values, output
  std::string kv_dtype = "auto";  // auto | fp8_e4m3 | fp8_e5m2
  std::string kv_layout = "vllm";  // vllm | nhd | hnd
  std::string rotary = "neox";     // neox | gptj | none
  uint32_t check_every = 8;       // 0 = never check
  std::string device;
  uint64_t seed = 1;
};
// Results go to `out`; progress (a \r-updated bar on a terminal, else a line per check) to
// `progress`, with `progress_is_tty` choosing the form.
int run_demo(const DemoArgs& args, std::ostream& out, std::ostream& progress, bool progress_is_tty);

// `vkpaged simulate`: a synthetic serving workload (shared system prompts, requests arriving
// over time, some asking for several samples) served on the GPU by continuous batching with
// chunked prefill under a token budget per step over a KvCache and a BlockManager with prefix
// caching, forks with copy-on-write, and preemption by swapping to host memory (or
// recompute), compared with reserving every request's maximum length. Each step's decode
// requests and prefill chunks (after cached prefixes, recomputations) run as one attention
// call per layer, checked against the CPU reference every few steps; swapped sequences and
// copy-on-write copies are checked against what the cache held before; returns 1 when a
// check failed.
struct SimulateArgs {
  uint32_t requests = 64;
  uint32_t system_prompts = 4;  // shared prefixes; 0 = every prompt is unique
  uint32_t max_prompt = 256;
  uint32_t max_output = 256;
  double arrival_rate = 1.0;    // requests arriving per step, on average (Poisson)
  double parallel_share = 0.25; // share of requests asking for n > 1 samples (parallel sampling)
  uint32_t max_samples = 3;     // those ask for 2..max_samples samples
  uint32_t blocks = 0;          // device blocks; 0 = from --budget-mb, else 256
  double budget_mb = 0;         // MiB of device memory for the cache (all layers, keys and values)
  double budget_fraction = 0;   // or this fraction of the free device memory (KvCacheOptions::budget_fraction)
  uint32_t host_blocks = 128;   // host-visible swap blocks; 0 = no swap space
  std::string preemption = "swap";  // swap (recompute where the host blocks run out) | recompute
  uint32_t block_size = 16;
  uint32_t layers = 2;
  uint32_t heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_size = 64;
  uint32_t max_batch = 256;     // most sequences running at once
  uint32_t token_budget = 512;  // new tokens per step (decode requests and prefill chunks); >= max_batch
  uint32_t chunk = 0;           // most prompt tokens one request prefills in a step; 0 = what the budget leaves
  std::string dtype = "f16";      // f32 | f16 | bf16: queries, new keys/values, output
  std::string kv_dtype = "auto";  // auto | fp8_e4m3 | fp8_e5m2
  std::string kv_layout = "vllm";  // vllm | nhd | hnd
  // auto: every step through the attention operator; grid | longest-first: decode-only steps on
  // a decode plan of that order (DecodeOrder; the list made once per step)
  std::string order = "auto";
  uint32_t check_every = 16;      // 0 = never check
  std::string device;
  uint64_t seed = 1;
};
int run_simulate(const SimulateArgs& args, std::ostream& out, std::ostream& progress, bool progress_is_tty);

// The exit statuses of `vkpaged` (README.md, "Exit status"): 0 success; 1 the command failed
// (a refused input or option value, a file, device or internal error, or failed checks of demo
// and simulate); 2 the command line could not be parsed (an unknown option or subcommand, a
// missing required option, a value of the wrong type), with CLI11's message.
inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs a command; an exception becomes exactly one line "vkpaged: <message>" on `err` and
// exit status kExitFailure.
int run_reporting_errors(const std::function<int()>& command, std::ostream& err);

}  // namespace vkpaged::cli
