#include "atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
  throw Error(ErrorCode::io_error, fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

// Unique within the process (counter) and across processes (pid): concurrent writers of the
// same output never share a temporary file.
std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  const std::string name = fmt::format(".{}.tmp-{}-{}", path.filename().string(), ::getpid(), counter++);
  return path.parent_path() / name;
}

void write_all(int fd, std::span<const std::byte> bytes, const std::filesystem::path& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot write", errno);
    }
    bytes = bytes.subspan(size_t(n));
  }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const std::byte>> chunks) {
  if (path.empty()) throw Error(ErrorCode::io_error, "output path is empty");
  const auto temp = temporary_beside(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(path, "cannot create a file in its directory", errno);
  bool closed = false;
  try {
    for (const auto& chunk : chunks) write_all(fd, chunk, path);
    if (::fsync(fd) != 0) fail(path, "cannot flush", errno);
    closed = true;  // close() releases the descriptor even when it reports an error
    if (::close(fd) != 0) fail(path, "cannot close", errno);
  } catch (...) {
    if (!closed) ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "cannot rename the finished file into place", err);
  }
}

}  // namespace vkpaged::cli
