# SPDX-License-Identifier: Apache-2.0
"""Builds vkpaged._core with CMake (python/CMakeLists.txt); the metadata is in pyproject.toml.

Environment:
  VKPAGED_PREFIX       an installed vkpaged (cmake --install) whose static library to link,
                       instead of compiling the checkout's sources again
  VKPAGED_CMAKE_ARGS   more arguments for the CMake configure step (split as a shell would)
  CMAKE_CXX_COMPILER_LAUNCHER=ccache, CMAKE_BUILD_PARALLEL_LEVEL=N: read by CMake itself
"""
import os
import shlex
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        out_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build_dir = Path(self.build_temp).resolve() / "cmake"
        args = [
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ]
        try:  # pybind11's Python package knows where its CMake files are (Debian's: python3-pybind11)
            import pybind11
            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:  # pybind11-dev's, found by CMake's own search
            pass
        prefix = os.environ.get("VKPAGED_PREFIX")
        if prefix:
            # -U: a build folder's cache keeps the vkpaged_DIR an earlier prefix gave, which
            # find_package would take over this one.
            args += ["-DVKPAGED_PYTHON_USE_INSTALLED=ON", f"-DCMAKE_PREFIX_PATH={Path(prefix).resolve()}", "-Uvkpaged_DIR"]
        else:  # said every time: the build folder's cache keeps what an earlier build chose
            args += ["-DVKPAGED_PYTHON_USE_INSTALLED=OFF"]
        args += shlex.split(os.environ.get("VKPAGED_CMAKE_ARGS", ""))
        subprocess.run(["cmake", "-S", str(HERE), "-B", str(build_dir), *args], check=True)
        build = ["cmake", "--build", str(build_dir), "--target", "_core"]
        if self.parallel and "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            build += ["-j", str(self.parallel)]
        subprocess.run(build, check=True)


setup(ext_modules=[CMakeExtension("vkpaged._core")], cmdclass={"build_ext": CMakeBuild})
