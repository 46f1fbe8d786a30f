// SPDX-License-Identifier: Apache-2.0
#include <exception>
#include <new>
#include <string>

#include "commands.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

// The CLI promises one line per error: fold any newline a message carries.
std::string one_line(std::string message) {
  for (char& c : message)
    if (c == '\n' || c == '\r') c = ' ';
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return message.empty() ? "unknown error" : message;
}

}  // namespace

int run_reporting_errors(const std::function<int()>& command, std::ostream& err) {
  try {
    return command();
  } catch (const Error& e) {
    err << "vkpaged: " << one_line(e.what()) << std::endl;
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    err << "vkpaged: out of host memory" << std::endl;
  } catch (const std::exception& e) {
    err << "vkpaged: " << one_line(e.what()) << std::endl;
  } catch (...) {
    err << "vkpaged: unknown error" << std::endl;
  }
  return kExitFailure;
}

}  // namespace vkpaged::cli
