// SPDX-License-Identifier: Apache-2.0
#include "host_array.hpp"

#include <dlpack/dlpack.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "names.hpp"

namespace vkpaged::python {

namespace {

// The element types an array may hold, before the dtype it stands for is decided.
enum class Elem { f32, f16, bf16, i32, u32, i64, u8, u16, other };

struct DlDeleter {
  void operator()(DLManagedTensor* t) const {
    if (t->deleter) t->deleter(t);
  }
};

// An array borrowed for the length of one call: its bytes, C-contiguous.
struct Borrowed {
  const std::byte* data = nullptr;
  Elem elem = Elem::other;
  std::string type_name;  // numpy's name, or DLPack's code and bits, for messages
  std::vector<int64_t> shape;
  py::object keep;  // the numpy array
  std::unique_ptr<DLManagedTensor, DlDeleter> dl;

  size_t numel() const {
    size_t n = 1;
    for (const int64_t d : shape) n *= size_t(d);
    return n;
  }
};

std::string arg(std::string_view argument) { return std::string(argument); }

Elem numpy_elem(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return Elem::f32;
  if (kind == 'f' && size == 2) return Elem::f16;
  if (kind == 'i' && size == 4) return Elem::i32;
  if (kind == 'i' && size == 8) return Elem::i64;
  if (kind == 'u' && size == 4) return Elem::u32;
  if (kind == 'u' && size == 2) return Elem::u16;
  if ((kind == 'u' || kind == 'b') && size == 1) return Elem::u8;  // bool: bytes of 0 and 1 (tree masks)
  return Elem::other;
}

Elem dlpack_elem(const DLDataType& t) {
  if (t.lanes != 1) return Elem::other;
  if (t.code == kDLFloat && t.bits == 32) return Elem::f32;
  if (t.code == kDLFloat && t.bits == 16) return Elem::f16;
  if (t.code == kDLBfloat && t.bits == 16) return Elem::bf16;
  if (t.code == kDLInt && t.bits == 32) return Elem::i32;
  if (t.code == kDLInt && t.bits == 64) return Elem::i64;
  if (t.code == kDLUInt && t.bits == 32) return Elem::u32;
  if (t.code == kDLUInt && t.bits == 16) return Elem::u16;
  if (t.code == kDLUInt && t.bits == 8) return Elem::u8;
  return Elem::other;
}

Borrowed borrow_numpy(const py::handle& object, std::string_view argument) {
  const py::module_ np = py::module_::import("numpy");
  Borrowed b;
  const py::array array = np.attr("ascontiguousarray")(object);  // a copy only where the strides need one
  const py::dtype dt = array.dtype();
  if (dt.attr("byteorder").cast<std::string>() == ">")
    refuse(arg(argument) + ": a big-endian array; give one in native byte order (.astype(dtype.newbyteorder('=')))");
  b.elem = numpy_elem(dt);
  b.type_name = py::str(static_cast<const py::handle&>(dt)).cast<std::string>();
  for (py::ssize_t i = 0; i < array.ndim(); ++i) b.shape.push_back(int64_t(array.shape(i)));
  b.data = static_cast<const std::byte*>(array.data());
  b.keep = array;
  return b;
}

Borrowed borrow_dlpack(const py::handle& object, std::string_view argument) {
  // The device first: asking a GPU tensor for its capsule may synchronise its streams for nothing.
  if (py::hasattr(object, "__dlpack_device__")) {
    const py::tuple device = object.attr("__dlpack_device__")();
    const int type = device[0].cast<int>();
    if (type != kDLCPU)
      refuse(arg(argument) + ": a DLPack tensor on device type " + std::to_string(type) +
             ", not the CPU (1); the host path takes host arrays, device data goes through DeviceBuffer");
  }
  const py::object capsule = object.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) throw py::error_already_set();
  // Ours from here: renamed so that the capsule's destructor leaves it to us (the DLPack protocol).
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  Borrowed b;
  b.dl.reset(managed);
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    refuse(arg(argument) + ": a DLPack tensor on device type " + std::to_string(int(t.device.device_type)) +
           ", not the CPU (1)");
  b.elem = dlpack_elem(t.dtype);
  b.type_name = "DLPack code " + std::to_string(int(t.dtype.code)) + " bits " + std::to_string(int(t.dtype.bits)) +
                " lanes " + std::to_string(int(t.dtype.lanes));
  b.shape.assign(t.shape, t.shape + t.ndim);
  if (t.strides) {  // only C order: the operators take row-major arrays, copying is the caller's choice
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected)
        refuse(arg(argument) + ": a DLPack tensor that is not C-contiguous; make it so first (.contiguous())");
      expected *= t.shape[i];
    }
  }
  b.data = static_cast<const std::byte*>(t.data) + t.byte_offset;
  return b;
}

Borrowed borrow(const py::handle& object, std::string_view argument) {
  if (object.is_none()) refuse(arg(argument) + ": None where an array is needed");
  const py::module_ np = py::module_::import("numpy");
  if (!py::isinstance(object, np.attr("ndarray")) && py::hasattr(object, "__dlpack__"))
    return borrow_dlpack(object, argument);
  return borrow_numpy(object, argument);  // numpy arrays, and lists or scalars through asarray
}

std::optional<DType> natural_dtype(Elem e) {
  switch (e) {
    case Elem::f32:
      return DType::f32;
    case Elem::f16:
      return DType::f16;
    case Elem::bf16:
      return DType::bf16;
    case Elem::i32:
      return DType::i32;
    case Elem::u32:
      return DType::u32;
    case Elem::i64:
      return DType::i64;
    case Elem::u8:
      return DType::u8;
    case Elem::u16:
    case Elem::other:
      return std::nullopt;
  }
  return std::nullopt;
}

