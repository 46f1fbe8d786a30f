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
  for (int64_t i = 0; i < rows; ++i) {
    const double la = a.lse.get(size_t(i)), lb = b.lse.get(size_t(i));
    const double m = std::max(la, lb);
    const double wa = std::isinf(la) && la < 0 ? 0.0 : std::exp(la - m);
    const double wb = std::isinf(lb) && lb < 0 ? 0.0 : std::exp(lb - m);
    const double den = wa + wb;
    for (int64_t d = 0; d < D; ++d) {
      const size_t k = size_t(i * D + d);
      r.output.set(k, den > 0 ? (wa * a.output.get(k) + wb * b.output.get(k)) / den : 0.0);
    }
    r.lse.set(size_t(i), den > 0 ? m + std::log(den) : -std::numeric_limits<double>::infinity());
  }
  return r;
}

}  // namespace reference

}  // namespace vkpaged
