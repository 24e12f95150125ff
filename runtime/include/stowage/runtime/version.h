/* Stowage's version, for C and C++: the CMake project version (project(Stowage VERSION ...) in the
 * top-level CMakeLists.txt, the one version source) and `git describe` of the source tree the
 * library was built from. Every tool prints stowage_version_string() for --version.
 *
 * The strings have static storage (never freed, never NULL); the functions take no lock and keep no
 * state, so any thread may call them at any time. */
#ifndef STOWAGE_RUNTIME_VERSION_H_
#define STOWAGE_RUNTIME_VERSION_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The project version, "MAJOR.MINOR.PATCH" ("0.1.0"): the pkg-config and CMake package version and
 * the shared libraries' VERSION; "unknown" in builds made without CMake (the fuzz targets). */
const char* stowage_version(void);

/* `git describe --tags --always` of the source tree at build time, "-dirty" appended when tracked
 * files had uncommitted changes ("v0.1.0-12-g42edc15", or "42edc15-dirty" without tags); "" when the
 * sources were not a git checkout or git was not found. */
const char* stowage_git_describe(void);

/* stowage_version() followed by " (" stowage_git_describe() ")" when that is not empty:
 * "0.1.0 (42edc15-dirty)". */
const char* stowage_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* STOWAGE_RUNTIME_VERSION_H_ */
