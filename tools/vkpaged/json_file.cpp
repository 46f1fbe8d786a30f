// SPDX-License-Identifier: Apache-2.0
#include "json_file.hpp"

#include <fmt/format.h>

#include <fstream>

#include "vkpaged/error.hpp"

namespace vkpaged::cli {

void write_json_file(const std::string& path, const Json& document) {
  // Device names and paths come from drivers and plans: never fail on a byte that is not UTF-8.
  const std::string text = document.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  std::ofstream f(path);
  f << text;
  if (!f) throw Error(ErrorCode::io_error, fmt::format("--json: cannot write {}", path));
}

Json wall_clock_json(const WallClock& wall) {
  return {{"warmup", wall.warmup_s}, {"timed", wall.timed_s}, {"end", wall.end_s}};
}

}  // namespace vkpaged::cli
