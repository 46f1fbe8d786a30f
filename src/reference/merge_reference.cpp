// SPDX-License-Identifier: Apache-2.0
// CPU reference of the cascade merge (include/vkpaged/merge.hpp), in double precision.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/merge_validation.hpp"
#include "vkpaged/merge.hpp"

namespace vkpaged {

namespace reference {

DecodeResult merge_attention(const DecodeResult& a, const DecodeResult& b) {
  detail::check_merge_input(a.output, a.lse, "a");
  detail::check_merge_input(b.output, b.lse, "b");
  if (!(a.output.shape() == b.output.shape()))
    throw Error(ErrorCode::invalid_argument, fmt::format("b.output: shape {} does not match a's {}", b.output.shape().str(), a.output.shape().str()));
  DecodeResult r{HostTensor(a.output.dtype(), a.output.shape()), HostTensor(DType::f32, a.lse.shape())};
  const int64_t rows = a.lse.numel(), D = a.output.shape()[2];
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < rows; ++i) {
    const double la = a.lse.get(size_t(i)), lb = b.lse.get(size_t(i));
    // A NaN or +Inf LSE is a state that saw a non-finite input (contract, Decode step 9): the
    // merge is NaN, output and LSE. A side with LSE -Inf is empty: its output is not read.
    if (std::isnan(la) || std::isnan(lb) || la == -kNegInf || lb == -kNegInf) {
      for (int64_t d = 0; d < D; ++d) r.output.set(size_t(i * D + d), kNaN);
      r.lse.set(size_t(i), kNaN);
      continue;
    }
    const double m = std::max(la, lb);
    const double wa = la == kNegInf ? 0.0 : std::exp(la - m);
    const double wb = lb == kNegInf ? 0.0 : std::exp(lb - m);
    const double den = wa + wb;
    for (int64_t d = 0; d < D; ++d) {
      const size_t k = size_t(i * D + d);
      const double sum = (la == kNegInf ? 0.0 : wa * a.output.get(k)) + (lb == kNegInf ? 0.0 : wb * b.output.get(k));
      // A NaN or infinite output element (a non-finite value it attended) stays NaN.
      r.output.set(k, !std::isfinite(sum) ? kNaN : den > 0 ? sum / den : 0.0);
    }
    r.lse.set(size_t(i), den > 0 ? m + std::log(den) : kNegInf);
  }
  return r;
}

}  // namespace reference

}  // namespace vkpaged
