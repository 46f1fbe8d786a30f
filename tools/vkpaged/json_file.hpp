// SPDX-License-Identifier: Apache-2.0
#pragma once
// The bench's JSON files (`--json`): documents built with nlohmann's JSON (every string escaped
// by it, control characters and non-ASCII text included; bytes that are not UTF-8 become
// U+FFFD), keys in the order they were set.
#include <nlohmann/json.hpp>
#include <string>

namespace vkpaged::cli {

using Json = nlohmann::ordered_json;

// Writes `document`, indented, to `path`; Error(io_error) naming --json and the path when it
// cannot be written.
void write_json_file(const std::string& path, const Json& document);

}  // namespace vkpaged::cli
