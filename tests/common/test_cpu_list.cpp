#include <doctest/doctest.h>

#include "common/cpu_list.h"

namespace test_common_cpu_list {

using ringsync::format_cpu_list;
using ringsync::parse_cpu_list;
using ringsync::StatusCode;

namespace {

std::string error_of(std::string_view text) {
  auto parsed = parse_cpu_list(text);
  REQUIRE_FALSE(parsed.ok());
  CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
  return parsed.status().message();
}

}  // namespace

TEST_CASE("CPU lists: numbers and ranges, sorted and distinct") {
  CHECK(parse_cpu_list("3").value() == std::vector<int>{3});
  CHECK(parse_cpu_list("0-3,8").value() == std::vector<int>{0, 1, 2, 3, 8});
  CHECK(parse_cpu_list("8,2-3,3,2").value() == std::vector<int>{2, 3, 8});
  CHECK(parse_cpu_list("5-5").value() == std::vector<int>{5});
  CHECK(parse_cpu_list("1024").value() == std::vector<int>{1024});
  CHECK(parse_cpu_list("8191").value() == std::vector<int>{8191});
}

TEST_CASE("CPU lists: malformed entries are named") {
  CHECK(error_of("") == "an empty CPU list");
  CHECK(error_of("x") == "'x' is not a CPU number (0 to 8191) or a range of them such as 2-5");
  CHECK(error_of("1,,2").starts_with("'' is not a CPU number"));
  CHECK(error_of("1,").starts_with("'' is not a CPU number"));
  CHECK(error_of("2-").starts_with("'2-' is not a CPU number"));
  CHECK(error_of("-1").starts_with("'-1' is not a CPU number"));
  CHECK(error_of("1 ,2").starts_with("'1 ' is not a CPU number"));
  CHECK(error_of("8192").starts_with("'8192' is not a CPU number (0 to 8191)"));
  CHECK(error_of("0-7:2").starts_with("'0-7:2' is not a CPU number"));  // taskset's stride
  CHECK(error_of("0-99999").starts_with("'0-99999' is not a CPU number"));
  CHECK(error_of("1-2-3").starts_with("'1-2-3' is not a CPU number"));
  CHECK(error_of("5-2") == "the CPU range '5-2' runs backwards");
}

TEST_CASE("CPU lists: formatting collapses runs and reads back the same") {
  CHECK(format_cpu_list({}) == "");
  CHECK(format_cpu_list({4}) == "4");
  CHECK(format_cpu_list({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(format_cpu_list({1, 3, 5, 6}) == "1,3,5-6");
  for (const char* text : {"0", "0-1", "0,2-7,9", "1-2,4-5,1000-1023"})
    CHECK(format_cpu_list(parse_cpu_list(text).value()) == text);
}

}  // namespace test_common_cpu_list
