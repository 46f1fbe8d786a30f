// SPDX-License-Identifier: Apache-2.0
// Start-up (vkpaged/prepare.hpp): the descriptions of what an engine's steps will record (bucket
// plans, decode plans, kinds of cache write), Context.prepare, which builds all their pipelines
// at once so that no step compiles one, and the Context's pipeline cache, saved after a run and
// loaded into the next run's Context.
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "names.hpp"
#include "plan_class.hpp"
#include "record_args.hpp"
#include "vkpaged/prepare.hpp"

namespace vkpaged::python {

namespace {

void bind_buckets(py::module_& m) {
  bind_plan_bucket<AttentionBucket>(m, "AttentionBucket", "AttentionPlan.create_bucket's arguments, for Context.prepare.",
                                    &attention_options);
  bind_plan_bucket<MlaBucket>(m, "MlaBucket", "MlaPlan.create_bucket's arguments, for Context.prepare.", &mla_options);

  py::class_<DecodeBucket>(m, "DecodeBucket", "DecodePlan's arguments (a DecodeShape is a bucket already), for "
                                              "Context.prepare.")
      .def(py::init([](const DecodeShape& shape, uint32_t sliding_window, const std::string& split,
                       uint32_t partition_tokens, const std::string& kernel, const std::string& order,
                       const std::string& merge) {
             return DecodeBucket{shape, decode_options(sliding_window, split, partition_tokens, kernel, order, merge)};
           }),
           py::arg("shape"), py::kw_only(), py::arg("sliding_window") = 0, py::arg("split") = "auto",
           py::arg("partition_tokens") = 0, py::arg("kernel") = "auto", py::arg("order") = "auto",
           py::arg("merge") = "reduce_pass")
      .def_readonly("shape", &DecodeBucket::shape)
      .def_property_readonly("sliding_window", [](const DecodeBucket& b) { return b.options.sliding_window; })
      .def_property_readonly("split", [](const DecodeBucket& b) { return name_of(b.options.split); })
      .def_property_readonly("partition_tokens", [](const DecodeBucket& b) { return b.options.partition_tokens; })
      .def_property_readonly("kernel", [](const DecodeBucket& b) { return name_of(b.options.kernel); })
      .def_property_readonly("order", [](const DecodeBucket& b) { return name_of(b.options.order); })
      .def_property_readonly("merge", [](const DecodeBucket& b) { return name_of(b.options.merge); });
}

void bind_cache_writes(py::module_& m) {
  py::class_<RotaryWrite>(m, "RotaryWrite", "The rotary part of a cache write (positions and cos_sin_cache given).")
      .def(py::init([](uint32_t rotary_dim, const std::string& style, const std::string& cos_sin_dtype,
                       const std::string& position_dtype) {
             return RotaryWrite{parse_rotary_style_arg("style", style), rotary_dim,
                                parse_dtype_arg("cos_sin_dtype", cos_sin_dtype),
                                parse_dtype_arg("position_dtype", position_dtype)};
           }),
           py::arg("rotary_dim"), py::kw_only(), py::arg("style") = "neox", py::arg("cos_sin_dtype") = "f32",
           py::arg("position_dtype") = "i64")
      .def_readonly("rotary_dim", &RotaryWrite::rotary_dim)
      .def_property_readonly("style", [](const RotaryWrite& r) { return name_of(r.style); })
      .def_property_readonly("cos_sin_dtype", [](const RotaryWrite& r) { return name_of(r.cos_sin_dtype); })
      .def_property_readonly("position_dtype", [](const RotaryWrite& r) { return name_of(r.position_dtype); });

  py::class_<CacheWriteKind>(m, "CacheWriteKind",
                             "One kind of cache write (record_reshape_and_cache) into a cache of this geometry, its "
                             "pools each one buffer from its start (as KvCache's are), for Context.prepare.")
      .def(py::init([](const KvCacheShape& cache, uint32_t num_blocks, const std::string& token_dtype,
                       const std::string& slot_dtype, std::optional<RotaryWrite> rotary) {
             return CacheWriteKind{cache, num_blocks, parse_dtype_arg("token_dtype", token_dtype),
                                   parse_dtype_arg("slot_dtype", slot_dtype), rotary};
           }),
           py::arg("cache"), py::arg("num_blocks"), py::kw_only(), py::arg("token_dtype") = "f16",
           py::arg("slot_dtype") = "i64", py::arg("rotary") = py::none())
      .def_static(
          "of",
          [](const PyKvCache& cache, const std::string& token_dtype, std::optional<RotaryWrite> rotary,
             const std::string& slot_dtype) {
            return CacheWriteKind::of(cache.cache, parse_dtype_arg("token_dtype", token_dtype), rotary,
                                      parse_dtype_arg("slot_dtype", slot_dtype));
          },
          py::arg("cache"), py::arg("token_dtype") = "f16", py::arg("rotary") = py::none(),
          py::arg("slot_dtype") = "i64", "The kind a KvCache's writes are.")
      .def_readonly("cache", &CacheWriteKind::cache)
      .def_readonly("num_blocks", &CacheWriteKind::num_blocks)
      .def_property_readonly("token_dtype", [](const CacheWriteKind& k) { return name_of(k.token_dtype); })
      .def_property_readonly("slot_dtype", [](const CacheWriteKind& k) { return name_of(k.slot_dtype); })
      .def_readonly("rotary", &CacheWriteKind::rotary);
}

py::bytes cache_data(const PyContext& c) {
  const std::vector<uint8_t> data = c.context.pipeline_cache_data();
  return py::bytes(reinterpret_cast<const char*>(data.data()), data.size());
}

void load_cache(PyContext& c, const py::object& data) {
  // bytes, bytearray, memoryview, a numpy uint8 array: anything with the buffer protocol.
  const auto blob = py::reinterpret_steal<py::bytes>(PyBytes_FromObject(data.ptr()));
  if (!blob) throw py::error_already_set();
  const std::string_view bytes = blob;
  c.context.load_pipeline_cache(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

}  // namespace

void bind_prepare(py::module_& m) {
  bind_buckets(m);
  bind_cache_writes(m);
  py::class_<PrepareReport>(m, "PrepareReport", "What Context.prepare did.")
      .def_readonly("pipelines", &PrepareReport::pipelines, "Distinct pipelines the set uses.")
      .def_readonly("created", &PrepareReport::created,
                    "Of them, built by this call (the others the Context had built before).")
      .def("__repr__", [](const PrepareReport& r) {
        return "PrepareReport(pipelines=" + std::to_string(r.pipelines) + ", created=" + std::to_string(r.created) +
               ")";
      });

  // Context is bound first (everything takes it); these take the classes bound since.
  auto context = py::reinterpret_borrow<py::class_<PyContext>>(m.attr("Context"));
  context
      .def(
          "prepare",
          [](PyContext& c, std::vector<AttentionBucket> attention, std::vector<DecodeBucket> decode,
             std::vector<CacheWriteKind> cache_writes, std::vector<MlaBucket> mla) {
            return c.context.prepare(
                PipelineSet{std::move(attention), std::move(decode), std::move(cache_writes), std::move(mla)});
          },
          py::kw_only(), py::arg("attention") = std::vector<AttentionBucket>{},
          py::arg("decode") = std::vector<DecodeBucket>{}, py::arg("cache_writes") = std::vector<CacheWriteKind>{},
          py::arg("mla") = std::vector<MlaBucket>{},
          "Builds now, on several threads, every pipeline the bucket plans (AttentionBucket, MlaBucket), decode "
          "plans (DecodeBucket) and cache writes (CacheWriteKind) use, so that the plans made and the writes "
          "recorded after build none. Checks them as the plans would, naming 'attention[i]: ...', 'decode[i]: "
          "...', 'mla[i]: ...' or 'cache_writes[i].<field>: ...', before building anything.")
      .def("pipeline_cache_data", &cache_data,
           "The Context's VkPipelineCache (every pipeline built so far) as bytes, for the next run's Context.")
      .def("load_pipeline_cache", &load_cache, py::arg("data"),
           "Merges a saved pipeline cache (bytes or any buffer) into the Context's, after checking its header: a "
           "cache of another device, driver or driver version, or a damaged one, raises InvalidArgumentError "
           "saying which, and nothing changes (the pipelines are then built afresh).");
}

}  // namespace vkpaged::python
