# Installation of the runtime and the planner as libraries (included last by the top-level
# CMakeLists.txt, once every target exists). `cmake --install build --prefix P` installs, besides the
# tools and the registry:
#   lib/libstowage-runtime.so.X.Y.Z (SONAME libstowage-runtime.so.<soversion>) and libstowage-runtime.a:
#       every static library of runtime/ in one (GGUF, tokenizer, sampler, CPU/oneDNN/CUDA backends as
#       built, executor, plan loader, C API, version);
#   lib/libstowage-planner.so.X.Y.Z and libstowage-planner.a: every static library of planner/, on top
#       of the runtime's;
#   include/stowage/runtime/*.h, include/stowage/planner/*.h: the public headers (they include only
#       each other and the standard library);
#   lib/pkgconfig/stowage.pc, stowage-planner.pc;
#   lib/cmake/Stowage/: find_package(Stowage) with Stowage::runtime, Stowage::planner (shared) and
#       Stowage::runtime_static, Stowage::planner_static.
# The combined libraries are made from the object files the project's static libraries already
# compiled (they are position independent), so nothing is compiled twice and the build's own
# targets (tools, tests, sanitizer and fuzz builds) link as before. test/install checks the result.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
# The CPU backend's folder found OpenMP; its imported target is visible there only.
find_package(OpenMP REQUIRED COMPONENTS CXX)

# While the major version is 0 every minor version may break the ABI: the SONAME carries both.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(STOWAGE_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(STOWAGE_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

# stowage_link_closure(<libs-var> <deps-var> SEEDS...): the project's static libraries that SEEDS
# are or link, transitively, into <libs-var>, and what they link from outside the project (imported
# targets with something to link, library files, -l names) into <deps-var>. Header-only imported
# targets (nlohmann_json) are left out: the objects were compiled already.
function(stowage_link_closure libs_var deps_var)
  set(todo ${ARGN})
  set(seen)
  set(libs)
  set(deps)
  while(todo)
    list(POP_FRONT todo t)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" t "${t}")
    if(t IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${t})
    if(NOT TARGET ${t})
      list(APPEND deps ${t})  # a library file or name (xxhash, dl)
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    get_target_property(imported ${t} IMPORTED)
    if(imported)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        list(APPEND deps ${t})
      else()
        get_target_property(ilink ${t} INTERFACE_LINK_LIBRARIES)
        if(ilink)
          list(APPEND deps ${t})
        endif()
      endif()
      continue()
    endif()
    if(type STREQUAL "STATIC_LIBRARY")
      list(APPEND libs ${t})
      get_target_property(link ${t} LINK_LIBRARIES)
      if(link)
        list(APPEND todo ${link})
      endif()
    endif()
    get_target_property(ilink ${t} INTERFACE_LINK_LIBRARIES)
    if(ilink)
      list(APPEND todo ${ilink})
    endif()
  endwhile()
  set(${libs_var} ${libs} PARENT_SCOPE)
  set(${deps_var} ${deps} PARENT_SCOPE)
endfunction()

# The runtime: the session and C API, the tokenizer and sampler, device probing, the row-split
# rules, the version; the planner: its one entry point, the probed-device manifests and its C API.
stowage_link_closure(stowage_runtime_parts stowage_runtime_deps
  stowage_runtime stowage_tokenizer stowage_devices stowage_row_split stowage_version)
stowage_link_closure(stowage_planner_parts stowage_planner_deps stowage_plan stowage_manifest_probe
  stowage_planner_c_api)
list(REMOVE_ITEM stowage_planner_parts ${stowage_runtime_parts})
list(REMOVE_ITEM stowage_planner_deps ${stowage_runtime_deps})

