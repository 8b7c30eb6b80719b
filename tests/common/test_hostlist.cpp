#include "common/hostlist.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace test_common_hostlist {

using ringsync::expand_hostlist;
using Hosts = std::vector<std::string>;

namespace {

Hosts expand(const std::string& list) {
  auto hosts = expand_hostlist(list);
  REQUIRE_MESSAGE(hosts.ok(), hosts.status().to_string());
  return *hosts;
}

std::string refusal(const std::string& list, std::size_t max_hosts = 65536) {
  auto hosts = expand_hostlist(list, max_hosts);
  REQUIRE_MESSAGE(!hosts.ok(), list, " should be refused");
  return hosts.status().message();
}

}  // namespace

TEST_CASE("hostlist: plain names, ranges, lists and zero padding, in Slurm's order") {
  CHECK(expand("login") == Hosts{"login"});
  CHECK(expand("a,b") == Hosts{"a", "b"});
  CHECK(expand("n[1-3]") == Hosts{"n1", "n2", "n3"});
  CHECK(expand("n[08-11,20]") == Hosts{"n08", "n09", "n10", "n11", "n20"});
  CHECK(expand("gpu-a[1-2]-ib,login,n[7]") == Hosts{"gpu-a1-ib", "gpu-a2-ib", "login", "n7"});
  CHECK(expand("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand("rs-n[1-2]") == Hosts{"rs-n1", "rs-n2"});
}

TEST_CASE("hostlist: malformed lists are refused, naming what is wrong") {
  CHECK(refusal("").find("empty") != std::string::npos);
  CHECK(refusal("n[1-3").find("not closed") != std::string::npos);
  CHECK(refusal("n1-3]").find("no '['") != std::string::npos);
  CHECK(refusal("n[[1-2]]").find("nested") != std::string::npos);
  CHECK(refusal("n[3-1]").find("backwards") != std::string::npos);
  CHECK(refusal("n[a-b]").find("'a-b', which is not a number") != std::string::npos);
  CHECK(refusal("n[1-2],,m").find("empty name") != std::string::npos);
  CHECK(refusal("n[1-]").find("not a number") != std::string::npos);
  CHECK(refusal("n[]").find("not a number") != std::string::npos);
  CHECK(refusal("n[1-5]", 4).find("more than 4 hosts") != std::string::npos);
  CHECK(refusal("a[0-999]b[0-999]").find("more than 65536 hosts") != std::string::npos);
  CHECK(refusal("n[1-3").find("host list 'n[1-3'") == 0);
}

}  // namespace test_common_hostlist
