# SPDX-License-Identifier: Apache-2.0
"""The library's errors as Python exceptions: one class per vkpaged::ErrorCode, all deriving
from vkpaged.Error. The message is the library's, one line naming the argument and the value."""
import enum


class ErrorCode(enum.IntEnum):
    """vkpaged::ErrorCode, with the C++ names and values."""
    invalid_argument = 1  # a shape, dtype, index or size that the contract refuses
    unsupported = 2       # valid by the contract but not available on this device or build
    out_of_memory = 3     # a device or host allocation failed or would not fit; no free block
    device_error = 4      # a Vulkan call failed (device lost, driver error, a wait that timed out)
    io_error = 5          # a file could not be read or written
    internal = 6          # a bug in vkpaged


class Error(Exception):
    """A vkpaged::Error. `code` is its ErrorCode, `message` the library's message."""
    code = ErrorCode.internal

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(Error, ValueError):
    """ErrorCode.invalid_argument: refused before anything was recorded, allocated or written.
    Also a ValueError."""
    code = ErrorCode.invalid_argument


class UnsupportedError(Error):
    """ErrorCode.unsupported: valid by the contract, not on this device or build."""
    code = ErrorCode.unsupported


class OutOfMemoryError(Error):
    """ErrorCode.out_of_memory: an allocation failed or would not fit; the block manager ran out
    of blocks."""
    code = ErrorCode.out_of_memory


class DeviceError(Error):
    """ErrorCode.device_error: a Vulkan call failed, the device was lost, or a wait gave up after
    the Context's fence_timeout_ms."""
    code = ErrorCode.device_error


class IoError(Error):
    """ErrorCode.io_error: a file could not be read or written."""
    code = ErrorCode.io_error


class InternalError(Error):
    """ErrorCode.internal: a bug in vkpaged."""
    code = ErrorCode.internal


_BY_CODE = {cls.code: cls for cls in (InvalidArgumentError, UnsupportedError, OutOfMemoryError, DeviceError,
                                      IoError, InternalError)}


def error_class(code):
    """The exception class of an ErrorCode value (the bindings raise through this)."""
    return _BY_CODE.get(code, InternalError)
