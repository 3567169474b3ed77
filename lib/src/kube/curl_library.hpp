#pragma once
// libcurl, loaded with dlopen the first time gpuctl talks to a server. libcurl pulls in about 30
// shared libraries (TLS, Kerberos, LDAP, RTMP, ssh, ...); linking it made every start pay the
// dynamic loader for all of them, about 5 ms, even `gpuctl --version` and `--help`, which never
// send a request (issue 14: start-up under 5 ms). Private to the library, like curl_transport.cpp.
#include <curl/curl.h>

#include <type_traits>

#include "gpuctl/error.hpp"

namespace gpuctl::kube {

// The libcurl functions gpuctl calls, resolved from the loaded library.
struct CurlLibrary {
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  void (*easy_reset)(CURL*) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
  CURLSH* (*share_init)() = nullptr;
  CURLSHcode (*share_setopt)(CURLSH*, CURLSHoption, ...) = nullptr;
  CURLSHcode (*share_cleanup)(CURLSH*) = nullptr;

  // curl_easy_setopt through the loaded library. The option's argument travels through C varargs,
  // where libcurl reads a long, a curl_off_t or a pointer by the option's type; an int (a bare
  // `1`) would be read as a long with undefined upper bits, so it does not compile.
  template <typename Value>
  CURLcode setopt(CURL* handle, CURLoption option, Value value) const {
    static_assert(std::is_same_v<Value, long> || std::is_same_v<Value, curl_off_t> || std::is_pointer_v<Value> ||
                      std::is_null_pointer_v<Value>,
                  "curl options take a long, a curl_off_t or a pointer");
    return easy_setopt(handle, option, value);
  }
};

// The library, loaded and initialized (curl_global_init) once per process, thread-safe; or why it
// could not be (Errc::config: which file, the loader's words, and the package that provides it).
Result<const CurlLibrary*> curl_library();

}  // namespace gpuctl::kube
