// SPDX-License-Identifier: Apache-2.0
#pragma once
// The special members of a public plan class (AttentionPlan, DecodePlan, MlaPlan) that owns its data
// through `std::unique_ptr<Data> data_`, written once: made from its data, copied by copying the
// data (a plan is immutable, so copies are independent), moved by moving the pointer.
#include <memory>

#define VKP_PLAN_HANDLE_MEMBERS(Plan, Data)                                          \
  Plan::Plan(std::unique_ptr<Data> data) : data_(std::move(data)) {}                 \
  Plan::Plan(const Plan& o) : data_(std::make_unique<Data>(*o.data_)) {}             \
  Plan& Plan::operator=(const Plan& o) {                                             \
    data_ = std::make_unique<Data>(*o.data_);                                        \
    return *this;                                                                    \
  }                                                                                  \
  Plan::Plan(Plan&&) noexcept = default;                                             \
  Plan& Plan::operator=(Plan&&) noexcept = default;                                  \
  Plan::~Plan() = default;
