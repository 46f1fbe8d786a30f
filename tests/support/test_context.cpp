#include "support/test_context.hpp"

#include <cstdlib>

namespace vkpaged::test {

Context& shared_context() {
  static Context context([] {
    ContextOptions o;
    // Tests run with validation unless the environment says otherwise (VKPAGED_VALIDATION=0).
    const char* v = std::getenv("VKPAGED_VALIDATION");
    o.validation = v == nullptr || std::string(v) != "0";
    return o;
  }());
  return context;
}

}  // namespace vkpaged::test
