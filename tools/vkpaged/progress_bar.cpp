// SPDX-License-Identifier: Apache-2.0
#include "progress_bar.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace vkpaged::cli {

namespace {
constexpr uint32_t kWidth = 30;
}

ProgressBar::ProgressBar(std::ostream& out, bool is_tty, uint32_t total) : out_(out), tty_(is_tty), total_(total) {}

void ProgressBar::clear_line() {
  if (drawn_ == 0) return;
  out_ << '\r' << std::string(drawn_, ' ') << '\r';
  drawn_ = 0;
}

void ProgressBar::update(uint32_t done, const std::string& status) {
  done_ = done;
  status_ = status;
  if (!tty_) return;
  const uint32_t filled = total_ == 0 ? kWidth : uint32_t(uint64_t(kWidth) * std::min(done, total_) / total_);
  const std::string line = fmt::format("[{}{}] {}/{} {}", std::string(filled, '#'), std::string(kWidth - filled, '.'),
                                       done, total_, status);
  // Overwrite in place, padding over what a longer previous line left.
  out_ << '\r' << line << std::string(drawn_ > line.size() ? drawn_ - line.size() : 0, ' ') << std::flush;
  drawn_ = line.size();
}

void ProgressBar::note(const std::string& line) {
  clear_line();
  out_ << line << '\n';
  if (tty_ && done_ < total_) update(done_, status_);
  out_ << std::flush;
}

void ProgressBar::finish() {
  clear_line();
  out_ << std::flush;
}

}  // namespace vkpaged::cli
