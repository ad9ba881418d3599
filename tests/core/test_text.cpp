// escape_text: what a name from a model file or the environment looks like in a one-line message.
#include "furiosa/core/text.h"
#include "test_support.h"

using furiosa::escape_text;
using namespace std::string_literals;

TEST_CASE("escape_text keeps printable ASCII and valid UTF-8", "[core][text]") {
  CHECK(escape_text("conv_1/Relu:0") == "conv_1/Relu:0");
  CHECK(escape_text("\xec\x9d\xb8\xed\x92\x8b") == "\xec\x9d\xb8\xed\x92\x8b");  // Korean, 2 x 3 bytes
  CHECK(escape_text("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");                  // 4-byte emoji
}

TEST_CASE("escape_text turns control bytes, backslashes and broken UTF-8 into \\x escapes", "[core][text]") {
  CHECK(escape_text("Foo\nerror: InvalidInput: injected") == "Foo\\x0aerror: InvalidInput: injected");
  CHECK(escape_text("a\x1b[2Jb") == "a\\x1b[2Jb");
  CHECK(escape_text("cut\0here"s) == "cut\\x00here");
  CHECK(escape_text("back\\slash") == "back\\x5cslash");
  CHECK(escape_text("\x7f") == "\\x7f");
  CHECK(escape_text("\xff\xfe") == "\\xff\\xfe");
  CHECK(escape_text("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(escape_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  CHECK(escape_text("\xe2\x82") == "\\xe2\\x82");          // truncated sequence
}

TEST_CASE("escape_text shows at most max_bytes input bytes, never splitting a character", "[core][text]") {
  CHECK(escape_text(std::string(300, 'a')) == std::string(256, 'a') + "...");
  CHECK(escape_text("abcdef", 3) == "abc...");
  CHECK(escape_text("ab\xec\x9d\xb8", 3) == "ab...");
  CHECK(escape_text("abc", 3) == "abc");
}
