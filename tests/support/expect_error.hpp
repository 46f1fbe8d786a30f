// SPDX-License-Identifier: Apache-2.0
#pragma once
// Checks that a call is refused with vkpaged::Error of the expected code, and that the message
// names what it should (the argument and the value, as the contract asks).
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>

#include "vkpaged/error.hpp"

namespace vkpaged::test {

inline void expect_refused(const std::function<void()>& call, const std::string& needle,
                           ErrorCode code = ErrorCode::invalid_argument) {
  try {
    call();
    ADD_FAILURE() << "not refused; expected a message containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message '" << e.what() << "' does not name " << needle;
  }
}

// The same, with the code first and several parts the message must contain.
inline void expect_refused(const std::function<void()>& call, ErrorCode code, std::initializer_list<std::string> parts) {
  try {
    call();
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The message of the vkpaged::Error that `call` throws, after checking its code; a failure and
// "" when nothing is thrown. For tests that compare the whole message.
inline std::string error_of(const std::function<void()>& call, ErrorCode expected = ErrorCode::invalid_argument) {
  try {
    call();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), expected) << error.what();
    return error.what();
  }
  ADD_FAILURE() << "no vkpaged::Error was thrown";
  return {};
}

}  // namespace vkpaged::test
