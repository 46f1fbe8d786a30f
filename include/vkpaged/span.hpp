// SPDX-License-Identifier: Apache-2.0
#pragma once
// vkpaged::Span<T>: a pointer and a count, what the public API takes and returns for arrays of
// host values (prompts, sequence ids, block copies, cache layers), so that the headers compile
// as C++17 (docs/api.md, "Linking"). It is made from a std::vector, a std::array, a C array,
// another Span, a pointer and a count, or (C++20) a std::span; under C++20 it is a borrowed
// contiguous range, so a std::span<const T> is made from it in turn. Like std::span it owns
// nothing: the elements must outlive it.
#include <cstddef>
#include <iterator>
#include <type_traits>
#include <utility>

#if __cplusplus >= 202002L
#include <ranges>
#endif

namespace vkpaged {

namespace span_detail {
// Whether C has data() and size() and its elements may be seen as T: only added const, never a
// derived-to-base or other conversion (std::span's rule). False, not an error, for anything else.
template <typename C, typename T, typename = void>
struct views_as : std::false_type {};
template <typename C, typename T>
struct views_as<C, T, std::void_t<decltype(std::data(std::declval<C&>())), decltype(std::size(std::declval<C&>()))>>
    : std::is_convertible<std::remove_pointer_t<decltype(std::data(std::declval<C&>()))> (*)[], T (*)[]> {};
}  // namespace span_detail

template <typename T>
class Span {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using pointer = T*;
  using reference = T&;
  using iterator = T*;

  constexpr Span() noexcept = default;
  constexpr Span(T* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&array)[N]) noexcept : data_(array), size_(N) {}
  // Any contiguous container with data() and size(): std::vector, std::array, std::span, Span.
  // A temporary only where the elements are const (a prompt written in the call).
  template <typename C, typename = std::enable_if_t<!std::is_array_v<std::remove_reference_t<C>> &&
                                                    span_detail::views_as<std::remove_reference_t<C>, T>::value &&
                                                    (std::is_lvalue_reference_v<C> || std::is_const_v<T>)>>
  constexpr Span(C&& container) noexcept(noexcept(std::data(container)) && noexcept(std::size(container)))
      : data_(std::data(container)), size_(std::size(container)) {}

  constexpr T* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr T* begin() const noexcept { return data_; }
  constexpr T* end() const noexcept { return data_ + size_; }
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  constexpr T& front() const noexcept { return data_[0]; }
  constexpr T& back() const noexcept { return data_[size_ - 1]; }
  // The first or last `count` elements, or `count` from `offset` (all that follow by default);
  // the caller keeps them inside the span, as with std::span.
  constexpr Span first(std::size_t count) const noexcept { return {data_, count}; }
  constexpr Span last(std::size_t count) const noexcept { return {data_ + (size_ - count), count}; }
  constexpr Span subspan(std::size_t offset, std::size_t count = std::size_t(-1)) const noexcept {
    return {data_ + offset, count == std::size_t(-1) ? size_ - offset : count};
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

template <typename T>
Span(T*, std::size_t) -> Span<T>;
template <typename T, std::size_t N>
Span(T (&)[N]) -> Span<T>;

}  // namespace vkpaged

#if __cplusplus >= 202002L
// A view of memory it does not own: a std::span may be made from a temporary Span.
namespace std::ranges {
template <typename T>
inline constexpr bool enable_borrowed_range<vkpaged::Span<T>> = true;
}  // namespace std::ranges
#endif
