#pragma once
// SHA-256 (FIPS 180-4) of bytes in memory, for the checksums of backup archives. Written here
// rather than taken from libcrypto: linking it would load libcrypto on every gpuctl start, and
// only backup and restore need a digest.
#include <string>
#include <string_view>

namespace gpuctl::util {

// The digest of `data` as 64 lower-case hex digits, as sha256sum prints it.
std::string sha256_hex(std::string_view data);

}  // namespace gpuctl::util
