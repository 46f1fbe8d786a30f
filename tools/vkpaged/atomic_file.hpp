// SPDX-License-Identifier: Apache-2.0
#pragma once
// The files the CLI reads and writes: regular files only, never a device, FIFO, socket or
// directory (a FIFO without a writer or reader would block the open; a device may be endless
// or have side effects), and outputs that appear whole or not at all.
#include <filesystem>
#include <span>

namespace vkpaged::cli {

// Writes the chunks, in order, to a temporary file and renames it onto the output, after
// flushing it to disk. The output is `path`, or where a symbolic link at `path` leads (a chain
// of them included): then that regular file is replaced and the link stays a link. Refused
// with vkpaged::Error(io_error) naming `path`, before anything is created or opened:
// a path that is (or whose link leads to) a directory, device, FIFO or socket, and a link to
// nothing. The temporary file lives in the output's directory, so the rename is atomic; on any
// failure it is removed and vkpaged::Error(io_error) naming `path` is thrown, and an existing
// file at the output is untouched.
void write_file_atomically(const std::filesystem::path& path, std::span<const std::span<const std::byte>> chunks);

// Opens a regular file (a symbolic link to one is fine) for reading and returns the
// descriptor. Anything else is refused with vkpaged::Error(io_error) naming `path` and what
// it is, without waiting: the type is checked before the open, which does not block
// (O_NONBLOCK), and again on the descriptor. A missing or unreadable file is Error(io_error)
// too.
int open_regular_file(const std::filesystem::path& path);

}  // namespace vkpaged::cli
