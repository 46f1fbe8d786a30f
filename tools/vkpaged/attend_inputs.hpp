// SPDX-License-Identifier: Apache-2.0
#pragma once
// `vkpaged attend`'s arguments turned into the library's inputs, and the library's error
// messages turned into ones that name the command-line option at fault.
#include <string>

#include "commands.hpp"
#include "vkpaged/attention.hpp"
#include "vkpaged/decode.hpp"
#include "vkpaged/mla_attention.hpp"

namespace vkpaged::cli {

// One `vkpaged attend` call: a decode (one token per request on the vllm layout), or, with
// --query-starts or an nhd or hnd layout, multi-query attention (include/vkpaged/attention.hpp;
// decode's layouts are vllm only for now, so single tokens on the other layouts run there too).
struct AttendCall {
  DecodeInputs inputs;  // the decode's (moved to `attention` for multi-query)
  DecodeOptions options;
  bool multi_query = false;
  AttentionInputs attention;
  AttentionParams params;
  AttentionOptions attention_options;
  bool want_lse = false;  // --lse given
  bool mla = false;       // --mla-cache, or --ckv-cache and --kpe-cache: MLA attention
  MlaInputs mla_inputs;
  MlaOptions mla_options;
};

// Parses the option values and reads every .npy file. Throws vkpaged::Error whose message
// starts with the option at fault ("--key-cache: k.npy: truncated .npy file: ...").
AttendCall load_attend_call(const AttendArgs& args);

// "block_tables[0][1]: block id 9 ..." -> "--block-tables: block_tables[0][1]: block id 9 ...":
// prefixes a library message with the option that holds the named argument, when one does
// (`csr`: the page tables came as --kv-indptr, --kv-indices and --kv-last-page-len).
std::string blame_option(const std::string& library_message, bool csr = false);

}  // namespace vkpaged::cli
