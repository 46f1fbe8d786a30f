# SPDX-License-Identifier: Apache-2.0
# The GLSL compilers: glslc for every shader, as always (their SPIR-V must not change: NVIDIA's
# driver compiles the matrix kernel differently after small changes), and for shaders/*_khr.comp
# (GL_KHR_cooperative_matrix, which Debian 12's glslang 11.13 refuses) the first compiler that
# compiles cmake/probes/khr_cooperative_matrix.comp: VKPAGED_GLSLANG_KHR when set, else glslc,
# glslangValidator from PATH, then glslang built by scripts/khr-compiler.sh in
# ${XDG_CACHE_HOME:-~/.cache}/vkpaged/glslang-<version>/bin (newest first).
#
# VKPAGED_KHR_SHADERS: AUTO builds the KHR shaders when such a compiler exists and leaves them out
# otherwise (the library then reports the KHR matrix kernels unsupported); ON requires them
# (scripts/build.sh, hence CI); OFF leaves them out.
find_program(GLSLC glslc REQUIRED)

set(VKPAGED_KHR_SHADERS AUTO CACHE STRING "Compile shaders/*_khr.comp (GL_KHR_cooperative_matrix): AUTO, ON or OFF")
set_property(CACHE VKPAGED_KHR_SHADERS PROPERTY STRINGS AUTO ON OFF)
set(VKPAGED_GLSLANG_KHR "" CACHE FILEPATH
    "glslc or glslangValidator that knows GL_KHR_cooperative_matrix (empty: found automatically)")

set(_vkpaged_khr_probe ${CMAKE_CURRENT_LIST_DIR}/probes/khr_cooperative_matrix.comp)

# The command line that compiles a shader with `compiler` into a C initializer list of words,
# which cmake/EmbedShaders.cmake includes. glslangValidator built without its optimizer gets no -O.
function(vkpaged_shader_command out_var compiler)
  get_filename_component(name ${compiler} NAME)
  if(name MATCHES "glslc")
    set(${out_var} ${compiler} --target-env=vulkan1.2 -O -mfmt=num PARENT_SCOPE)
  else()
    set(${out_var} ${compiler} -V --target-env vulkan1.2 --quiet -x PARENT_SCOPE)
  endif()
endfunction()

function(_vkpaged_knows_khr compiler out_var)
  set(${out_var} FALSE PARENT_SCOPE)
  if(NOT EXISTS "${compiler}")
    return()
  endif()
  vkpaged_shader_command(command ${compiler})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/khr_cooperative_matrix_probe.inc)
  execute_process(COMMAND ${command} -o ${out} ${_vkpaged_khr_probe}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0 AND EXISTS ${out})
    file(READ ${out} words LIMIT 64)
    if(words MATCHES "(0x07230203|119734787)")  # the SPIR-V magic number, in hex or decimal
      set(${out_var} TRUE PARENT_SCOPE)
    endif()
  endif()
  file(REMOVE ${out})
endfunction()

set(VKPAGED_KHR_COMPILER "")
if(NOT VKPAGED_KHR_SHADERS STREQUAL "OFF")
  if(VKPAGED_GLSLANG_KHR)
    _vkpaged_knows_khr(${VKPAGED_GLSLANG_KHR} knows)
    if(NOT knows)
      message(FATAL_ERROR "VKPAGED_GLSLANG_KHR=${VKPAGED_GLSLANG_KHR} does not compile ${_vkpaged_khr_probe}")
    endif()
    set(VKPAGED_KHR_COMPILER ${VKPAGED_GLSLANG_KHR})
  else()
    find_program(_vkpaged_glslang glslangValidator NO_CACHE)
    if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
      set(cache_root "$ENV{XDG_CACHE_HOME}/vkpaged")
    else()
      set(cache_root "$ENV{HOME}/.cache/vkpaged")
    endif()
    file(GLOB cached LIST_DIRECTORIES false "${cache_root}/glslang-*/bin/glslangValidator")
    list(SORT cached COMPARE NATURAL ORDER DESCENDING)
    foreach(candidate ${GLSLC} ${_vkpaged_glslang} ${cached})
      _vkpaged_knows_khr(${candidate} knows)
      if(knows)
        set(VKPAGED_KHR_COMPILER ${candidate})
        break()
      endif()
    endforeach()
  endif()
  if(VKPAGED_KHR_COMPILER)
    message(STATUS "GL_KHR_cooperative_matrix shaders: ${VKPAGED_KHR_COMPILER}")
  elseif(VKPAGED_KHR_SHADERS STREQUAL "ON")
    message(FATAL_ERROR "VKPAGED_KHR_SHADERS=ON, but no GLSL compiler here knows GL_KHR_cooperative_matrix "
                        "(glslc ${GLSLC} does not; nor does any glslangValidator on PATH or under ${cache_root}). "
                        "scripts/install-deps.sh builds one (scripts/khr-compiler.sh ensure), or point "
                        "VKPAGED_GLSLANG_KHR at glslang 13 or newer, or configure with -DVKPAGED_KHR_SHADERS=OFF.")
  else()
    message(WARNING "No GLSL compiler here knows GL_KHR_cooperative_matrix: the KHR matrix kernels are left out "
                    "and reported unsupported at run time. scripts/khr-compiler.sh ensure builds one.")
  endif()
endif()

# The probe logic of scripts/khr-compiler.sh, tested with stand-in compilers (no network).
if(VKPAGED_BUILD_TESTS)
  add_test(NAME KhrCompilerScript
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/scripts/test-khr-compiler.sh "${GLSLC}" "${VKPAGED_KHR_COMPILER}")
endif()
