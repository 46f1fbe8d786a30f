// SPDX-License-Identifier: Apache-2.0
#include "atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "vkpaged/error.hpp"

namespace vkpaged::cli {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err) {
  throw Error(ErrorCode::io_error, fmt::format("{}: {}: {}", path.string(), what, std::strerror(err)));
}

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& why) {
  throw Error(ErrorCode::io_error, fmt::format("{}: {}", path.string(), why));
}

// What a file that is not a regular file is, for messages.
const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// The regular file the output goes to: `path` itself (existing or not), or the end of the
// symbolic links at `path`. Never opens anything.
std::filesystem::path output_target(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;  // a new file; its directory is checked by creating the temporary
    fail(path, "cannot inspect", errno);
  }
  if (S_ISREG(st.st_mode)) return path;
  if (!S_ISLNK(st.st_mode)) refuse(path, fmt::format("is {}, not a regular file: refused (never opened or replaced)", kind_of(st.st_mode)));
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr), &std::free);
  if (!resolved) {
    const int err = errno;
    if (err == ENOENT) refuse(path, "is a symbolic link that leads to no existing file: refused");
    fail(path, "cannot follow the symbolic link", err);
  }
  const std::filesystem::path target(resolved.get());
  if (::stat(target.c_str(), &st) != 0) fail(path, "cannot inspect the symbolic link's target", errno);
  if (!S_ISREG(st.st_mode))
    refuse(path, fmt::format("is a symbolic link to {} ({}), not to a regular file: refused (never opened or replaced)",
                             kind_of(st.st_mode), target.string()));
  return target;
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
  const auto target = output_target(path);
  const auto temp = temporary_beside(target);
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
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "cannot rename the finished file into place", err);
  }
}

int open_regular_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      refuse(path, "is a symbolic link that leads to no existing file");
    fail(path, "cannot open", err);
  }
  if (!S_ISREG(st.st_mode)) refuse(path, fmt::format("is {}, not a regular .npy file: refused (never opened)", kind_of(st.st_mode)));
  // Swapped for a FIFO since the stat? O_NONBLOCK opens it without waiting, and fstat tells.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot open", errno);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    refuse(path, "is no longer a regular file: refused");
  }
  return fd;
}

}  // namespace vkpaged::cli
