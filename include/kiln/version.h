#pragma once
// Versions: of this C++ API (the headers under kiln/), and of the .kiln file format it reads.
// CMake's project version and the Python package's version are read from this file.

#include <cstdint>

/// The API version: a new MAJOR may break callers; a new MINOR adds to the API.
#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 9
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.9.0"
/// The .kiln format version this runtime reads and export writes (the file header's
/// format_version). A file of another version is refused at load with a message that says
/// which side is older.
#define KILN_FORMAT_VERSION 2

namespace kiln {

/// The version of the library linked in ("0.9.0"): compare with KILN_VERSION_STRING to
/// detect headers and library from different releases.
const char* version();
/// The format version the linked library reads (KILN_FORMAT_VERSION when they match).
uint32_t format_version();

}  // namespace kiln
