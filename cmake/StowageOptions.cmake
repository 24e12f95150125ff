# stowage_tristate(VAR DOC): a cache option taking AUTO (default: on when found), ON (error when
# missing) or OFF.
function(stowage_tristate var doc)
  set(${var} AUTO CACHE STRING "${doc}: AUTO, ON or OFF")
  set_property(CACHE ${var} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${var}}" value)
  if(value STREQUAL "TRUE" OR value STREQUAL "1" OR value STREQUAL "YES")
    set(value ON)
  elseif(value STREQUAL "FALSE" OR value STREQUAL "0" OR value STREQUAL "NO")
    set(value OFF)
  endif()
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${var} must be AUTO, ON or OFF (got '${${var}}')")
  endif()
  set(${var} ${value} PARENT_SCOPE)
endfunction()

# stowage_warnings(TARGET): the project's warning set.
function(stowage_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()