# stowage_combined_library(NAME PARTS DEPS BASE): NAME_shared (lib<output>.so, versioned) and
# NAME_static (lib<output>.a) from the objects of PARTS; DEPS linked privately; BASE (a combined
# library of the same kind, the planner's runtime) publicly.
function(stowage_combined_library name output parts deps base)
  set(objects)
  foreach(p IN LISTS parts)
    list(APPEND objects $<TARGET_OBJECTS:${p}>)
  endforeach()
  foreach(kind shared static)
    string(TOUPPER ${kind} KIND)
    set(t ${name}_${kind})
    add_library(${t} ${KIND} ${objects})
    set_target_properties(${t} PROPERTIES OUTPUT_NAME ${output} LINKER_LANGUAGE CXX)
    target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${t} PRIVATE ${deps})
    if(base)
      target_link_libraries(${t} PUBLIC ${base}_${kind})
    endif()
    if(kind STREQUAL "shared")
      # Every symbol the objects use is defined here or in DEPS: a part missing from the closure
      # fails the link instead of the consumer's.
      set_target_properties(${t} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${STOWAGE_SOVERSION}
        EXPORT_NAME ${name})
      target_link_options(${t} PRIVATE -Wl,--no-undefined)
    else()
      set_target_properties(${t} PROPERTIES EXPORT_NAME ${name}_static)
    endif()
  endforeach()
endfunction()

stowage_combined_library(runtime stowage-runtime "${stowage_runtime_parts}" "${stowage_runtime_deps}" "")
stowage_combined_library(planner stowage-planner "${stowage_planner_parts}" "${stowage_planner_deps}" runtime)

