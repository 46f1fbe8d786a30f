// SPDX-License-Identifier: Apache-2.0
#pragma once
// What operators keep per Context (a probe's result, settings read once), each defined by its
// operator and owned by the Context: ContextImpl holds one OperatorStates and knows nothing of
// what is in it, so that an operator's state lives beside the operator.
//
//   struct FragmentLayoutState { std::mutex mutex; std::optional<std::string> mismatch; };
//   auto& state = context.impl().operator_states.get<FragmentLayoutState>();
//
// A state is plain host data: it is destroyed with the ContextImpl, after the device, so it must
// hold no Vulkan object.
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>

namespace vkpaged::detail {

class OperatorStates {
 public:
  // The context's `State`, default-constructed on first use and kept until the context goes.
  // Thread-safe; the state guards its own fields (a state's reference stays valid).
  template <typename State>
  State& get() {
    std::lock_guard lock(mutex_);
    std::shared_ptr<void>& slot = states_[std::type_index(typeid(State))];
    if (!slot) slot = std::make_shared<State>();
    return *static_cast<State*>(slot.get());
  }

 private:
  std::mutex mutex_;
  std::map<std::type_index, std::shared_ptr<void>> states_;
};

}  // namespace vkpaged::detail
