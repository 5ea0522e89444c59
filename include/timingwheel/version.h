/* SPDX-License-Identifier: MIT */
/**
 * @file
 * The library's version, at compile time (the macros) and at run time
 * (the functions: the version of the library actually loaded, which may
 * be newer than the headers a program was built with). Every public header
 * includes this one.
 */
#ifndef TIMINGWHEEL_VERSION_H
#define TIMINGWHEEL_VERSION_H

#define TW_VERSION_MAJOR 0          /**< incompatible API changes */
#define TW_VERSION_MINOR 1          /**< compatible additions */
#define TW_VERSION_PATCH 0          /**< fixes */
#define TW_VERSION_STRING "0.1.0"   /**< the three, as a string */
/** The three in one number, (major << 16) | (minor << 8) | patch, as
 *  uv_version() packs them. */
#define TW_VERSION_HEX ((TW_VERSION_MAJOR << 16) | (TW_VERSION_MINOR << 8) | \
			TW_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility push(default)
#endif

/**
 * The version of the library loaded at run time.
 * @return (major << 16) | (minor << 8) | patch, as TW_VERSION_HEX
 * @par Thread safety
 *      Any thread.
 */
unsigned tw_version(void);

/**
 * The version of the library loaded at run time, as a string.
 * @return "major.minor.patch", a constant string, never NULL
 * @par Thread safety
 *      Any thread.
 */
const char *tw_version_string(void);

#if defined(__GNUC__) && !defined(TW_NO_VISIBILITY)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif
