// The version strings of stowage/runtime/version.h. stowage_version_info.h is written at build time
// by cmake/StowageVersionInfo.cmake (the project version and `git describe`); builds made without
// CMake (scripts/fuzz.sh) have none and report "unknown".
#include "stowage/runtime/version.h"

#if __has_include("stowage_version_info.h")
#include "stowage_version_info.h"
#else
#define STOWAGE_VERSION_NUMBER "unknown"
#define STOWAGE_GIT_DESCRIBE ""
#define STOWAGE_VERSION_FULL "unknown"
#endif

extern "C" {

const char* stowage_version(void) { return STOWAGE_VERSION_NUMBER; }

const char* stowage_git_describe(void) { return STOWAGE_GIT_DESCRIBE; }

const char* stowage_version_string(void) { return STOWAGE_VERSION_FULL; }

}  // extern "C"
