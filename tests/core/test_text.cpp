// escape_text and one_line: what a name from a model file or the environment looks like in a one-line
// message, and furiosa::Error keeping every message on one line.
#include "furiosa/core/error.h"
#include "furiosa/core/text.h"
#include "test_support.h"

using furiosa::escape_text;
using namespace std::string_literals;

TEST_CASE("escape_text keeps printable ASCII and valid UTF-8", "[core][text]") {
  CHECK(escape_text("conv_1/Relu:0") == "conv_1/Relu:0");
  CHECK(escape_text("\xec\x9d\xb8\xed\x92\x8b") == "\xec\x9d\xb8\xed\x92\x8b");  // Korean, 2 x 3 bytes
  CHECK(escape_text("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");                  // 4-byte emoji
}

TEST_CASE("escape_text turns control bytes, backslashes and broken UTF-8 into hex escapes", "[core][text]") {
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

TEST_CASE("one_line escapes control bytes and broken UTF-8 but keeps backslashes and length", "[core][text]") {
  using furiosa::one_line;
  CHECK(one_line("Foo\nerror: x") == "Foo\\x0aerror: x");
  CHECK(one_line("a\x1b[2Jb\0c"s) == "a\\x1b[2Jb\\x00c");
  CHECK(one_line("\xff") == "\\xff");
  CHECK(one_line("back\\slash \xec\x9d\xb8") == "back\\slash \xec\x9d\xb8");
  CHECK(one_line(escape_text("evil\nname")) == escape_text("evil\nname"));  // idempotent on escaped text
  CHECK(one_line(std::string(1000, 'a')) == std::string(1000, 'a'));
}

TEST_CASE("furiosa::Error messages are one line whatever they were built from", "[core][text][error]") {
  const furiosa::Error e(furiosa::ErrorCode::UnsupportedOperator, "node 'x\x1b[2J' (op Foo\nerror: forged\0cut)"s);
  CHECK(e.message() == "node 'x\\x1b[2J' (op Foo\\x0aerror: forged\\x00cut)");
  CHECK(std::string(e.what()) == "UnsupportedOperator: " + e.message());
  // in_file names the file once, escaped, keeping code and subject.
  const furiosa::Error named = furiosa::in_file(e, "dir/m\n.onnx");
  CHECK(named.message() == "dir/m\\x0a.onnx: " + e.message());
  CHECK(named.code() == e.code());
  CHECK(named.file() == "dir/m\n.onnx");
  CHECK(furiosa::in_file(named, "dir/m\n.onnx").message() == named.message());
}
