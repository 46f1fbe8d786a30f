#pragma once
// Writing a file so that it appears whole or not at all.
#include <filesystem>
#include <span>

namespace vkpaged::cli {

// Writes the chunks, in order, to a temporary file in the directory of `path`, flushes it to
// disk and renames it to `path`. On any failure the temporary file is removed and a
// vkpaged::Error(io_error) naming `path` is thrown; an existing file at `path` is untouched.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const std::byte>> chunks);

}  // namespace vkpaged::cli
