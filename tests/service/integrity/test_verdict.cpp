#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "service/integrity/verdict.h"

namespace test_service_integrity_verdict {

using namespace ringsync;
using namespace ringsync::service::integrity;

namespace {

std::uint64_t all(std::uint32_t digest) { return check_word(VerifyResults::kAll, digest); }

}  // namespace

TEST_CASE("integrity: equal copies pass") {
  CHECK(compare_results({}, "allreduce 'w'").ok());
  CHECK(compare_results({all(5)}, "allreduce 'w'").ok());
  CHECK(compare_results({all(0xdeadbeef), all(0xdeadbeef), all(0xdeadbeef)}, "allreduce 'w'").ok());
}

TEST_CASE("integrity: a differing copy is named against the majority") {
  const Status s = compare_results({all(0x1111), all(0xabcdef01), all(0x1111)}, "allreduce 'w' (sequence 4)");
  CHECK(s.code() == StatusCode::kMismatch);
  CHECK(s.message() ==
        "result check failed for allreduce 'w' (sequence 4): node 1 holds 0xabcdef01, nodes 0,2 hold 0x00001111; "
        "node 1 holds a copy of the result that differs from the other nodes': a node's memory or the network "
        "corrupted data (silent data corruption). The collective failed on every rank; check the memory (ECC "
        "error counters, a memory test) and the network interface and link error counters of node 1, then retry");
}

TEST_CASE("integrity: several minorities are all named; without a majority every node is") {
  const Status five = compare_results({all(7), all(8), all(7), all(9), all(7)}, "broadcast 'b'");
  CHECK(five.message().find("node 1 holds 0x00000008, node 3 holds 0x00000009, nodes 0,2,4 hold 0x00000007") !=
        std::string::npos);
  CHECK(five.message().find("nodes 1,3 hold copies of the result that differ") != std::string::npos);
  CHECK(five.message().find("error counters of nodes 1,3, then retry") != std::string::npos);

  const Status two = compare_results({all(1), all(2)}, "allreduce 'w'");
  CHECK(two.code() == StatusCode::kMismatch);
  CHECK(two.message().find("no copy of the result is held by a majority, so the check cannot tell which is "
                           "wrong") != std::string::npos);
  CHECK(two.message().find("error counters of nodes 0,1, then retry") != std::string::npos);
}

TEST_CASE("integrity: nodes checking with different settings are told so, not called corrupt") {
  const Status s = compare_results({all(1), check_word(VerifyResults::kSample, 1), all(1)}, "allreduce 'w'");
  CHECK(s.code() == StatusCode::kMismatch);
  CHECK(s.message() ==
        "result check of allreduce 'w' cannot compare: the nodes run with different --verify-results (node 1 "
        "sample, nodes 0,2 all); give every node of the job the same setting");
}

}  // namespace test_service_integrity_verdict
