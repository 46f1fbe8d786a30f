// SPDX-License-Identifier: Apache-2.0
#pragma once
// Sets (or unsets) an environment variable for a scope and puts back what was there.
#include <cstdlib>
#include <optional>
#include <string>

namespace vkpaged::test {

class ScopedEnv {
 public:
  // `value` nullptr: the variable is unset for the scope.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace vkpaged::test
