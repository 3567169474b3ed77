#include "curl_library.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include <fmt/format.h>

#ifndef GPUCTL_LIBCURL_SONAME
#define GPUCTL_LIBCURL_SONAME "libcurl.so.4"  // libcurl's SONAME since 7.16 (2006)
#endif

namespace gpuctl::kube {
namespace {

struct Loaded {
  CurlLibrary library;
  std::string error;  // empty when loaded
};

template <typename Function>
bool resolve(void* handle, const char* name, Function& out, std::string& missing) {
  out = reinterpret_cast<Function>(::dlsym(handle, name));
  if (out == nullptr && missing.empty()) missing = name;
  return out != nullptr;
}

Loaded load() {
  Loaded loaded;
  // RTLD_LOCAL: libcurl's own dependencies stay out of the global namespace. Never unloaded.
  void* handle = ::dlopen(GPUCTL_LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    loaded.error = fmt::format("libcurl ({}) could not be loaded: {}; install libcurl (Debian and Ubuntu: libcurl4)",
                               GPUCTL_LIBCURL_SONAME, why ? why : "unknown error");
    return loaded;
  }
  CurlLibrary& c = loaded.library;
  std::string missing;
  CURLcode (*global_init)(long) = nullptr;
  resolve(handle, "curl_global_init", global_init, missing);
  resolve(handle, "curl_easy_init", c.easy_init, missing);
  resolve(handle, "curl_easy_setopt", c.easy_setopt, missing);
  resolve(handle, "curl_easy_perform", c.easy_perform, missing);
  resolve(handle, "curl_easy_getinfo", c.easy_getinfo, missing);
  resolve(handle, "curl_easy_reset", c.easy_reset, missing);
  resolve(handle, "curl_easy_cleanup", c.easy_cleanup, missing);
  resolve(handle, "curl_easy_strerror", c.easy_strerror, missing);
  resolve(handle, "curl_slist_append", c.slist_append, missing);
  resolve(handle, "curl_slist_free_all", c.slist_free_all, missing);
  resolve(handle, "curl_share_init", c.share_init, missing);
  resolve(handle, "curl_share_setopt", c.share_setopt, missing);
  resolve(handle, "curl_share_cleanup", c.share_cleanup, missing);
  if (!missing.empty()) {
    loaded.error = fmt::format("libcurl ({}) lacks {}: it is older than gpuctl needs (7.71 or later)",
                               GPUCTL_LIBCURL_SONAME, missing);
    return loaded;
  }
  // Once, before any other thread may use curl; curl_global_cleanup is left to the process's end.
  CURLcode rc = global_init(CURL_GLOBAL_DEFAULT);
  if (rc != CURLE_OK) {
    loaded.error =
        fmt::format("libcurl ({}) failed to initialize (curl code {})", GPUCTL_LIBCURL_SONAME, static_cast<int>(rc));
  }
  return loaded;
}

}  // namespace

Result<const CurlLibrary*> curl_library() {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.error.empty()) return fail(Errc::config, loaded.error);
  return &loaded.library;
}

}  // namespace gpuctl::kube
