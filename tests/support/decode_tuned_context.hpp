#pragma once
// A Context whose decode plans read VKPAGED_DECODE_TUNE as `tune` (ops/decode_tuning.hpp): the
// tuning is read at a Context's first DecodePlan::create, so the variable is set for that plan
// only and put back as it was. For tests that force the planner's knobs on the device.
#include <memory>
#include <string>

#include "vkpaged/context.hpp"

namespace vkpaged::test {

// A new Context (validation as the tests run it) that plans with VKPAGED_DECODE_TUNE = `tune`.
std::unique_ptr<Context> decode_tuned_context(const std::string& tune);

}  // namespace vkpaged::test