# The planner's shared library finds the runtime's next to it; the installed tools keep the folders
# of the shared libraries they link from outside the system's (stowage-opt: libMLIR in
# /usr/lib/llvm-19/lib), which a plain install would strip with the build tree's RPATH.
set_target_properties(planner_shared PROPERTIES INSTALL_RPATH "$ORIGIN")
get_property(stowage_tool_dirs DIRECTORY ${PROJECT_SOURCE_DIR}/tools PROPERTY SUBDIRECTORIES)
foreach(dir IN LISTS stowage_tool_dirs)
  get_property(dir_targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS dir_targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      set_target_properties(${t} PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
    endif()
  endforeach()
endforeach()

install(TARGETS runtime_shared runtime_static planner_shared planner_static EXPORT StowageTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/stowage ${PROJECT_SOURCE_DIR}/planner/include/stowage
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# --- CMake package -------------------------------------------------------------------------------
# The static targets link the libraries the parts link (OpenMP, flatbuffers, xxhash, oneDNN, CUDA):
# StowageConfig.cmake finds the packages behind those imported targets first.
set(STOWAGE_FIND_DEPENDENCIES "")
foreach(dep IN LISTS stowage_runtime_deps stowage_planner_deps)
  if(dep MATCHES "^OpenMP::")
    string(APPEND STOWAGE_FIND_DEPENDENCIES "find_package(OpenMP QUIET COMPONENTS CXX)\n")
  elseif(dep MATCHES "^flatbuffers::")
    string(APPEND STOWAGE_FIND_DEPENDENCIES "find_package(FlatBuffers QUIET CONFIG)\n")
  elseif(dep MATCHES "^DNNL::")
    string(APPEND STOWAGE_FIND_DEPENDENCIES "find_package(dnnl QUIET CONFIG)\n")
  elseif(dep MATCHES "^CUDA::")
    string(APPEND STOWAGE_FIND_DEPENDENCIES "find_package(CUDAToolkit QUIET)\n")
  elseif(dep MATCHES "^Threads::")
    string(APPEND STOWAGE_FIND_DEPENDENCIES "find_package(Threads QUIET)\n")
  elseif(dep MATCHES "::")
    message(FATAL_ERROR "StowageInstall.cmake: the installed libraries link ${dep}: say which package provides it")
  endif()
endforeach()
string(REPLACE "\n" ";" deps_lines "${STOWAGE_FIND_DEPENDENCIES}")
list(REMOVE_DUPLICATES deps_lines)
list(JOIN deps_lines "\n" STOWAGE_FIND_DEPENDENCIES)

set(STOWAGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Stowage)
install(EXPORT StowageTargets NAMESPACE Stowage:: DESTINATION ${STOWAGE_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/install/StowageConfig.cmake.in
  ${CMAKE_BINARY_DIR}/install/StowageConfig.cmake INSTALL_DESTINATION ${STOWAGE_CMAKE_DIR})
# Same minor version while the major is 0 (as the SONAME), same major after.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(compat SameMinorVersion)
else()
  set(compat SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/StowageConfigVersion.cmake
  COMPATIBILITY ${compat})
install(FILES ${CMAKE_BINARY_DIR}/install/StowageConfig.cmake ${CMAKE_BINARY_DIR}/install/StowageConfigVersion.cmake
  DESTINATION ${STOWAGE_CMAKE_DIR})

# --- pkg-config ----------------------------------------------------------------------------------
# stowage_pc_libs(<out-var> DEPS...): DEPS as linker flags for Libs.private (a static link; a shared
# link needs none of them). Packages with a .pc of their own go to Requires.private instead.
function(stowage_pc_libs out_var requires_var)
  set(flags)
  set(requires)
  foreach(dep IN LISTS ARGN)
    if(dep MATCHES "^OpenMP::")
      foreach(l IN LISTS OpenMP_CXX_LIB_NAMES)
        list(APPEND flags -l${l})
      endforeach()
    elseif(dep MATCHES "^flatbuffers::")
      list(APPEND requires flatbuffers)
    elseif(dep MATCHES "xxhash")
      list(APPEND requires libxxhash)
    elseif(TARGET ${dep})
      # DNNL::dnnl, CUDA::cudart, Threads::Threads: the library file's folder and name.
      get_target_property(loc ${dep} IMPORTED_LOCATION)
      if(NOT loc)
        get_target_property(configs ${dep} IMPORTED_CONFIGURATIONS)
        list(GET configs 0 config)
        get_target_property(loc ${dep} IMPORTED_LOCATION_${config})
      endif()
      if(loc)
        get_filename_component(dir ${loc} DIRECTORY)
        get_filename_component(file ${loc} NAME)
        string(REGEX REPLACE "^lib([^.]*)\\..*$" "\\1" lname ${file})
        list(APPEND flags -L${dir} -l${lname})
      endif()
      get_target_property(ilink ${dep} INTERFACE_LINK_LIBRARIES)
      if(ilink)
        foreach(l IN LISTS ilink)
          if(NOT TARGET ${l} AND NOT l MATCHES "^\\$<")
            list(APPEND flags -l${l})
          endif()
        endforeach()
      endif()
    elseif(dep MATCHES "^-")
      list(APPEND flags ${dep})
    else()
      list(APPEND flags -l${dep})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES flags)
  list(REMOVE_DUPLICATES requires)
  list(JOIN flags " " flags)
  list(JOIN requires ", " requires)
  set(${out_var} "${flags}" PARENT_SCOPE)
  set(${requires_var} "${requires}" PARENT_SCOPE)
endfunction()

file(RELATIVE_PATH STOWAGE_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" STOWAGE_PC_TO_PREFIX "${STOWAGE_PC_TO_PREFIX}")
set(STOWAGE_PC_BACKENDS "")
if(TARGET stowage_onednn)
  string(APPEND STOWAGE_PC_BACKENDS ", oneDNN")
endif()
if(TARGET stowage_cuda)
  string(APPEND STOWAGE_PC_BACKENDS ", CUDA")
endif()
stowage_pc_libs(STOWAGE_PC_RUNTIME_LIBS STOWAGE_PC_RUNTIME_REQUIRES ${stowage_runtime_deps})
stowage_pc_libs(STOWAGE_PC_PLANNER_LIBS STOWAGE_PC_PLANNER_REQUIRES ${stowage_planner_deps})
configure_file(${CMAKE_CURRENT_LIST_DIR}/install/stowage.pc.in ${CMAKE_BINARY_DIR}/install/stowage.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/install/stowage-planner.pc.in
  ${CMAKE_BINARY_DIR}/install/stowage-planner.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/stowage.pc ${CMAKE_BINARY_DIR}/install/stowage-planner.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
