#!/usr/bin/env python3
"""bench/compare_runs.py: ranges over runs, the ratio within each run, and the
runs it must refuse (no compare.csv; two topologies in one regime)."""

import csv
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "compare_runs.py")
spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)

HEAD = ["regime", "collective", "hosts", "ranks_per_host", "size_bytes",
        "ringsync_median_us", "openmpi_median_us", "gloo_median_us", "torch_median_us"]


def write_run(root, name, rows):
    directory = os.path.join(root, name)
    os.makedirs(directory)
    with open(os.path.join(directory, "compare.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEAD)
        w.writerows(rows)
    return directory


class CompareRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_ranges_and_the_ratio_within_each_run(self):
        a = write_run(self.root, "a", [
            ["unshaped", "allreduce", 2, 2, 8, 120, 60, "", ""],
            ["unshaped", "allreduce", 2, 2, 1048576, 900, 1000, "", ""],
            ["unshaped", "allreduce", 2, 2, 67108864, 20000, 40000, "", ""],
            ["unshaped", "reduce_scatter", 2, 2, 8, 1, 1000, "", ""],
        ])
        # In run b Open MPI is slow at 1 MiB and Gloo is the best peer there.
        b = write_run(self.root, "b", [
            ["unshaped", "allreduce", 2, 2, 8, 100, 80, "", ""],
            ["unshaped", "allreduce", 2, 2, 1048576, 1100, 3000, 1000, ""],
        ])
        lines = compare_runs.table([a, b])
        self.assertEqual(lines[0], "| size | unshaped: ringsync | best peer | ratio |")
        self.assertEqual(lines[2], "| 8 B | 100–120 | 60–80 | **1.25–2.00** |")
        # 900/1000 in a, 1100/1000 (Gloo) in b: slower in one run, so bold.
        self.assertEqual(lines[3], "| 1 MiB | 900–1100 | 1000 | **0.90–1.10** |")
        self.assertEqual(lines[4], "| 64 MiB | 20.0 ms | 40.0 ms | 0.50 |")
        self.assertEqual(len(lines), 5)

    def test_one_peer_named_in_the_head(self):
        a = write_run(self.root, "a", [["shaped", "allreduce", 2, 2, 4096, 80, 100, "", ""]])
        self.assertEqual(compare_runs.table([a])[0], "| size | shaped: ringsync | Open MPI | ratio |")

    def test_refuses_a_directory_without_compare_csv(self):
        empty = os.path.join(self.root, "empty")
        os.makedirs(empty)
        with self.assertRaisesRegex(compare_runs.Refused, "has no compare.csv"):
            compare_runs.table([empty])

    def test_refuses_two_topologies_in_one_regime(self):
        a = write_run(self.root, "a", [["unshaped", "allreduce", 2, 2, 8, 120, 60, "", ""]])
        b = write_run(self.root, "b", [["unshaped", "allreduce", 2, 1, 8, 90, 20, "", ""]])
        with self.assertRaisesRegex(compare_runs.Refused, "2 hosts x 1 ranks.*2 x 2.*one topology"):
            compare_runs.table([a, b])

    def test_command_line_exit_status(self):
        a = write_run(self.root, "a", [["unshaped", "allreduce", 2, 2, 8, 120, 60, "", ""]])
        ok = subprocess.run([sys.executable, SCRIPT, a], capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("| 8 B | 120 | 60 | **2.00** |", ok.stdout)
        missing = subprocess.run([sys.executable, SCRIPT, os.path.join(self.root, "nowhere")],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(missing.returncode, 2)
        self.assertIn("no compare.csv", missing.stderr)
        self.assertEqual(missing.stdout, "")


if __name__ == "__main__":
    unittest.main()
