// SPDX-License-Identifier: Apache-2.0
// vkpaged::Span, the public API's array view (C++17 headers): made from what an engine holds,
// and a std::span made from it in turn inside C++20 code.
#include <gtest/gtest.h>

#include <array>
#include <span>
#include <type_traits>
#include <vector>

#include "vkpaged/block_manager.hpp"
#include "vkpaged/span.hpp"

namespace vkpaged::test {
namespace {

size_t sum(Span<const int32_t> values) {
  size_t total = 0;
  for (int32_t v : values) total += size_t(v);
  return total;
}

TEST(SpanTest, ViewsVectorsArraysPointersAndStdSpans) {
  std::vector<int32_t> vector = {1, 2, 3};
  const std::array<int32_t, 2> array = {10, 20};
  int32_t c_array[] = {100, 200, 300, 400};
  EXPECT_EQ(sum(vector), 6u);
  EXPECT_EQ(sum(array), 30u);
  EXPECT_EQ(sum(c_array), 1000u);
  EXPECT_EQ(sum({c_array + 1, 2}), 500u);
  EXPECT_EQ(sum(std::span<const int32_t>(vector).subspan(1)), 5u);
  EXPECT_EQ(sum(std::vector<int32_t>{4, 5}), 9u) << "a temporary of const elements, as std::span takes";
  EXPECT_EQ(sum({}), 0u);

  const Span<int32_t> writable(vector);
  writable[0] = 7;
  EXPECT_EQ(vector[0], 7);
  const Span<const int32_t> view = writable;  // adds const, as std::span does
  EXPECT_EQ(view.data(), vector.data());
  EXPECT_EQ(view.first(2).size(), 2u);
  EXPECT_EQ(view.last(1).front(), 3);
  EXPECT_EQ(view.subspan(1, 1).back(), 2);
  EXPECT_TRUE(view.subspan(3).empty());

  // A std::span of it, as the library's C++20 code takes.
  const std::span<const int32_t> standard = view;
  EXPECT_EQ(standard.data(), vector.data());
  EXPECT_EQ(standard.size(), 3u);
  // Only added const: no view of other element types, and no mutable view of const ones.
  static_assert(!std::is_constructible_v<Span<const int64_t>, std::vector<int32_t>&>);
  static_assert(!std::is_constructible_v<Span<int32_t>, const std::vector<int32_t>&>);
  static_assert(!std::is_constructible_v<Span<int32_t>, std::vector<int32_t>&&>);
  static_assert(!std::is_convertible_v<uint64_t, Span<const uint64_t>>);
}

TEST(SpanTest, BlockCopiesCompareAsPairs) {
  EXPECT_EQ((BlockCopy{1, 2}), (BlockCopy{1, 2}));
  EXPECT_NE((BlockCopy{1, 2}), (BlockCopy{2, 1}));
  EXPECT_NE((BlockCopy{1, 2}), (BlockCopy{1, 3}));
}

}  // namespace
}  // namespace vkpaged::test
