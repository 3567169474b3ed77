// SHA-256 against the NIST examples (FIPS 180-4's test vectors) and against sha256sum at the
// lengths where the padding changes shape: up to 55 bytes the length fits the last block, 56 to
// 63 bytes need a second one, 64 is a whole block.
#include <catch2/catch.hpp>

#include <string>

#include "gpuctl/util/sha256.hpp"

using gpuctl::util::sha256_hex;

TEST_CASE("sha256: the NIST examples", "[sha256]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopq"
                 "rstnopqrstu") == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Expected values: printf "%<n>s" | tr ' ' x | sha256sum (GNU coreutils 9.1).
TEST_CASE("sha256: lengths around the block and padding boundaries match sha256sum", "[sha256]") {
  CHECK(sha256_hex(std::string(55, 'x')) == "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  CHECK(sha256_hex(std::string(56, 'x')) == "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  CHECK(sha256_hex(std::string(63, 'x')) == "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
  CHECK(sha256_hex(std::string(64, 'x')) == "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  CHECK(sha256_hex(std::string(65, 'x')) == "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9");
  CHECK(sha256_hex(std::string(119, 'x')) == "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c");
  CHECK(sha256_hex(std::string(120, 'x')) == "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98");
  CHECK(sha256_hex(std::string(128, 'x')) == "24da1b81d0b16df6428eee73c69fcb2a93c76bc6df706f0c6670fe6bfe800464");
}

TEST_CASE("sha256: binary data with NUL and high bytes is hashed whole", "[sha256]") {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  // printf of the bytes 0x00..0xff | sha256sum
  CHECK(sha256_hex(bytes) == "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880");
}
