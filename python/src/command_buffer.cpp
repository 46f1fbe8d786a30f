// SPDX-License-Identifier: Apache-2.0
#include "command_buffer.hpp"

#include <cstdint>
#include <string>

namespace vkpaged::python {

namespace {

void check(VkResult result, const char* call) {
  if (result == VK_SUCCESS) return;
  if (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    throw Error(ErrorCode::out_of_memory,
                std::string(call) + " failed: out of memory (" + std::to_string(result) + ")");
  if (result == VK_ERROR_DEVICE_LOST)
    throw Error(ErrorCode::device_error, std::string(call) +
                                             ": the device was lost (VK_ERROR_DEVICE_LOST); destroy "
                                             "the Context and create a new one");
  throw Error(ErrorCode::device_error, std::string(call) + " failed (VkResult " + std::to_string(result) + ")");
}

uint64_t timeout_ns(uint32_t ms) { return ms == 0 ? UINT64_MAX : uint64_t(ms) * 1000000u; }

}  // namespace

PyCommandBuffer::PyCommandBuffer(py::object context) : context_(std::move(context)) {
  Context& c = this->context();
  device_ = c.device();
  VkCommandPoolCreateInfo pinfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pinfo.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pinfo.queueFamilyIndex = c.queue_family();
  check(vkCreateCommandPool(device_, &pinfo, nullptr, &pool_), "vkCreateCommandPool");
  try {
    VkFenceCreateInfo finfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vkCreateFence(device_, &finfo, nullptr, &fence_), "vkCreateFence");
    VkCommandBufferAllocateInfo ainfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ainfo.commandPool = pool_;
    ainfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ainfo.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &ainfo, &cmd_), "vkAllocateCommandBuffers");
    begin();
  } catch (...) {
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    vkDestroyCommandPool(device_, pool_, nullptr);  // frees the command buffer
    throw;
  }
}

PyCommandBuffer::~PyCommandBuffer() {
  // Work in flight still uses the pool and the fence: wait without a limit, as ~Context does.
  if (in_flight_) vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  vkDestroyFence(device_, fence_, nullptr);
  vkDestroyCommandPool(device_, pool_, nullptr);
}

void PyCommandBuffer::begin() {
  // Not ONE_TIME_SUBMIT: an ended recording is submitted again and again.
  VkCommandBufferBeginInfo binfo{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  check(vkBeginCommandBuffer(cmd_, &binfo), "vkBeginCommandBuffer");
}

void PyCommandBuffer::reset() {
  keep_.clear();
  ended_ = false;
  check(vkResetCommandBuffer(cmd_, 0), "vkResetCommandBuffer");
  begin();
}

void PyCommandBuffer::end_recording() {
  // What the work wrote, visible to the host (mapped buffers) once the fence has signalled.
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
  check(vkEndCommandBuffer(cmd_), "vkEndCommandBuffer");
}

VkResult PyCommandBuffer::wait_fence() {
  return vkWaitForFences(device_, 1, &fence_, VK_TRUE, timeout_ns(context_of(context_).fence_timeout_ms));
}

void PyCommandBuffer::wait_submission() {
  if (!in_flight_) return;
  const VkResult r = wait_fence();
  if (r == VK_TIMEOUT)
    throw Error(ErrorCode::device_error, "the previous submission of this command buffer has still not finished");
  check(r, "vkWaitForFences");
  in_flight_ = false;
  check(vkResetFences(device_, 1, &fence_), "vkResetFences");
  if (drop_after_) reset();
}

VkCommandBuffer PyCommandBuffer::recording() {
  wait_submission();
  if (ended_) refuse("cmd: the recording was ended (end()) and is only replayed now; discard() it to record anew");
  return cmd_;
}

TensorView PyCommandBuffer::use(const PyTensorView* view, const char* argument) {
  if (!view) return {};
  if (!view->context.is(context_))
    refuse(std::string(argument) + ": a view of memory of another Context than the command buffer's");
  keep(view->owner);
  return view->view;
}

BufferView PyCommandBuffer::use(const PyBufferView* view, const char* argument) {
  if (!view) return {};
  if (!view->context.is(context_))
    refuse(std::string(argument) + ": a view of memory of another Context than the command buffer's");
  keep(view->owner);
  return view->view;
}

void PyCommandBuffer::barrier() { record_compute_barrier(context(), recording()); }

void PyCommandBuffer::end() {
  recording();  // refuses a second end()
  end_recording();
  ended_ = true;
}

void PyCommandBuffer::submit() {
  wait_submission();
  const bool one_shot = !ended_;
  if (one_shot) end_recording();
  VkSubmitInfo sinfo{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  sinfo.commandBufferCount = 1;
  sinfo.pCommandBuffers = &cmd_;
  const VkResult submitted = vkQueueSubmit(context().queue(), 1, &sinfo, fence_);
  if (submitted != VK_SUCCESS) {
    // Nothing runs: a one-shot recording is dropped, an ended one stays to be submitted again.
    if (one_shot) reset();
    check(submitted, "vkQueueSubmit");
  }
  in_flight_ = true;
  drop_after_ = one_shot;
  const VkResult r = wait_fence();
  if (r == VK_TIMEOUT)
    throw Error(ErrorCode::device_error,
                "the device did not finish the command buffer within " +
                    std::to_string(context_of(context_).fence_timeout_ms) +
                    " ms (Context fence_timeout_ms); it is still in flight, and its buffers stay alive until the "
                    "next use of this command buffer finds it finished");
  check(r, "vkWaitForFences");
  wait_submission();
}

void PyCommandBuffer::discard() {
  wait_submission();
  reset();
}

void bind_command_buffer(py::module_& m) {
  py::class_<PyCommandBuffer>(
      m, "CommandBuffer",
      "A command buffer on a Context's device, recording from creation. The record_* calls record into it (each "
      "checked first: a refused call raises and records nothing); barrier() orders what follows after what came "
      "before. submit() runs the recording on the Context's queue and waits: a recording still open is ended, run "
      "once and dropped (an empty recording follows); end() makes it final instead, and every submit() then replays "
      "it, the engine rewriting the device arrays between submissions (bucket plans: AttentionPlan.create_bucket). "
      "As a context manager it submits a recording still open on a normal exit and discards on an exception.")
      .def(py::init<py::object>(), py::arg("context"))
      .def_property_readonly("context", &PyCommandBuffer::context_object)
      .def_property_readonly("ended", &PyCommandBuffer::ended,
                             "Whether end() made the recording final (each submit() replays it).")
      .def("barrier", &PyCommandBuffer::barrier,
           "A compute/transfer barrier: every shader and transfer write recorded so far is visible to what is "
           "recorded after (the barrier the host conveniences place between operators). At the start of a "
           "recording that is replayed, it orders each replay after the previous one.")
      .def("end", &PyCommandBuffer::end,
           "Ends the recording for replay: record calls are refused from now on, and each submit() runs it again "
           "(the buffers it uses stay alive) until discard().")
      .def("submit", &PyCommandBuffer::submit,
           "Runs the recording and waits (DeviceError past the Context's fence_timeout_ms). An ended recording stays "
           "and may be submitted again; one still open is ended first and dropped after (a new recording starts). "
           "Host-visible buffers then hold what the work wrote.")
      .def("discard", &PyCommandBuffer::discard,
           "Drops the recording, ended or not, and starts a new one.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyCommandBuffer& self, const py::object& type, const py::object&, const py::object&) {
        if (!type.is_none())
          self.discard();
        else if (!self.ended())  // an ended recording ran when the engine submitted it
          self.submit();
        return false;
      });
}

}  // namespace vkpaged::python
