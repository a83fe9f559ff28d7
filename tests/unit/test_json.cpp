// The one JSON module (util/json.hpp): the writer's output parses back to the
// same values, the reader rejects malformed text with a position, strings
// holding JSON's own punctuation survive, and numbers ignore the locale.

#include "util/json.hpp"

#include <doctest/doctest.h>

#include <clocale>
#include <cmath>
#include <cstdint>
#include <limits>
#include <locale>
#include <stdexcept>
#include <string>

using namespace comm;

TEST_CASE("JSON writer output parses back") {
  json::Writer w;
  w.begin_object();
  w.key("s").value("quote \" backslash \\ newline \n tab \t ctrl \x01 utf8 \xc3\xa9");
  w.key("d").value(0.1);
  w.key("big").value(1.0e300);
  w.key("nan").value(std::nan(""));
  w.key("i").value(std::int64_t{-42});
  w.key("u").value(std::size_t{1} << 40);
  w.key("b").value(true);
  w.key("n").null();
  w.key("a").begin_array().value(1).begin_object().key("k").value("v").end_object().end_array();
  w.member_or_null("absent", false, 3).member_or_null("present", true, 3);
  w.end_object();
  const json::Value v = json::parse(w.str());
  REQUIRE(v.kind == json::Value::Kind::object);
  CHECK(v.find("s")->string == "quote \" backslash \\ newline \n tab \t ctrl \x01 utf8 \xc3\xa9");
  CHECK(v.find("d")->number == 0.1);  // shortest round-trip form
  CHECK(v.find("big")->number == 1.0e300);
  CHECK(v.find("nan")->kind == json::Value::Kind::null);
  CHECK(v.find("i")->number == -42);
  CHECK(v.find("u")->number == static_cast<double>(std::size_t{1} << 40));
  CHECK(v.find("b")->boolean);
  CHECK(v.find("n")->kind == json::Value::Kind::null);
  REQUIRE(v.find("a")->array.size() == 2);
  CHECK(v.find("a")->array[1].find("k")->string == "v");
  CHECK(v.find("absent")->kind == json::Value::Kind::null);
  CHECK(v.find("present")->integer() == 3);
  // Compact: no whitespace at all outside strings.
  CHECK(w.str().find(": ") == std::string::npos);
  CHECK(w.str().starts_with("{\"s\":\"quote \\\" backslash"));

  json::Writer bad;
  bad.begin_object();
  CHECK_THROWS_AS(bad.value(1), std::logic_error);  // a value needs a key inside an object
  CHECK_THROWS_AS(bad.str(), std::logic_error);     // still open
  json::Writer unbalanced;
  CHECK_THROWS_AS(unbalanced.end_array(), std::logic_error);
  json::Writer twice;
  twice.value(1);
  CHECK_THROWS_AS(twice.value(2), std::logic_error);  // one top-level value
}

TEST_CASE("JSON writer lays out records one per line at break depth 2") {
  json::Writer w;
  w.set_break_depth(2);
  w.begin_object().key("records").begin_array();
  w.begin_object().member("a", 1).member("b", "x").end_object();
  w.begin_object().member("a", 2).member("b", "y").end_object();
  w.end_array().end_object();
  CHECK(w.str() == "{\n  \"records\": [\n    {\"a\": 1, \"b\": \"x\"},\n    {\"a\": 2, \"b\": \"y\"}\n  ]\n}");
  CHECK(json::parse(w.str()).find("records")->array[1].string_or("b") == "y");
}

TEST_CASE("JSON reader rejects malformed text with a position") {
  CHECK(json::parse(" [1, -2.5e3, \"\\u00e9\\ud83d\\ude00\"] ").array[2].string == "\xc3\xa9\xf0\x9f\x98\x80");
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"abc", "tru", "{\"a\":1,\"a\":2}", "[1] 2",
                          "\"\\x\"", "-", "{1:2}", "1e999", "[1e]", "\"\\ud800\"", "\"a\nb\"", "+1", ".5", "nul"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(json::parse(bad), json::ParseError);
  }
  try {
    json::parse("{\n  \"a\": [1, 2,,]\n}", "t.json");
    FAIL("expected an error");
  } catch (const json::ParseError& e) {
    CHECK(std::string(e.what()).find("t.json: line 2, column 14") != std::string::npos);
    CHECK(e.line() == 2);
    CHECK(e.column() == 14);
  }
  std::string deep(100, '[');
  CHECK_THROWS_WITH_AS(json::parse(deep + std::string(100, ']')), doctest::Contains("nesting deeper"),
                       json::ParseError);
}

TEST_CASE("JSON strings holding braces, quotes and keys parse as strings") {
  // What the regex reader of flight dumps got wrong: a '}' or '"' inside a
  // value, and text that looks like another member.
  json::Writer w;
  w.begin_object().member("error", "peer said {\"state\":\"done\"} and }]").member("state", "failed").end_object();
  const json::Value v = json::parse(w.str());
  CHECK(v.string_or("error") == "peer said {\"state\":\"done\"} and }]");
  CHECK(v.string_or("state") == "failed");
  CHECK(v.object.size() == 2);
}

TEST_CASE("JSON accessors with fallbacks and integers") {
  const json::Value v = json::parse(R"({"n": 7, "f": 2.5, "s": "x", "big": 1e19, "neg": -3})");
  CHECK(v.number_or("n", -1) == 7);
  CHECK(v.number_or("s", -1) == -1);       // not a number
  CHECK(v.number_or("missing", -1) == -1);
  CHECK(v.string_or("n", "fb") == "fb");   // not a string
  CHECK(v.find("n")->integer() == 7);
  CHECK(v.find("neg")->integer() == -3);
  CHECK_FALSE(v.find("f")->integer());     // has a fraction
  CHECK_FALSE(v.find("big")->integer());   // beyond int64
  CHECK_FALSE(v.find("s")->integer());
  CHECK(json::parse("[]").find("n") == nullptr);  // not an object
}

TEST_CASE("JSON numbers do not depend on the locale") {
  // A locale with a decimal comma, if this machine has one; the C++ global
  // locale as well, which streams would pick up.
  const char* comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
  const char* set = nullptr;
  for (const char* l : comma_locales)
    if ((set = std::setlocale(LC_ALL, l))) break;
  if (set) {
    CHECK(std::localeconv()->decimal_point[0] == ',');
    std::locale::global(std::locale(set));
  } else {
    MESSAGE("no decimal-comma locale installed; checking under the C locale only");
  }
  CHECK(json::number(0.5) == "0.5");
  CHECK(json::number(-1.25e-7) == "-1.25e-07");
  CHECK(json::parse("0.5").number == 0.5);
  CHECK(json::parse("[2.75]").array[0].number == 2.75);
  json::Writer w;
  w.value(3.5);
  CHECK(w.str() == "3.5");
  std::setlocale(LC_ALL, "C");
  std::locale::global(std::locale::classic());
  CHECK(json::number(std::numeric_limits<double>::infinity()) == "null");
  CHECK(json::quote("\x1f") == "\"\\u001f\"");
}