// The dtype `b` stands for: the one asked for where its elements can hold it, else its own.
DType resolve(const Borrowed& b, std::string_view argument, std::optional<DType> want) {
  if (want) {
    const bool ok = *want == DType::bf16  ? (b.elem == Elem::u16 || b.elem == Elem::bf16)
                    : is_fp8_dtype(*want) ? b.elem == Elem::u8
                                          : natural_dtype(b.elem) == want;
    if (!ok)
      refuse(arg(argument) + ": an array of " + b.type_name + " where dtype " + name_of(*want) +
             " was asked for (bf16 arrays are uint16 of raw bits, fp8 arrays uint8 of raw bytes)");
    return *want;
  }
  if (b.elem == Elem::u16)
    refuse(arg(argument) +
           ": a uint16 array: say dtype 'bf16' (numpy has no bfloat16; bf16 arrays are uint16 holding "
           "the raw bits)");
  if (const auto d = natural_dtype(b.elem)) return *d;
  refuse(arg(argument) + ": " + b.type_name +
         " is not an element type vkpaged takes (float32, float16, bfloat16 as uint16, uint8, int32, uint32, int64)");
}

Shape shape_of(const std::vector<int64_t>& dims, std::string_view argument) {
  if (dims.size() > size_t(kMaxRank))
    refuse(arg(argument) + ": rank " + std::to_string(dims.size()) + " is above " + std::to_string(kMaxRank));
  return Shape(dims);
}

const char* numpy_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "float32";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "uint16";
    case DType::fp8_e4m3:
    case DType::fp8_e5m2:
    case DType::u8:
      return "uint8";
    case DType::i32:
      return "int32";
    case DType::u32:
      return "uint32";
    case DType::i64:
      return "int64";
  }
  return "uint8";
}

template <typename T>
std::vector<T> to_int_vector(const py::handle& object, std::string_view argument) {
  const Borrowed b = borrow(object, argument);
  if (b.shape.size() != 1)
    refuse(arg(argument) + ": a 1-D sequence of integers is needed, not rank " + std::to_string(b.shape.size()));
  std::vector<T> out(b.numel());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v = 0;
    switch (b.elem) {
      case Elem::i32:
        v = reinterpret_cast<const int32_t*>(b.data)[i];
        break;
      case Elem::u32:
        v = reinterpret_cast<const uint32_t*>(b.data)[i];
        break;
      case Elem::i64:
        v = reinterpret_cast<const int64_t*>(b.data)[i];
        break;
      case Elem::u16:
        v = reinterpret_cast<const uint16_t*>(b.data)[i];
        break;
      case Elem::u8:
        v = reinterpret_cast<const uint8_t*>(b.data)[i];
        break;
      default:
        refuse(arg(argument) + ": " + b.type_name + " is not an integer type");
    }
    if (v < int64_t(std::numeric_limits<T>::min()) || v > int64_t(std::numeric_limits<T>::max()))
      refuse(arg(argument) + "[" + std::to_string(i) + "]: " + std::to_string(v) + " does not fit " +
             (sizeof(T) == 4 ? "int32" : "int64"));
    out[i] = T(v);
  }
  return out;
}

}  // namespace

HostTensor to_host_tensor(const py::handle& object, std::string_view argument, std::optional<DType> dtype) {
  const Borrowed b = borrow(object, argument);
  HostTensor t(resolve(b, argument, dtype), shape_of(b.shape, argument));
  if (t.bytes() > 0) std::memcpy(t.data(), b.data, t.bytes());
  return t;
}

HostTensor to_host_tensor_u16_as(const py::handle& object, std::string_view argument, std::optional<DType> u16_dtype) {
  const Borrowed b = borrow(object, argument);
  HostTensor t(resolve(b, argument, b.elem == Elem::u16 ? u16_dtype : std::nullopt), shape_of(b.shape, argument));
  if (t.bytes() > 0) std::memcpy(t.data(), b.data, t.bytes());
  return t;
}

HostTensor to_optional_host_tensor(const py::handle& object, std::string_view argument, std::optional<DType> dtype) {
  return object.is_none() ? HostTensor{} : to_host_tensor(object, argument, dtype);
}

HostBytes to_host_bytes(const py::handle& object, std::string_view argument, std::optional<DType> dtype) {
  const Borrowed b = borrow(object, argument);
  HostBytes out;
  out.dtype = resolve(b, argument, dtype);
  out.shape = b.shape;
  out.bytes.assign(b.data, b.data + b.numel() * dtype_size(out.dtype));
  return out;
}

std::vector<int32_t> to_int32_vector(const py::handle& object, std::string_view argument) {
  return to_int_vector<int32_t>(object, argument);
}

std::vector<int64_t> to_int64_vector(const py::handle& object, std::string_view argument) {
  return to_int_vector<int64_t>(object, argument);
}

py::array to_numpy(DType dtype, const std::vector<int64_t>& shape, const void* data) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array out(py::dtype(numpy_name(dtype)), dims);
  const size_t bytes = size_t(out.nbytes());
  if (bytes > 0) std::memcpy(out.mutable_data(), data, bytes);
  return out;
}

py::array to_numpy(const HostTensor& tensor) { return to_numpy(tensor.dtype(), tensor.shape().dims(), tensor.data()); }

py::object to_optional_numpy(const HostTensor& tensor) {
  if (tensor.empty()) return py::none();
  return to_numpy(tensor);
}

}  // namespace vkpaged::python
