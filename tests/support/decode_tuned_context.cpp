#include "support/decode_tuned_context.hpp"

#include <cstdlib>
#include <optional>

#include "ops/decode_tuning.hpp"
#include "support/decode_case.hpp"
#include "support/test_context.hpp"
#include "vkpaged/decode.hpp"

namespace vkpaged::test {

namespace {

// Sets an environment variable for its lifetime, then restores it (or unsets it).
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedVariable() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

std::unique_ptr<Context> decode_tuned_context(const std::string& tune) {
  ContextOptions o;
  o.validation = validation_wanted();
  auto context = std::make_unique<Context>(o);
  const ScopedVariable variable(detail::kDecodeTuneVariable, tune);
  // The context's first plan reads the variable and keeps the tuning for the context's life.
  DecodePlan::create(*context, plan_shape(1, 1, 1, 64, 16));
  return context;
}

}  // namespace vkpaged::test
