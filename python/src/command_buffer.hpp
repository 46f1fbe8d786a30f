// SPDX-License-Identifier: Apache-2.0
#pragma once
// vkpaged.CommandBuffer: the engine path's command buffer. The record_* calls of the C++ API
// record into the engine's own command buffer and never wait; Python has no Vulkan of its own,
// so this owns one (with its pool and fence) on the Context's device and queue. Each record call
// is checked and recorded at once (a refused one raises and leaves the buffer as it was);
// submit() ends it, submits it to the Context's queue, waits (up to the Context's
// fence_timeout_ms) and starts a new recording. The views a recording uses stay alive until its
// submission has finished.
#include <vulkan/vulkan.h>

#include <vector>

#include "bindings.hpp"

namespace vkpaged::python {

class PyCommandBuffer {
 public:
  explicit PyCommandBuffer(py::object context);
  ~PyCommandBuffer();
  PyCommandBuffer(const PyCommandBuffer&) = delete;
  PyCommandBuffer& operator=(const PyCommandBuffer&) = delete;

  const py::object& context_object() const noexcept { return context_; }
  Context& context() const { return context_of(context_).context; }
  // The command buffer to record into (after the previous submission, if it timed out, finished).
  VkCommandBuffer recording();
  // Keeps `owner` (a buffer or cache a recorded call uses) alive until the submission finishes.
  void keep(const py::object& owner) { keep_.push_back(owner); }
  // The TensorView / BufferView of an argument (empty for None), checked to belong to this
  // command buffer's Context, its owner kept.
  TensorView use(const PyTensorView* view, const char* argument);
  BufferView use(const PyBufferView* view, const char* argument);

  void barrier();  // record_compute_barrier: compute and transfer writes before what follows
  void submit();   // end, submit, wait; then record anew
  void discard();  // drops what was recorded; records anew

 private:
  void begin();
  void finish_in_flight();

  py::object context_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool in_flight_ = false;                  // submitted, the wait timed out
  std::vector<py::object> keep_;            // what the recording uses
  std::vector<py::object> in_flight_keep_;  // what the submitted work uses
};

}  // namespace vkpaged::python
