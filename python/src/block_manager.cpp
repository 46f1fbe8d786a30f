// SPDX-License-Identifier: Apache-2.0
// The host-side block bookkeeping (block_manager.hpp): sequences, sharing, copy-on-write, the
// prefix cache, swapping, preemption. Arrays the GPU calls take come back as numpy arrays.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "host_array.hpp"
#include "names.hpp"

namespace vkpaged::python {

namespace {

// One id or a sequence of them (a forked group swaps together).
std::vector<uint64_t> seq_ids_of(const py::handle& ids) {
  if (PyIndex_Check(ids.ptr())) return {ids.cast<uint64_t>()};  // an int, or a numpy integer
  std::vector<uint64_t> out;
  for (const py::handle id : ids) out.push_back(id.cast<uint64_t>());
  return out;
}

py::array int32_array(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  return to_numpy(DType::i32, shape, values.data());
}

std::string repr(const BlockCopy& c) {
  return "BlockCopy(" + std::to_string(c.src) + ", " + std::to_string(c.dst) + ")";
}

void bind_results(py::module_& m) {
  py::class_<BlockCopy>(m, "BlockCopy", "One whole-block copy (src, dst) for copy_blocks or swap_blocks.")
      .def(py::init([](int32_t src, int32_t dst) {
             return BlockCopy{src, dst};
           }),
           py::arg("src"), py::arg("dst"))
      .def_readwrite("src", &BlockCopy::src)
      .def_readwrite("dst", &BlockCopy::dst)
      .def("__eq__", [](const BlockCopy& a, const BlockCopy& b) { return a == b; })
      .def("__iter__", [](const BlockCopy& c) { return py::iter(py::make_tuple(c.src, c.dst)); })
      .def("__repr__", [](const BlockCopy& c) { return repr(c); });

  py::class_<AppendResult>(m, "AppendResult", "Where an appended token goes, and the copy-on-write to run first.")
      .def_readonly("slot", &AppendResult::slot, "block * block_size + offset, for reshape_and_cache")
      .def_readonly("copy", &AppendResult::copy, "A BlockCopy to run (copy_blocks) before the slot is written, or None")
      .def("__repr__", [](const AppendResult& r) {
        return "AppendResult(slot=" + std::to_string(r.slot) + ", copy=" + (r.copy ? repr(*r.copy) : "None") + ")";
      });

  py::class_<BlockUsage>(m, "BlockUsage", "Device blocks: in_use + free + cached == num_blocks; and host blocks.")
      .def_readonly("num_blocks", &BlockUsage::num_blocks)
      .def_readonly("in_use", &BlockUsage::in_use)
      .def_readonly("free", &BlockUsage::free)
      .def_readonly("cached", &BlockUsage::cached)
      .def_readonly("num_host_blocks", &BlockUsage::num_host_blocks)
      .def_readonly("host_in_use", &BlockUsage::host_in_use)
      .def("__repr__", [](const BlockUsage& u) {
        return "BlockUsage(num_blocks=" + std::to_string(u.num_blocks) + ", in_use=" + std::to_string(u.in_use) +
               ", free=" + std::to_string(u.free) + ", cached=" + std::to_string(u.cached) +
               ", num_host_blocks=" + std::to_string(u.num_host_blocks) +
               ", host_in_use=" + std::to_string(u.host_in_use) + ")";
      });

  py::class_<PrefixCacheStats>(m, "PrefixCacheStats", "What the prefix cache was asked and what it held.")
      .def_readonly("queries", &PrefixCacheStats::queries)
      .def_readonly("queried_blocks", &PrefixCacheStats::queried_blocks)
      .def_readonly("hit_blocks", &PrefixCacheStats::hit_blocks)
      .def_readonly("queried_tokens", &PrefixCacheStats::queried_tokens)
      .def_readonly("hit_tokens", &PrefixCacheStats::hit_tokens);
}

}  // namespace

std::vector<BlockCopy> to_block_copies(const py::handle& pairs, std::string_view argument) {
  std::vector<BlockCopy> out;
  for (const py::handle item : pairs) {
    if (py::isinstance<BlockCopy>(item)) {
      out.push_back(item.cast<BlockCopy>());
      continue;
    }
    if (!py::hasattr(item, "__len__") || !py::hasattr(item, "__getitem__"))
      refuse(std::string(argument) + "[" + std::to_string(out.size()) + "]: not a BlockCopy nor a (src, dst) pair");
    const auto pair = py::reinterpret_borrow<py::sequence>(item);
    if (py::len(pair) != 2)
      refuse(std::string(argument) + "[" + std::to_string(out.size()) + "]: " + std::to_string(py::len(pair)) +
             " values, not a (src, dst) pair");
    out.push_back(BlockCopy{pair[0].cast<int32_t>(), pair[1].cast<int32_t>()});
  }
  return out;
}

void bind_block_manager(py::module_& m) {
  bind_results(m);
  py::class_<BlockManager>(m, "BlockManager",
                           "Host bookkeeping of a paged cache (vkpaged::BlockManager): which blocks each sequence "
                           "(a caller-chosen int id) owns, with forks, copy-on-write, prefix caching (hash chains, "
                           "LRU eviction), swapping and preemption. No Vulkan: it answers with block ids, slots and "
                           "(src, dst) copies. Refused calls raise and change nothing; running out of blocks raises "
                           "OutOfMemoryError (check the can_* calls first). Not thread-safe.")
      .def(py::init([](int32_t num_blocks, int32_t block_size, double watermark, bool enable_prefix_caching,
                       uint64_t hash_salt, int32_t num_host_blocks) {
             BlockManagerOptions o;
             o.watermark = watermark;
             o.enable_prefix_caching = enable_prefix_caching;
             o.hash_salt = hash_salt;
             o.num_host_blocks = num_host_blocks;
             return BlockManager(num_blocks, block_size, o);
           }),
           py::arg("num_blocks"), py::arg("block_size"), py::kw_only(), py::arg("watermark") = 0.01,
           py::arg("enable_prefix_caching") = true, py::arg("hash_salt") = 0, py::arg("num_host_blocks") = 0)
      .def_property_readonly("block_size", &BlockManager::block_size)
      .def(
          "can_allocate",
          [](const BlockManager& b, const py::object& prompt) {
            return name_of(b.can_allocate(to_int32_vector(prompt, "prompt")));
          },
          py::arg("prompt"), "'ok' (fits and leaves the watermark free), 'later' or 'never'.")
      .def(
          "add_sequence",
          [](BlockManager& b, uint64_t seq_id, const py::object& prompt) {
            return b.add_sequence(seq_id, to_int32_vector(prompt, "prompt"));
          },
          py::arg("seq_id"), py::arg("prompt"),
          "Allocates the prompt's blocks, reusing prefix-cached full blocks; returns how many leading tokens are "
          "already cached (a multiple of block_size).")
      .def("can_append", &BlockManager::can_append, py::arg("seq_id"))
      .def("append_token", &BlockManager::append_token, py::arg("seq_id"), py::arg("token"),
           "The new token's slot, and a copy-on-write BlockCopy to run first where the last block is shared.")
      .def("fork", &BlockManager::fork, py::arg("parent_id"), py::arg("child_id"),
           "The child shares every block of the parent (parallel sampling, beam search).")
      .def("free_sequence", &BlockManager::free_sequence, py::arg("seq_id"))
      .def("preempt", &BlockManager::preempt, py::arg("seq_id"),
           "Frees the sequence for recompute; returns its token count.")
      .def(
          "can_swap_out", [](const BlockManager& b, const py::object& ids) { return b.can_swap_out(seq_ids_of(ids)); },
          py::arg("seq_ids"))
      .def(
          "can_swap_in",
          [](const BlockManager& b, const py::object& ids) { return name_of(b.can_swap_in(seq_ids_of(ids))); },
          py::arg("seq_ids"), "'ok', 'later' or 'never'.")
      .def(
          "swap_out",
          [](BlockManager& b, const py::object& ids) {
            const std::vector<uint64_t> seqs = seq_ids_of(ids);
            return b.swap_out(std::span<const uint64_t>(seqs));
          },
          py::arg("seq_ids"), "(device, host) BlockCopy pairs for KvCache.record_swap_out (one id or several).")
      .def(
          "swap_in",
          [](BlockManager& b, const py::object& ids) {
            const std::vector<uint64_t> seqs = seq_ids_of(ids);
            return b.swap_in(std::span<const uint64_t>(seqs));
          },
          py::arg("seq_ids"), "(host, device) BlockCopy pairs for KvCache.record_swap_in (one id or several).")
      .def("contains", &BlockManager::contains, py::arg("seq_id"))
      .def("is_swapped", &BlockManager::is_swapped, py::arg("seq_id"))
      .def("context_len", &BlockManager::context_len, py::arg("seq_id"))
      .def(
          "block_table",
          [](const BlockManager& b, uint64_t seq_id, std::optional<int32_t> width) {
            const std::vector<int32_t> t = width ? b.block_table(seq_id, *width) : b.block_table(seq_id);
            return int32_array(t, {int64_t(t.size())});
          },
          py::arg("seq_id"), py::arg("width") = py::none(),
          "The sequence's blocks (int32), padded with block 0 to `width` where given.")
      .def(
          "host_block_table",
          [](const BlockManager& b, uint64_t seq_id) {
            const std::vector<int32_t> t = b.host_block_table(seq_id);
            return int32_array(t, {int64_t(t.size())});
          },
          py::arg("seq_id"), "A swapped-out sequence's host blocks (int32).")
      .def(
          "build_batch",
          [](const BlockManager& b, const py::object& ids, int32_t width) {
            const std::vector<uint64_t> seqs = seq_ids_of(ids);
            const BatchArrays a = b.build_batch(seqs, width);
            const int64_t S = int64_t(seqs.size());
            return py::make_tuple(int32_array(a.block_tables, {S, width}), int32_array(a.context_lens, {S}));
          },
          py::arg("seq_ids"), py::arg("width"),
          "(block_tables [S, width] int32 padded with block 0, context_lens [S] int32) for the sequences.")
      .def(
          "slot_mapping",
          [](const BlockManager& b, uint64_t seq_id, int32_t first_token, int32_t count) {
            const std::vector<int64_t> s = b.slot_mapping(seq_id, first_token, count);
            return to_numpy(DType::i64, {int64_t(s.size())}, s.data());
          },
          py::arg("seq_id"), py::arg("first_token"), py::arg("count"),
          "Slots (int64) of the sequence's tokens [first_token, first_token + count).")
      .def_property_readonly("num_free_blocks", &BlockManager::num_free_blocks)
      .def_property_readonly("num_cached_blocks", &BlockManager::num_cached_blocks)
      .def("usage", &BlockManager::usage)
      .def("prefix_cache_stats", &BlockManager::prefix_cache_stats)
      .def(
          "ref_count",
          [](const BlockManager& b, int32_t block, bool host) {
            return host ? b.host_allocator().ref_count(block) : b.device_allocator().ref_count(block);
          },
          py::arg("block"), py::kw_only(), py::arg("host") = false,
          "How many sequences hold a device block (a host block with host=True).");
}

}  // namespace vkpaged::python
