// SPDX-License-Identifier: Apache-2.0
// KvCache (kv_cache.hpp): every layer's pools (key and value, or MLA's), sized by blocks, bytes or
// a fraction of the free device memory, with a host pool to swap to; it records each layer's
// cache writes and attention (MLA's over an MLA cache) from its own geometry, and the copies and
// swaps of every layer at once.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "bindings.hpp"
#include "cache_record.hpp"
#include "names.hpp"
#include "record_args.hpp"
#include "vkpaged/kv_cache.hpp"

namespace vkpaged::python {

namespace {

KvCacheOptions options_of(uint32_t num_blocks, uint64_t budget_bytes, double budget_fraction,
                          uint32_t num_host_blocks) {
  KvCacheOptions o;
  o.num_blocks = num_blocks;
  o.budget_bytes = budget_bytes;
  o.budget_fraction = budget_fraction;
  o.num_host_blocks = num_host_blocks;
  return o;
}

// A view of the cache's memory, keeping the cache alive.
PyTensorView view_of(const py::object& self, const TensorView& view) {
  return PyTensorView{self, self.cast<const PyKvCache&>().context, view};
}

// A view of one of the cache's pools.
PyTensorView pool(const py::object& self, TensorView (KvCache::*which)(uint32_t) const, uint32_t layer) {
  return view_of(self, (self.cast<const PyKvCache&>().cache.*which)(layer));
}

// One layer's MLA pools as TensorViews keeping the cache alive; the other form's are None.
struct PyMlaCacheViews {
  std::optional<PyTensorView> mla_cache, ckv_cache, kpe_cache;
};

PyMlaCacheViews mla_pools(const py::object& self, MlaCacheViews (KvCache::*which)(uint32_t) const, uint32_t layer) {
  const MlaCacheViews v = (self.cast<const PyKvCache&>().cache.*which)(layer);
  auto view = [&](const TensorView& t) {
    return t.empty() ? std::nullopt : std::optional<PyTensorView>(view_of(self, t));
  };
  return {view(v.mla_cache), view(v.ckv_cache), view(v.kpe_cache)};
}

// The cache's pools are kept by the command buffer as long as what it recorded needs them.
PyKvCache& recorded(PyCommandBuffer& cmd, const py::object& self) {
  PyKvCache& c = self.cast<PyKvCache&>();
  if (!c.context.is(cmd.context_object())) refuse("cache: made on another Context than the command buffer's");
  cmd.keep(self);
  return c;
}

// The plan's attention over layer `layer`'s pools (the cache fills in the views' pools).
void record_layer(const KvCache& cache, PyCommandBuffer& cmd, uint32_t layer, const PyAttentionPlan& plan, View query,
                  const AttentionRequest& r) {
  cache.record_attention(cmd.recording(), layer, plan.plan, attention_views(cmd, query, nullptr, nullptr, r), r.params);
}

void record_layer(const KvCache& cache, PyCommandBuffer& cmd, uint32_t layer, const PyMlaPlan& plan, View query,
                  const AttentionRequest& r) {
  cache.record_mla_attention(cmd.recording(), layer, plan.plan, mla_views(cmd, query, nullptr, nullptr, nullptr, r),
                             r.params);
}

// KvCache.record_attention and record_mla_attention: (cmd, layer, plan, *, query, the request's keywords).
template <typename PyPlan>
void def_layer_attention(py::class_<PyKvCache>& cls, const char* name, const char* doc) {
  cls.def(name,
          taking_attention_request<const py::object&, PyCommandBuffer&, uint32_t, const PyPlan&, View>(
              [](const py::object& self, PyCommandBuffer& cmd, uint32_t layer, const PyPlan& plan, View query,
                 const AttentionRequest& r) {
                const PyKvCache& c = recorded(cmd, self);
                check_plan_context(cmd, plan.context);
                record_layer(c.cache, cmd, layer, plan, query, r);
              }),
          py::arg("cmd"), py::arg("layer"), py::arg("plan"), py::kw_only(), py::arg("query"),
          VKPAGED_ATTENTION_REQUEST_KWARGS, doc);
}

void bind_shape(py::module_& m) {
  py::class_<KvCacheShape> shape(m, "KvCacheShape", "What one cache holds per block (vkpaged::KvCacheShape).");
  shape
      .def(py::init([](uint32_t num_layers, uint32_t num_kv_heads, uint32_t head_size, uint32_t block_size,
                       const std::string& dtype, const std::string& layout, const std::string& kind,
                       uint32_t rope_head_size) {
             KvCacheShape s;
             s.num_layers = num_layers;
             s.num_kv_heads = num_kv_heads;
             s.head_size = head_size;
             s.block_size = block_size;
             s.dtype = parse_dtype_arg("dtype", dtype);
             s.layout = parse_layout_arg("layout", layout);
             s.kind = parse_kv_cache_kind_arg("kind", kind);
             s.rope_head_size = rope_head_size;
             return s;
           }),
           py::kw_only(), py::arg("num_layers") = 1, py::arg("num_kv_heads") = 0, py::arg("head_size") = 0,
           py::arg("block_size") = 16, py::arg("dtype") = "f16", py::arg("layout") = "vllm",
           py::arg("kind") = "key_value", py::arg("rope_head_size") = 0)
      .def_readwrite("num_layers", &KvCacheShape::num_layers)
      .def_readwrite("num_kv_heads", &KvCacheShape::num_kv_heads)
      .def_readwrite("head_size", &KvCacheShape::head_size)
      .def_readwrite("block_size", &KvCacheShape::block_size)
      .def_property(
          "dtype", [](const KvCacheShape& s) { return name_of(s.dtype); },
          [](KvCacheShape& s, const std::string& v) { s.dtype = parse_dtype_arg("dtype", v); })
      .def_property(
          "layout", [](const KvCacheShape& s) { return name_of(s.layout); },
          [](KvCacheShape& s, const std::string& v) { s.layout = parse_layout_arg("layout", v); })
      .def_property(
          "kind", [](const KvCacheShape& s) { return name_of(s.kind); },
          [](KvCacheShape& s, const std::string& v) { s.kind = parse_kv_cache_kind_arg("kind", v); },
          "'key_value' (key and value pools), 'mla_one_pool' ([N, B, Dv + R]) or 'mla_two_pools' (ckv [N, B, Dv] "
          "and kpe [N, B, R]); MLA: num_kv_heads 1, layout 'nhd', head_size Dv")
      .def_readwrite("rope_head_size", &KvCacheShape::rope_head_size, "MLA: R; 0 for key_value")
      .def("__repr__", [](const KvCacheShape& s) {
        const std::string mla = s.kind == KvCacheKind::key_value
                                    ? ""
                                    : ", kind='" + name_of(s.kind) + "', rope_head_size=" + std::to_string(s.rope_head_size);
        return "KvCacheShape(num_layers=" + std::to_string(s.num_layers) +
               ", num_kv_heads=" + std::to_string(s.num_kv_heads) + ", head_size=" + std::to_string(s.head_size) +
               ", block_size=" + std::to_string(s.block_size) + ", dtype='" + name_of(s.dtype) + "', layout='" +
               name_of(s.layout) + "'" + mla + ")";
      });

  py::class_<PyMlaCacheViews>(m, "MlaCacheViews",
                              "One layer's MLA pools (vkpaged::MlaCacheViews) as TensorViews: mla_cache [N, B, Dv + "
                              "R] of an 'mla_one_pool' cache, or ckv_cache [N, B, Dv] and kpe_cache [N, B, R] of an "
                              "'mla_two_pools' one; the other form's are None.")
      .def_readonly("mla_cache", &PyMlaCacheViews::mla_cache)
      .def_readonly("ckv_cache", &PyMlaCacheViews::ckv_cache)
      .def_readonly("kpe_cache", &PyMlaCacheViews::kpe_cache);

  py::class_<KvCacheSizing>(m, "KvCacheSizing", "What a number of blocks holds and costs (vkpaged::KvCacheSizing).")
      .def_readonly("num_blocks", &KvCacheSizing::num_blocks)
      .def_readonly("num_tokens", &KvCacheSizing::num_tokens)
      .def_readonly("block_bytes", &KvCacheSizing::block_bytes)
      .def_readonly("bytes_per_block", &KvCacheSizing::bytes_per_block)
      .def_readonly("pool_bytes", &KvCacheSizing::pool_bytes)
      .def_readonly("total_bytes", &KvCacheSizing::total_bytes)
      .def_property_readonly(
          "fraction_of", [](const KvCacheSizing& s) { return name_of(s.fraction_of); },
          "'none', 'heap_size' or 'memory_budget': what a budget_fraction was taken of")
      .def_readonly("fraction_of_bytes", &KvCacheSizing::fraction_of_bytes);
}

void bind_ops(py::class_<PyKvCache>& cls) {
  cls.def(
      "record_reshape_and_cache",
      [](const py::object& self, PyCommandBuffer& cmd, uint32_t layer, View key, View value, View slot_mapping,
         Bytes status, View query, View positions, View cos_sin_cache, const std::string& rotary_style, float k_scale,
         float v_scale) {
        const PyKvCache& c = recorded(cmd, self);
        NewTokens t;
        t.key = cmd.use(key, "key");
        t.value = cmd.use(value, "value");
        t.slot_mapping = cmd.use(slot_mapping, "slot_mapping");
        t.status = cmd.use(status, "status");
        const std::optional<RotaryInputs> rotary = rotary_inputs(cmd, query, positions, cos_sin_cache, rotary_style);
        const CacheScales scales{k_scale, v_scale};
        if (rotary)
          c.cache.record_reshape_and_cache(cmd.recording(), layer, t, *rotary, scales);
        else
          c.cache.record_reshape_and_cache(cmd.recording(), layer, t, scales);
      },
      py::arg("cmd"), py::arg("layer"), py::kw_only(), py::arg("key"), py::arg("value"), py::arg("slot_mapping"),
      py::arg("status") = py::none(), py::arg("query") = py::none(), py::arg("positions") = py::none(),
      py::arg("cos_sin_cache") = py::none(), py::arg("rotary_style") = "neox", py::arg("k_scale") = 1.0f,
      py::arg("v_scale") = 1.0f,
      "Records layer `layer`'s new tokens (key/value [T, Hkv, D], slot_mapping [T]) into its pools; with positions "
      "and cos_sin_cache the keys are rotated on their way in and query [T, H, D] (optional) in place.");

  cls.def(
      "record_decode",
      [](const py::object& self, PyCommandBuffer& cmd, uint32_t layer, const PyDecodePlan& plan, View query,
         View block_tables, View context_lens, View output, View kv_indptr, View kv_indices, View kv_last_page_len,
         View alibi_slopes, View sinks, View lse, Bytes scratch, Bytes order, Bytes status, Bytes merge_counters,
         std::optional<float> scale, float softcap, float k_scale, float v_scale) {
        const PyKvCache& c = recorded(cmd, self);
        check_plan_context(cmd, plan.context);
        DecodeViews v = decode_views(cmd, query, nullptr, nullptr, block_tables, context_lens, output, alibi_slopes,
                                     sinks, lse, scratch, order, status, merge_counters);
        use_csr(cmd, v, kv_indptr, kv_indices, kv_last_page_len);
        c.cache.record_decode(cmd.recording(), layer, plan.plan, v, decode_params(scale, softcap, k_scale, v_scale));
      },
      py::arg("cmd"), py::arg("layer"), py::arg("plan"), py::kw_only(), py::arg("query"),
      py::arg("block_tables") = py::none(), py::arg("context_lens") = py::none(), py::arg("output"),
      py::arg("kv_indptr") = py::none(), py::arg("kv_indices") = py::none(), py::arg("kv_last_page_len") = py::none(),
      py::arg("alibi_slopes") = py::none(), py::arg("sinks") = py::none(), py::arg("lse") = py::none(),
      py::arg("scratch") = py::none(), py::arg("order") = py::none(), py::arg("status") = py::none(),
      py::arg("merge_counters") = py::none(), py::arg("scale") = py::none(), py::arg("softcap") = 0.0f,
      py::arg("k_scale") = 1.0f, py::arg("v_scale") = 1.0f,
      "record_decode over layer `layer`'s pools; the plan from decode_shape. Page tables dense (block_tables, "
      "context_lens) or CSR (kv_indptr, kv_indices, kv_last_page_len; a plan with csr_page_table).");

  def_layer_attention<PyAttentionPlan>(
      cls, "record_attention",
      "record_attention over layer `layer`'s pools; the plan from attention_shape. Page tables dense "
      "(block_tables, context_lens) or CSR (kv_indptr, kv_indices, kv_last_page_len; a plan with csr_page_table).");

  cls.def(
      "record_mla_reshape_and_cache",
      [](const py::object& self, PyCommandBuffer& cmd, uint32_t layer, View kv_c, View k_pe, View slot_mapping,
         Bytes status, View positions, View cos_sin_cache, const std::string& rotary_style, float scale) {
        const PyKvCache& c = recorded(cmd, self);
        MlaNewTokens t;
        t.kv_c = cmd.use(kv_c, "kv_c");
        t.k_pe = cmd.use(k_pe, "k_pe");
        t.slot_mapping = cmd.use(slot_mapping, "slot_mapping");
        t.status = cmd.use(status, "status");
        const std::optional<MlaRopeViews> rope = mla_rope(cmd, positions, cos_sin_cache, rotary_style);
        c.cache.record_mla_reshape_and_cache(cmd.recording(), layer, t, scale, rope ? &*rope : nullptr);
      },
      py::arg("cmd"), py::arg("layer"), py::kw_only(), py::arg("kv_c"), py::arg("k_pe"), py::arg("slot_mapping"),
      py::arg("status") = py::none(), py::arg("positions") = py::none(), py::arg("cos_sin_cache") = py::none(),
      py::arg("rotary_style") = "neox", py::arg("scale") = 1.0f,
      "Records layer `layer`'s new MLA tokens (kv_c [T, Dv], k_pe [T, R], slot_mapping [T]) into its MLA pools; "
      "with positions and cos_sin_cache, k_pe is rotated on its way in. fp8 pools store value * (1 / scale).");

  def_layer_attention<PyMlaPlan>(
      cls, "record_mla_attention",
      "record_mla_attention over layer `layer`'s MLA pools (query [T, H, Dv + R], output [T, H, Dv]); the plan "
      "from mla_shape. Page tables dense (block_tables, context_lens) or CSR (a plan with csr_page_table).");

  cls.def(
      "record_gather",
      [](const py::object& self, PyCommandBuffer& cmd, uint32_t layer, View block_tables, View seq_starts, View key_out,
         View value_out, Bytes status, float k_scale, float v_scale) {
        const PyKvCache& c = recorded(cmd, self);
        GatherViews v;
        v.key_cache = c.cache.key_cache(layer);
        v.value_cache = c.cache.value_cache(layer);
        v.layout = c.cache.shape().layout;
        v.block_tables = cmd.use(block_tables, "block_tables");
        v.seq_starts = cmd.use(seq_starts, "seq_starts");
        v.key_out = cmd.use(key_out, "key_out");
        v.value_out = cmd.use(value_out, "value_out");
        v.status = cmd.use(status, "status");
        record_gather(cmd.context(), cmd.recording(), v, CacheScales{k_scale, v_scale});
      },
      py::arg("cmd"), py::arg("layer"), py::kw_only(), py::arg("block_tables"), py::arg("seq_starts"),
      py::arg("key_out"), py::arg("value_out"), py::arg("status") = py::none(), py::arg("k_scale") = 1.0f,
      py::arg("v_scale") = 1.0f, "record_gather from layer `layer`'s pools: paged to contiguous [T, Hkv, D].");

  cls.def(
      "record_copy_blocks",
      [](const py::object& self, PyCommandBuffer& cmd, const py::object& pairs) {
        recorded(cmd, self).cache.record_copy_blocks(cmd.recording(), to_block_copies(pairs, "pairs"));
      },
      py::arg("cmd"), py::arg("pairs"), "Whole blocks (src, dst), keys and values, in every layer (copy-on-write).");
  cls.def(
      "record_swap_out",
      [](const py::object& self, PyCommandBuffer& cmd, const py::object& pairs) {
        recorded(cmd, self).cache.record_swap_out(cmd.recording(), to_block_copies(pairs, "pairs"));
      },
      py::arg("cmd"), py::arg("pairs"), "(device block, host block) pairs, as BlockManager.swap_out returns them.");
  cls.def(
      "record_swap_in",
      [](const py::object& self, PyCommandBuffer& cmd, const py::object& pairs) {
        recorded(cmd, self).cache.record_swap_in(cmd.recording(), to_block_copies(pairs, "pairs"));
      },
      py::arg("cmd"), py::arg("pairs"), "(host block, device block) pairs, as BlockManager.swap_in returns them.");
}

}  // namespace

void bind_kv_cache(py::module_& m) {
  bind_shape(m);
  py::class_<PyKvCache> cls(m, "KvCache",
                            "The paged KV cache (vkpaged::KvCache): a key and a value pool per layer in device "
                            "memory, in one layout (an MLA cache: one pool, or ckv and kpe, per layer), and "
                            "optionally a host-visible pool of the same layout to swap to. Give exactly one of "
                            "num_blocks, budget_bytes, budget_fraction. Pool contents start undefined.");
  cls.def(py::init([](const py::object& context, const KvCacheShape& shape, uint32_t num_blocks, uint64_t budget_bytes,
                      double budget_fraction, uint32_t num_host_blocks) {
            return PyKvCache{context, KvCache(context_of(context).context, shape,
                                              options_of(num_blocks, budget_bytes, budget_fraction, num_host_blocks))};
          }),
          py::arg("context"), py::arg("shape"), py::kw_only(), py::arg("num_blocks") = 0, py::arg("budget_bytes") = 0,
          py::arg("budget_fraction") = 0.0, py::arg("num_host_blocks") = 0)
      .def_static(
          "plan",
          [](const DeviceInfo& device, const KvCacheShape& shape, uint32_t num_blocks, uint64_t budget_bytes,
             double budget_fraction, uint32_t num_host_blocks) {
            return KvCache::plan(device, shape, options_of(num_blocks, budget_bytes, budget_fraction, num_host_blocks));
          },
          py::arg("device"), py::arg("shape"), py::kw_only(), py::arg("num_blocks") = 0, py::arg("budget_bytes") = 0,
          py::arg("budget_fraction") = 0.0, py::arg("num_host_blocks") = 0,
          "What the constructor would allocate on a device (DeviceInfo), without allocating.")
      .def_static("bytes_per_block", &KvCache::bytes_per_block, py::arg("shape"),
                  "Bytes one block costs over every layer, keys and values.")
      .def_property_readonly("shape", [](const PyKvCache& c) { return c.cache.shape(); })
      .def_property_readonly("layout", [](const PyKvCache& c) { return name_of(c.cache.shape().layout); })
      .def_property_readonly("dtype", [](const PyKvCache& c) { return name_of(c.cache.shape().dtype); })
      .def_property_readonly("num_blocks", [](const PyKvCache& c) { return c.cache.num_blocks(); })
      .def_property_readonly("num_host_blocks", [](const PyKvCache& c) { return c.cache.num_host_blocks(); })
      .def_property_readonly("num_tokens", [](const PyKvCache& c) { return c.cache.num_tokens(); })
      .def_property_readonly("sizing", [](const PyKvCache& c) { return c.cache.sizing(); })
      .def_property_readonly("host_bytes", [](const PyKvCache& c) { return c.cache.host_bytes(); })
      .def_readonly("context", &PyKvCache::context)
      .def(
          "key_cache", [](const py::object& self, uint32_t l) { return pool(self, &KvCache::key_cache, l); },
          py::arg("layer"), "Layer `layer`'s device key pool as a TensorView (read() downloads it).")
      .def(
          "value_cache", [](const py::object& self, uint32_t l) { return pool(self, &KvCache::value_cache, l); },
          py::arg("layer"))
      .def(
          "host_key_cache", [](const py::object& self, uint32_t l) { return pool(self, &KvCache::host_key_cache, l); },
          py::arg("layer"), "Layer `layer`'s host (swap) key pool; refused without one.")
      .def(
          "host_value_cache",
          [](const py::object& self, uint32_t l) { return pool(self, &KvCache::host_value_cache, l); },
          py::arg("layer"))
      .def(
          "decode_shape", [](const PyKvCache& c, const DecodeShape& batch) { return c.cache.decode_shape(batch); },
          py::arg("batch"),
          "`batch` (num_seqs, num_heads, max_blocks_per_seq, max_context_len, query_dtype, alibi, softcap, sinks, "
          "lse) with the cache's num_kv_heads, head_size, block_size, num_blocks, cache_dtype and kv_layout.")
      .def(
          "attention_shape",
          [](const PyKvCache& c, const AttentionShape& batch) { return c.cache.attention_shape(batch); },
          py::arg("batch"), "The same for an AttentionShape.")
      .def(
          "mla_cache", [](const py::object& self, uint32_t l) { return mla_pools(self, &KvCache::mla_cache, l); },
          py::arg("layer"), "An MLA cache's layer `layer` device pools (MlaCacheViews).")
      .def(
          "host_mla_cache",
          [](const py::object& self, uint32_t l) { return mla_pools(self, &KvCache::host_mla_cache, l); },
          py::arg("layer"), "An MLA cache's layer `layer` host (swap) pools; refused without them.")
      .def(
          "mla_shape", [](const PyKvCache& c, const AttentionShape& batch) { return c.cache.mla_shape(batch); },
          py::arg("batch"),
          "An MlaShape for this MLA cache: `batch`'s request fields (as attention_shape's) with the cache's "
          "num_kv_heads 1, head_size Dv + R, block_size, num_blocks, cache_dtype, kv_layout 'nhd', value_head_size "
          "Dv and cache_form.");
  bind_ops(cls);
}

}  // namespace vkpaged::python
