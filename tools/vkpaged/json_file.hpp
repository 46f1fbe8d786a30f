// SPDX-License-Identifier: Apache-2.0
#pragma once
// The bench's JSON files (`--json`): documents built with nlohmann's JSON (every string escaped
// by it, control characters and non-ASCII text included; bytes that are not UTF-8 become
// U+FFFD), keys in the order they were set.
#include <nlohmann/json.hpp>
#include <string>

#include "bench.hpp"

namespace vkpaged::cli {

using Json = nlohmann::ordered_json;

// Writes `document`, indented, to `path`; Error(io_error) naming --json and the path when it
// cannot be written.
void write_json_file(const std::string& path, const Json& document);

// A case's wall clock (WallClock) as every suite's JSON gives it: {"warmup", "timed", "end"}, in
// seconds since the Unix epoch (scripts/bench_clocks.py reads it).
Json wall_clock_json(const WallClock& wall);

}  // namespace vkpaged::cli
