// SPDX-License-Identifier: Apache-2.0
#pragma once
// Progress of a long run on stderr: a bar redrawn in place (\r) on a terminal; elsewhere (logs,
// pipes, CI) only the noteworthy lines, one each.
#include <cstdint>
#include <ostream>
#include <string>

namespace vkpaged::cli {

class ProgressBar {
 public:
  ProgressBar(std::ostream& out, bool is_tty, uint32_t total);
  // Redraws the bar at `done` of `total` with a short status (terminal only).
  void update(uint32_t done, const std::string& status);
  // A line that stays: printed above the bar on a terminal, as is elsewhere.
  void note(const std::string& line);
  // Clears the bar so that what follows starts on a clean line.
  void finish();

 private:
  void clear_line();

  std::ostream& out_;
  bool tty_;
  uint32_t total_;
  uint32_t done_ = 0;
  std::string status_;
  size_t drawn_ = 0;  // characters of the bar on screen now
};

}  // namespace vkpaged::cli
