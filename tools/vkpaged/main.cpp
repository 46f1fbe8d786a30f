// SPDX-License-Identifier: Apache-2.0
// The `vkpaged` command line: option parsing only; the subcommands live in command_*.cpp.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "bench.hpp"
#include "commands.hpp"
#include "vkpaged/log.hpp"
#include "vkpaged/vkpaged.h"

namespace {

using namespace vkpaged::cli;

void add_attend_options(CLI::App& cmd, AttendArgs& a, float& scale) {
  cmd.add_option("--query", a.query, "[S, H, D] query ([T, H, D] with --query-starts): <f4, <f2, or <u2 with --dtype bf16")
      ->required()
      ->type_name("Q.npy");
  cmd.add_option("--key-cache", a.key_cache, "key cache: [N, Hkv, D/x, B, x] (vllm), [N, B, Hkv, D] (nhd), [N, Hkv, B, D] (hnd)")
      ->type_name("K.npy");
  cmd.add_option("--value-cache", a.value_cache, "value cache: [N, Hkv, D, B] (vllm), else as the key cache")
      ->type_name("V.npy");
  cmd.add_option("--mla-cache", a.mla_cache,
                 "MLA, in place of --key-cache and --value-cache: one pool [N, B, Dk] (the latent, then the rotary "
                 "part), with --value-head-size; the query is [T, H, Dk], the output [T, H, Dv]")
      ->type_name("C.npy");
  cmd.add_option("--value-head-size", a.value_head_size, "MLA: Dv, the rows' first Dv entries are the value")
      ->type_name("Dv");
  cmd.add_option("--ckv-cache", a.ckv_cache, "MLA, two pools: the latent [N, B, Dv], with --kpe-cache")
      ->type_name("CKV.npy");
  cmd.add_option("--kpe-cache", a.kpe_cache, "MLA, two pools: the rotary key part [N, B, R]")->type_name("KPE.npy");
  cmd.add_option("--block-tables", a.block_tables, "[S, M] block ids: <i4, <u4 or <i8 (or the CSR form below)")
      ->type_name("BT.npy");
  cmd.add_option("--context-lens", a.context_lens, "[S] context lengths: <i4, <u4 or <i8")->type_name("CL.npy");
  cmd.add_option("--kv-indptr", a.kv_indptr,
                 "FlashInfer's CSR page tables, in place of --block-tables and --context-lens: [S + 1] <i4, request s "
                 "holds kv_indices[kv_indptr[s] .. kv_indptr[s + 1])")
      ->type_name("KI.npy");
  cmd.add_option("--kv-indices", a.kv_indices, "CSR: [kv_indptr[S]] <i4 block ids")->type_name("KX.npy");
  cmd.add_option("--kv-last-page-len", a.kv_last_page_len,
                 "CSR: [S] <i4 tokens in each request's last page (0 without pages)")
      ->type_name("KL.npy");
  cmd.add_option("--out", a.out, "output shaped as the query, in its dtype, written atomically")->required()->type_name("O.npy");
  cmd.add_option("--scale", scale, "logit scale (default 1/sqrt(D))")->type_name("F");
  cmd.add_option("--alibi-slopes", a.alibi_slopes, "[H] <f4 ALiBi slopes")->type_name("A.npy");
  cmd.add_option("--softcap", a.softcap, "soft cap c: logit = c*tanh(logit/c) (0 = off)")->type_name("F");
  cmd.add_option("--sinks", a.sinks, "[H] <f4 sink logits (gpt-oss)")->type_name("Z.npy");
  cmd.add_option("--sliding-window", a.sliding_window, "attend only the last W positions (0 = all)")->type_name("W");
  cmd.add_option("--kv-dtype", a.kv_dtype, "cache dtype: auto (the query's), fp8_e4m3 or fp8_e5m2 (|u1 bytes)")
      ->type_name("auto|fp8_e4m3|fp8_e5m2");
  cmd.add_option("--k-scale", a.k_scale, "fp8 key scale (default 1)")->type_name("F");
  cmd.add_option("--v-scale", a.v_scale, "fp8 value scale (default 1)")->type_name("F");
  cmd.add_option("--dtype", a.dtype, "bf16: <u2 query and caches hold bf16 bits (default auto)")->type_name("bf16");
  cmd.add_option("--device", a.device, "Vulkan device index or name substring, or cpu for the CPU reference")
      ->type_name("INDEX|NAME|cpu");
  cmd.add_option("--query-starts", a.query_starts,
                 "[S + 1] <i4 first query token of each request (multi-query attention: prefill, chunks, speculative)")
      ->type_name("QS.npy");
  cmd.add_option("--tree-mask", a.tree_mask,
                 "|u1 0/1 bytes: each request's q_s x q_s mask, row j = what new token j sees (with --query-starts)")
      ->type_name("TM.npy");
  cmd.add_option("--lse", a.lse, "also write the log-sum-exp, <f4 [T, H] (or [S, H]), written atomically")->type_name("L.npy");
  cmd.add_option("--kv-layout", a.kv_layout, "the caches' layout (default vllm)")->type_name("vllm|nhd|hnd");
  cmd.add_option("--split", a.split, "extra: auto, single (one pass) or split (partitions + reduce)")
      ->type_name("auto|single|split");
  cmd.add_option("--partition-tokens", a.partition_tokens, "extra: tokens per split partition, a multiple of 256 (MLA: of 64; 0 = auto)")
      ->type_name("N");
  cmd.add_option("--kernel", a.kernel,
                 "extra: auto, scalar (portable), matrix (matrix units through VK_NV_cooperative_matrix, else "
                 "VK_KHR_cooperative_matrix: f16 or bf16 query; f16, bf16 or fp8 cache) or matrix-khr (the matrix "
                 "kernel through VK_KHR_cooperative_matrix even where NV's runs); MLA: auto, scalar or matrix "
                 "(its tensor-core kernel, VK_KHR_cooperative_matrix)")
      ->type_name("auto|scalar|matrix|matrix-khr");
}

void add_demo_options(CLI::App& cmd, DemoArgs& d) {
  cmd.add_option("--batch", d.batch, "sequences in the batch")->capture_default_str();
  cmd.add_option("--min-len", d.min_len, "shortest initial prompt")->capture_default_str();
  cmd.add_option("--max-len", d.max_len, "longest initial prompt")->capture_default_str();
  cmd.add_option("--steps", d.steps, "decode tokens per sequence after its prompt")->capture_default_str();
  cmd.add_option("--chunk", d.chunk, "most prompt tokens a sequence brings to one step (longer prompts run in chunks)")
      ->capture_default_str();
  cmd.add_option("--heads", d.heads, "query heads H")->capture_default_str();
  cmd.add_option("--kv-heads", d.kv_heads, "key/value heads Hkv")->capture_default_str();
  cmd.add_option("--head-size", d.head_size, "head size D")->capture_default_str();
  cmd.add_option("--block-size", d.block_size, "tokens per KV block B")->capture_default_str();
  cmd.add_option("--dtype", d.dtype, "query and new key/value dtype: f32, f16 or bf16")->capture_default_str();
  cmd.add_option("--kv-dtype", d.kv_dtype, "cache dtype: auto, fp8_e4m3 or fp8_e5m2")->capture_default_str();
  cmd.add_option("--kv-layout", d.kv_layout, "cache layout: vllm, nhd (vLLM V1 flash, FlashInfer NHD) or hnd")
      ->capture_default_str();
  cmd.add_option("--rotary", d.rotary, "rotary embedding of the keys on their way into the cache (and the queries): "
                                       "neox, gptj or none")
      ->capture_default_str();
  cmd.add_option("--check-every", d.check_every, "check a step against the CPU reference every N steps and at the last (0 = never)")
      ->capture_default_str();
  cmd.add_option("--device", d.device, "Vulkan device index or name substring (default: VKPAGED_DEVICE, else the best)");
  cmd.add_option("--seed", d.seed, "random seed")->capture_default_str();
}

void add_simulate_options(CLI::App& cmd, SimulateArgs& s) {
  cmd.add_option("--requests", s.requests, "requests in the workload")->capture_default_str();
  cmd.add_option("--system-prompts", s.system_prompts, "shared system prompts (prefix-cache hits); 0 = none")
      ->capture_default_str();
  cmd.add_option("--max-prompt", s.max_prompt, "longest prompt, in tokens")->capture_default_str();
  cmd.add_option("--max-output", s.max_output, "longest output, in tokens")->capture_default_str();
  cmd.add_option("--arrival-rate", s.arrival_rate, "requests arriving per step, on average")->capture_default_str();
  cmd.add_option("--parallel-share", s.parallel_share,
                 "share of requests asking for several samples (forked after the prompt, copy-on-write)")
      ->capture_default_str();
  cmd.add_option("--max-samples", s.max_samples, "those ask for 2 to this many samples")->capture_default_str();
  cmd.add_option("--blocks", s.blocks, "device blocks in the cache (default 256 unless --budget-mb)");
  cmd.add_option("--budget-mb", s.budget_mb, "size the cache by a memory budget in MiB (all layers) instead");
  cmd.add_option("--budget-fraction", s.budget_fraction,
                 "or by this fraction of the free device memory (VK_EXT_memory_budget; else of the heaps' size)");
  cmd.add_option("--host-blocks", s.host_blocks, "host-visible blocks to swap preempted sequences to (0 = none)")
      ->capture_default_str();
  cmd.add_option("--preemption", s.preemption,
                 "swap (to the host blocks; recompute where they run out) or recompute")
      ->capture_default_str();
  cmd.add_option("--block-size", s.block_size, "tokens per KV block B")->capture_default_str();
  cmd.add_option("--layers", s.layers, "layers of the cache (each decodes every step)")->capture_default_str();
  cmd.add_option("--heads", s.heads, "query heads H")->capture_default_str();
  cmd.add_option("--kv-heads", s.kv_heads, "key/value heads Hkv")->capture_default_str();
  cmd.add_option("--head-size", s.head_size, "head size D")->capture_default_str();
  cmd.add_option("--max-batch", s.max_batch, "most sequences running at once")->capture_default_str();
  cmd.add_option("--token-budget", s.token_budget,
                 "new tokens per step, decode requests first, then prefill chunks (at least --max-batch)")
      ->capture_default_str();
  cmd.add_option("--chunk", s.chunk,
                 "most prompt tokens one request prefills in a step (0 = what the token budget leaves)")
      ->capture_default_str();
  cmd.add_option("--dtype", s.dtype, "query and new key/value dtype: f32, f16 or bf16")->capture_default_str();
  cmd.add_option("--kv-dtype", s.kv_dtype, "cache dtype: auto, fp8_e4m3 or fp8_e5m2")->capture_default_str();
  cmd.add_option("--kv-layout", s.kv_layout, "cache layout: vllm, nhd (vLLM V1 flash, FlashInfer NHD) or hnd")
      ->capture_default_str();
  cmd.add_option("--order", s.order,
                 "auto (every step through the attention operator), or grid or longest-first: decode-only steps "
                 "on a decode plan of that order (longest first lists the step's items by their lengths once, "
                 "before its layers)")
      ->capture_default_str();
  cmd.add_option("--check-every", s.check_every,
                 "check a step's attention (decode requests and prefill chunks) against the CPU reference every N "
                 "steps, and every swap-in and copy-on-write (0 = never)")
      ->capture_default_str();
  cmd.add_option("--device", s.device, "Vulkan device index or name substring (default: VKPAGED_DEVICE, else the best)");
  cmd.add_option("--seed", s.seed, "random seed of the workload")->capture_default_str();
}

void add_bench_options(CLI::App& cmd, BenchOptions& b) {
  cmd.add_option("--suite", b.suite, "standard, ragged, dtypes, blocks, long, lengths, groups, latency, quick (lavapipe-sized), all, cache-write and cache-write-quick (the rotary cache write), prefill and prefill-quick (multi-query attention: prefill, chunks, speculative verification, a mixed step), mla and mla-quick (DeepSeek's multi-head latent attention in decode, against the read bandwidth and the cooperative-matrix ceiling; mla-resident: 256 requests of 16 heads, more workgroups than compute units in one pass), or mla-prefill and mla-prefill-quick (MLA prefills and chunks after a cached prefix, likewise)")
      ->capture_default_str();
  cmd.add_option("--device", b.device, "Vulkan device index or name substring");
  cmd.add_option("--repetitions", b.repetitions, "timed repetitions per case (at least 20)")->capture_default_str();
  cmd.add_option("--warmup", b.warmup, "untimed runs before timing")->capture_default_str();
  cmd.add_option("--clock-warmup-ms", b.clock_warmup,
                 "before each case's --warmup runs, keep the device busy with streaming reads for this many "
                 "milliseconds, so that a GPU whose clocks fell while the host worked times the case at the clocks of a "
                 "busy device; auto: 1000 on a GPU, 0 (none) on a CPU device")
      ->capture_default_str();
  cmd.add_option("--split", b.split, "auto, single (one pass) or split")->capture_default_str();
  cmd.add_option("--partition-tokens", b.partition_tokens, "tokens per split partition (multiple of 256, MLA suites: of 64; 0 = auto)");
  cmd.add_option("--kernel", b.kernel,
                 "auto, scalar, matrix or matrix-khr (the matrix kernel through VK_KHR_cooperative_matrix even where "
                 "NV's runs; without a validation layer older than it); cases the matrix kernel cannot run are skipped; "
                 "the prefill suites force the attention kernel with it (auto, scalar, matrix); the MLA suites take auto "
                 "(scalar and matrix too where MlaOptions has a kernel choice; each case names the kernel that ran)")
      ->capture_default_str();
  cmd.add_option("--order", b.order,
                 "auto, grid or longest-first (items listed by their lengths once per step, as an engine "
                 "would before its layers; the list's own time is printed apart)")
      ->capture_default_str();
  cmd.add_option("--merge", b.merge,
                 "where a split decode merges its partitions: reduce-pass or in-dispatch (the matrix kernel's "
                 "last workgroup of each head group, with counters the bench zeroes once)")
      ->capture_default_str();
  cmd.add_option("--cache-dtype", b.cache_dtype,
                 "run every case with this cache dtype (f32, f16, bf16: the query's too; fp8_e4m3, fp8_e5m2: "
                 "an f16 query); default: the suite's")
      ->type_name("DTYPE");
  cmd.add_option("--kv-layout", b.kv_layout,
                 "the pools' layout in every case: vllm, nhd or hnd (nhd and hnd add -nhd / -hnd to the case names; "
                 "cases the kernel cannot run are skipped)")
      ->capture_default_str();
  cmd.add_option("--case", b.cases,
                 "run only the cases whose names contain this text (repeat it for more; the decode suites' names "
                 "include the -nhd / -hnd of --kv-layout; prefill's mixed step is the case \"mixed\")")
      ->type_name("TEXT");
  cmd.add_option("--json", b.json_path, "also write the results as JSON")->type_name("FILE");
  cmd.add_option("--chart", b.chart_path, "draw the share of bandwidth per case as an SVG chart")->type_name("FILE");
  cmd.add_option("--timeline", b.timeline_dir,
                 "also write each matrix-kernel case's per-subgroup timeline to DIR/<case>.bin "
                 "(read it with scripts/decode_timeline.py)")
      ->type_name("DIR");
  cmd.add_flag("--flush-caches", b.flush_caches,
               "before each repetition, read a buffer as large as the bandwidth probe (not timed), so that "
               "no case reads what the last repetition left in the GPU's caches");
  cmd.add_flag("--warm-start", b.warm_start,
               "with --flush-caches: time each repetition after the same decode and the flush, untimed, in one "
               "command buffer, so that its pipeline has run before (as for an engine's later layers; on NVIDIA's "
               "driver a pipeline's first dispatch in a submission is slower) while its bytes are not in the L2");
  cmd.add_flag("--arena,!--no-arena", b.arena,
               std::string("the decode and MLA suites: --arena: every case's pools, tables and small buffers are "
                           "views into one allocation made once for the run (sized for its largest case that runs, "
                           "pools at 2 MiB boundaries); --no-arena: each case allocates its own and frees them when it "
                           "ends. Default: ") +
                   (kArenaByDefault ? "--arena" : "--no-arena"));
  cmd.add_option("--repeat", b.repeat,
                 "run every suite this many times in the process and compare each case's rounds. After every suite "
                 "the read bandwidth is measured again: a change of more than 3 % from the start, or a case whose "
                 "rounds differ by more than 3 %, prints a line starting \"disturbed:\" (the exit status stays 0)")
      ->capture_default_str();
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// The library's messages (validation reports, VKPAGED_PIPELINE_STATS) go to stderr.
void print_log_message(vkpaged::LogLevel, const char* message, void*) { std::cerr << "vkpaged: " << message << '\n'; }

int run(int argc, char** argv) {
  vkpaged::set_log_callback(&print_log_message, nullptr, vkpaged::LogLevel::info);
  CLI::App app{"vkpaged: paged decode attention and KV cache on Vulkan", "vkpaged"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("vkpaged ") + vkp_version_string(), "print the version and exit");
  auto* info = app.add_subcommand("info", "list the Vulkan devices and the features vkpaged uses on each");
  AttendArgs attend_args;
  float scale = 0.0f;
  auto* attend = app.add_subcommand("attend", "decode or multi-query attention on .npy inputs (docs/contract.md)");
  add_attend_options(*attend, attend_args, scale);
  DemoArgs demo_args;
  auto* demo = app.add_subcommand("demo", "run prompts in chunks, then decode, through multi-query attention on the paged cache, checked against the CPU reference");
  add_demo_options(*demo, demo_args);
  SimulateArgs simulate_args;
  auto* simulate = app.add_subcommand(
      "simulate", "serve a synthetic workload with continuous batching, chunked prefill and prefix caching on the paged cache");
  add_simulate_options(*simulate, simulate_args);
  BenchOptions bench_args;
  auto* bench = app.add_subcommand("bench", "time decode attention against the device's measured read bandwidth");
  add_bench_options(*bench, bench_args);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {  // a ParseError too: caught first, exit status 0
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Exit status 2: the command line itself is wrong (README.md, "Exit status").
    std::cerr << "vkpaged: " << one_line(e.what()) << " (see vkpaged --help)" << std::endl;
    return kExitUsage;
  }

  if (attend->parsed() && attend->get_option("--scale")->count() > 0) attend_args.scale = scale;
  return run_reporting_errors(
      [&] {
        if (info->parsed()) return run_info(std::cout);
        if (attend->parsed()) return run_attend(attend_args);
        if (bench->parsed()) return run_bench(bench_args);
        if (simulate->parsed())
          return run_simulate(simulate_args, std::cout, std::cerr, ::isatty(STDERR_FILENO) == 1);
        return run_demo(demo_args, std::cout, std::cerr, ::isatty(STDERR_FILENO) == 1);
      },
      std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  // Nothing may escape main: the CLI's errors are one line on stderr and a non-zero exit.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "vkpaged: " << one_line(e.what()) << std::endl;
  } catch (...) {
    std::cerr << "vkpaged: unknown error" << std::endl;
  }
  return kExitFailure;
}
