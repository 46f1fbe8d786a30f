// SPDX-License-Identifier: Apache-2.0
#pragma once
// vkpaged.CommandBuffer: the engine path's command buffer. The record_* calls of the C++ API
// record into the engine's own command buffer and never wait; Python has no Vulkan of its own,
// so this owns one (with its pool and fence) on the Context's device and queue. Each record call
// is checked and recorded at once (a refused one raises and leaves the buffer as it was).
//
// Two ways to run it: submit() on a recording ends it, submits it, waits (up to the Context's
// fence_timeout_ms) and starts a new recording (one step, one recording); end() makes the
// recording final instead, and each submit() then runs that same recording again, which stays
// (replay: a bucket's step recorded once, the device arrays rewritten between submissions).
// The views a recording uses stay alive as long as it does.
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
  // The command buffer to record into (after the previous submission, if it timed out, finished);
  // refused once the recording was ended.
  VkCommandBuffer recording();
  // Keeps `owner` (a buffer or cache a recorded call uses) alive as long as the recording.
  void keep(const py::object& owner) { keep_.push_back(owner); }
  // The TensorView / BufferView of an argument (empty for None), checked to belong to this
  // command buffer's Context, its owner kept.
  TensorView use(const PyTensorView* view, const char* argument);
  BufferView use(const PyBufferView* view, const char* argument);

  void barrier();  // record_compute_barrier: compute and transfer writes before what follows
  void end();      // the recording becomes final: each submit() replays it
  void submit();   // runs the recording and waits; a recording not ended is ended, then dropped
  void discard();  // drops the recording (ended or not); records anew
  bool ended() const noexcept { return ended_; }

 private:
  void begin();
  void reset();            // an empty recording
  void end_recording();    // the host-read barrier, vkEndCommandBuffer
  void wait_submission();  // waits for a submission whose wait timed out
  VkResult wait_fence();

  py::object context_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  bool ended_ = false;       // end() was called: the recording is replayed by each submit()
  bool in_flight_ = false;   // submitted, the wait timed out
  bool drop_after_ = false;  // the submission in flight consumes its recording (submit() without end())
  std::vector<py::object> keep_;  // what the recording uses
};

}  // namespace vkpaged::python
