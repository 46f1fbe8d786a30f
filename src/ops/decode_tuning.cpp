// SPDX-License-Identifier: Apache-2.0
// VKPAGED_DECODE_TUNE: the one parser of the decode planner's tuning knobs.
#include "ops/decode_tuning.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <string>

#include "environment.hpp"
#include "vkpaged/error.hpp"

namespace vkpaged::detail {

namespace {

struct Knob {
  std::string_view key;
  uint32_t DecodeTuning::*field;
  uint32_t min, max;
  bool power_of_two;  // 0 or a power of two in [min, max]
};

constexpr std::array<Knob, 16> kKnobs{{
    {"lanes", &DecodeTuning::lanes, 1, 256, true},
    {"workgroup", &DecodeTuning::workgroup, 1, 256, true},
    {"units", &DecodeTuning::units, 1, 64, false},
    {"heads", &DecodeTuning::heads, 0, 256, false},
    {"matrix", &DecodeTuning::matrix, 0, 1, false},
    {"subgroups", &DecodeTuning::subgroups, 0, 32, false},
    {"prefetch", &DecodeTuning::prefetch, 0, 2, false},
    {"qregs", &DecodeTuning::qregs, 0, 1, false},
    {"pipeline", &DecodeTuning::pipeline, 0, 2, false},
    {"order", &DecodeTuning::order, 0, 2, false},
    {"share", &DecodeTuning::share, 0, 2, false},
    {"slices", &DecodeTuning::slices, 0, 1, false},
    {"vbytes", &DecodeTuning::vbytes, 4, 16, true},
    {"fp8conv", &DecodeTuning::fp8conv, 0, 1, false},
    {"f16math", &DecodeTuning::f16math, 0, 3, false},
    {"vloads", &DecodeTuning::vloads, 1, 8, true},
}};

[[noreturn]] void refuse(const std::string& what) {
  throw Error(ErrorCode::invalid_argument, fmt::format("{}: {}", kDecodeTuneVariable, what));
}

std::string known_keys() {
  std::string keys;
  for (const Knob& k : kKnobs) keys += (keys.empty() ? "" : ", ") + std::string(k.key);
  return keys;
}

std::string allowed(const Knob& k) {
  if (k.power_of_two) return fmt::format("0 or a power of two from {} to {}", k.min, k.max);
  return fmt::format("{} to {}", k.min, k.max);
}

bool in_range(const Knob& k, uint64_t v) {
  if (k.power_of_two) return v == 0 || (v >= k.min && v <= k.max && (v & (v - 1)) == 0);
  return v >= k.min && v <= k.max;
}

}  // namespace

DecodeTuning parse_decode_tuning(std::string_view text) {
  DecodeTuning t;
  std::array<bool, kKnobs.size()> seen{};
  std::string_view rest = text;
  while (!text.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      refuse(fmt::format("item \"{}\" of \"{}\" is not key=value (items are separated by commas; keys: {})", item,
                         text, known_keys()));
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    size_t index = 0;
    while (index < kKnobs.size() && kKnobs[index].key != key) ++index;
    if (index == kKnobs.size())
      refuse(fmt::format("unknown key \"{}\" (value \"{}\"; keys: {})", key, value, known_keys()));
    const Knob& knob = kKnobs[index];
    if (seen[index]) refuse(fmt::format("key \"{}\" given twice (value \"{}\")", key, value));
    seen[index] = true;
    if (value.empty()) refuse(fmt::format("key \"{}\" has an empty value ({})", key, allowed(knob)));
    uint64_t number = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (error == std::errc::result_out_of_range)
      refuse(fmt::format("key \"{}\": value \"{}\" is out of range ({})", key, value, allowed(knob)));
    if (error != std::errc() || end != value.data() + value.size())
      refuse(fmt::format("key \"{}\": value \"{}\" is not a decimal number ({})", key, value, allowed(knob)));
    if (!in_range(knob, number))
      refuse(fmt::format("key \"{}\": value \"{}\" is out of range ({})", key, value, allowed(knob)));
    t.*knob.field = uint32_t(number);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return t;
}

DecodeTuning decode_tuning_from_environment() {
  return parse_decode_tuning(environment_variable(kDecodeTuneVariable).value_or(""));
}

}  // namespace vkpaged::detail
