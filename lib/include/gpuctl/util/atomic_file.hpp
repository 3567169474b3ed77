#pragma once
// Writing a file so that readers (and a crash) see either the old content or the whole new one,
// never a part: backup archives are written this way, so an interrupted `gpuctl backup` leaves
// the previous archive in place instead of a truncated one.
#include <sys/types.h>

#include <string>
#include <string_view>

#include "gpuctl/error.hpp"

namespace gpuctl::util {

// Writes `data` to a new file beside `final_path` (".<name>.tmp-<pid>-<random>", created with
// O_EXCL and mode 0600, so no other user can read it while it is written), syncs it, gives it
// `mode`, renames it over `final_path` and syncs the folder, so the new name survives a crash.
// On any failure, or when util::cancelled() turns true before the rename, the temporary file is
// removed and `final_path` is left as it was. Errors: Errc::io naming the file and the system's
// reason ("cannot write backup.tar.gz: No space left on device"); Errc::cancelled when
// interrupted; Errc::invalid_argument when `final_path` is an existing folder or names none.
Result<void> write_file_atomically(const std::string& final_path, std::string_view data, mode_t mode = 0600);

}  // namespace gpuctl::util
