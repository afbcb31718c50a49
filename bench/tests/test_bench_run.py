"""Tests of bench/run, bench/peers/bench_report.py and bench/peers/bench_plot.py on the synthetic
JSON of bench/testdata (no real benchmark; ctest label `bench`). Run with /usr/bin/python3:

  python3 -m unittest discover -s bench/tests -v
"""
import copy
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(BENCH, "testdata")
RUN = os.path.join(BENCH, "run")
VENV_PYTHON = os.path.join(BENCH, ".venv", "bin", "python")
sys.path.insert(0, os.path.join(BENCH, "peers"))
import bench_plot  # noqa: E402
import bench_report  # noqa: E402


def rounds():
    return [{f: bench_report.load(os.path.join(DATA, f"round{i}-{f}.json"), True) for f in ("ingot", "torch")}
            for i in (1, 2, 3)]


def run(*argv, cwd=None):
    return subprocess.run([sys.executable, RUN, *argv], capture_output=True, text=True, cwd=cwd, timeout=120)


class Aggregate(unittest.TestCase):
    def setUp(self):
        self.agg = bench_report.aggregate_rounds(rounds())

    def test_median_of_the_rounds_medians(self):
        mlp = self.agg["ingot"]["models"]["mlp"]
        self.assertEqual(mlp["step_ms"]["median"], 3.0)
        self.assertEqual(mlp["step_ms"]["p10"], 2.8)
        self.assertEqual(mlp["step_ms"]["p90"], 3.3)  # of 2.5, 4.5, 3.3
        self.assertEqual(mlp["step_ms"]["min"], 1.2)  # the minimum, not the median of minima
        self.assertEqual(mlp["compile_s"], 2.0)
        self.assertEqual(mlp["round_medians"], [2.0, 4.0, 3.0])
        self.assertEqual(self.agg["torch"]["models"]["mlp"]["step_ms"]["median"], 6.0)
        self.assertEqual(self.agg["ingot"]["rounds"], 3)

    def test_variants_and_gemm(self):
        v = self.agg["ingot"]["models"]["mlp"]["variants"]
        self.assertEqual(v["no-fusion"]["step_ms"]["median"], 6.0)
        self.assertEqual(v["no-fusion"]["kernels_per_step"], 30)
        self.assertEqual(self.agg["ingot"]["gemm"], [{"n": 256, "path": "library", "ms": 2.0, "tflops": 0.02}])

    def test_framework_missing_from_a_round(self):
        rs = rounds()
        del rs[1]["torch"]
        agg = bench_report.aggregate_rounds(rs)
        self.assertEqual(agg["torch"]["rounds"], 2)
        self.assertEqual(agg["torch"]["models"]["mlp"]["step_ms"]["median"], 6.5)  # (6 + 7) / 2


class Report(unittest.TestCase):
    def report(self, rs=None):
        rs = rounds() if rs is None else rs
        return {"machine": {"cpu": "Test CPU", "cores": 2, "date": "2026-01-02", "slug": "test-2c"},
                "settings": {"rounds": 3, "models": "mlp,cnn", "steps": 3, "warmup": 1, "ingot": "/x/ingot"},
                "frameworks": {"ingot": {"status": "ok", "command": "/x/ingot"},
                               "torch": {"status": "ok", "version": "1.13.0a0", "command": "/usr/bin/python3"},
                               "jax": {"status": "missing", "reason": "no interpreter at bench/.venv/bin/python"}},
                "rounds": rs, "aggregate": bench_report.aggregate_rounds(rs), "plot": {"reason": "no venv"}}

    def test_models_table_and_ratios(self):
        md = bench_report.full_report(self.report())
        self.assertIn("| mlp | step ms (median) | 3.000 | 6.000 | **0.50** |", md)
        self.assertIn("| cnn | step ms (median) | 21.000 | 42.000 | **0.50** |", md)
        self.assertIn("| mlp | step ms (rounds' medians) | 2.000, 4.000, 3.000 | 6.000, 5.000, 7.000 |", md)
        self.assertIn("| mlp | kernels per step | 12 | - |", md)
        self.assertNotIn("Not comparable", md)  # ingot-only config keys are not mismatches

    def test_torch_compile_column_best_peer_ratio_and_rss(self):
        # A third framework (PyTorch under torch.compile, faster than eager here) adds its column,
        # its ratio and the ratio to the fastest peer; peak RSS and 5-digit losses are rows.
        rs = rounds()
        for r in rs:
            tc = copy.deepcopy(r["torch"])
            tc["framework"] = "torch-compile"
            for m in tc["models"].values():
                m["step_ms"] = {k: v / 2 for k, v in m["step_ms"].items()}
                m["peak_rss_bytes"] = 300 * 2**20
            r["torch-compile"] = tc
            r["ingot"]["models"]["mlp"]["peak_rss_bytes"] = 100 * 2**20
        md = bench_report.full_report(self.report(rs))
        self.assertIn("| model | metric | ingot | torch | torch-compile | ingot / torch | ingot / torch-compile | "
                      "ingot / best peer |", md)
        self.assertIn("| mlp | step ms (median) | 3.000 | 6.000 | 3.000 | **0.50** | **1.00** | **1.00** |", md)
        self.assertIn("| mlp | peak RSS MiB | 100.000 | - | 300.000 |", md)
        self.assertIn("| mlp | loss first -> last | ", md)
        self.assertRegex(md, r"\| mlp \| loss first -> last \| [0-9]+\.[0-9]{5} -> ")

    def test_variant_rows(self):
        md = bench_report.full_report(self.report())
        self.assertIn("| mlp | baseline | 3.000 | 2.800-3.300 | **1.00** | 12 | 2.00 | 2.00 | 0.100 |", md)
        self.assertIn("| mlp | no-fusion | 6.000 | 6.000-6.000 | **2.00** | 30 | 3.00 | 1.00 | 0.100 |", md)

    def test_missing_peer_row_and_gemm(self):
        md = bench_report.full_report(self.report())
        self.assertIn("| jax | - | `-` | **missing**: no interpreter at bench/.venv/bin/python |", md)
        self.assertIn("| 256 | library | 2.000 | 0.02 | 1.00 |", md)
        self.assertIn("No plot: no venv.", md)

    def test_older_json_without_variants(self):
        rs = rounds()
        for r in rs:
            del r["ingot"]["models"]["mlp"]["variants"]
        md = bench_report.full_report(self.report(rs))
        self.assertIn("This ingot bench wrote no variants", md)
        self.assertIn("| mlp | step ms (median) | 3.000 | 6.000 | **0.50** |", md)

    def test_mismatch_named(self):
        rs = rounds()
        for r in rs:
            r["torch"]["config"] = dict(r["torch"]["config"], batch_size=32)
        md = bench_report.full_report(self.report(rs))
        self.assertIn("torch ran with batch_size = 32, ingot with 16", md)

    def test_bad_variant_rejected(self):
        run = copy.deepcopy(rounds()[0]["ingot"])
        run["models"]["mlp"]["variants"]["spe8"] = {"step_ms": {}}
        with self.assertRaisesRegex(bench_report.BadReport, "variant 'spe8' lacks step_ms.median"):
            bench_report.check_run(run, "x.json")


class Plot(unittest.TestCase):
    def test_series(self):
        models, bars = bench_plot.series(bench_report.aggregate_rounds(rounds()))
        self.assertEqual(models, ["mlp", "cnn"])
        self.assertEqual(bars, [("ingot baseline", [3.0, None]), ("ingot no-fusion", [6.0, None]),
                                ("torch", [6.0, 42.0])])

    def test_log_scale(self):
        self.assertFalse(bench_plot.use_log_scale([1.0, 9.0, None]))
        self.assertTrue(bench_plot.use_log_scale([1.0, 11.0]))
        self.assertFalse(bench_plot.use_log_scale([5.0]))

    def test_png(self):
        python = None
        for candidate in (sys.executable, VENV_PYTHON):
            if os.path.isfile(candidate) and subprocess.run([candidate, "-c", "import matplotlib"],
                                                            capture_output=True).returncode == 0:
                python = candidate
                break
        if python is None:
            self.skipTest("matplotlib is absent from /usr/bin/python3 and there is no bench/.venv "
                          "(bench/run --install makes it)")
        with tempfile.TemporaryDirectory() as tmp:
            report = os.path.join(tmp, "report.json")
            with open(report, "w") as f:
                json.dump({"aggregate": bench_report.aggregate_rounds(rounds())}, f)
            png = os.path.join(tmp, "p.png")
            p = subprocess.run([python, os.path.join(BENCH, "peers", "bench_plot.py"), report, "--out", png],
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


class Driver(unittest.TestCase):
    def fake_ingot(self, tmp, body):
        path = os.path.join(tmp, "ingot")
        with open(path, "w") as f:
            f.write("#!/bin/sh\nif [ \"$2\" = \"--help\" ]; then echo '  --variants LIST'; exit 0; fi\n" + body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def test_help(self):
        p = run("--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn("--report-only", p.stdout)

    def test_bad_options_exit_2(self):
        for argv, message in ((["--rounds", "0"], "--rounds is 0"), (["--variants", "fast"], "unknown name 'fast'"),
                              (["--models", "mlp,mlp"], "appears twice"), (["--frobnicate"], "unrecognized"),
                              (["--ingot", "/nonexistent/ingot"], "not an executable file"),
                              (["--frameworks", "torch"], "lacks ingot"), (["--gemm", "12,x"], "--gemm '12,x'")):
            p = run(*argv)
            self.assertEqual(p.returncode, 2, argv)
            self.assertIn(message, p.stderr, argv)

    def test_failed_run_exit_1_with_stderr_tail(self):
        with tempfile.TemporaryDirectory() as tmp:
            ingot = self.fake_ingot(tmp, "echo 'boom: out of cheese' >&2\nexit 3\n")
            p = run("--ingot", ingot, "--out", os.path.join(tmp, "out"), "--models", "mlp", "--frameworks", "ingot")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("round 1: ingot failed (exit 3", p.stderr)
            self.assertIn("boom: out of cheese", p.stderr)

    def test_rounds_with_a_fake_ingot(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            src = os.path.join(DATA, "round2-ingot.json")
            ingot = self.fake_ingot(tmp, 'while [ $# -gt 0 ]; do case "$1" in --json) j="$2";; '
                                         '--variants) v="$2";; --save-inputs) i="$2";; esac; shift; done\n'
                                         f'echo "$v" >> "$(dirname "$j")/variants.txt"; cp "{src}" "$j"\n'
                                         'echo "$i" >> "$(dirname "$j")/inputs.txt"\n')
            p = run("--ingot", ingot, "--out", out, "--rounds", "2", "--frameworks", "ingot")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(out, "variants.txt")) as f:
                self.assertEqual(f.read().split(), ["baseline,no-fusion,no-donation,no-prefetch,spe8,codegen-gemm"] * 2)
            with open(os.path.join(out, "inputs.txt")) as f:  # each round's weights and batches for the peers
                self.assertEqual(f.read().split(), [os.path.join(out, "inputs-r1"), os.path.join(out, "inputs-r2")])
            self.assertTrue(os.path.isdir(os.path.join(out, "inputs-r2")))
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            self.assertEqual(len(report["rounds"]), 2)
            self.assertEqual(report["aggregate"]["ingot"]["models"]["mlp"]["step_ms"]["median"], 4.0)
            self.assertEqual(report["frameworks"]["torch"]["reason"], "not asked for (--frameworks)")
            self.assertEqual(report["frameworks"]["torch-compile"]["reason"], "not asked for (--frameworks)")
            for key in ("cpu", "cores", "os", "date", "git_commit"):
                self.assertIn(key, report["machine"])
            with open(os.path.join(out, "report.md")) as f:
                self.assertIn("| mlp | no-fusion | 6.600 |", f.read())

    def test_lm_large_is_a_second_invocation(self):
        # lm-large runs as the LM with the 12-block width-768 sizes, in its own invocation (its own
        # JSON and inputs directory, no variants), and joins the round's run as model lm-large.
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out")
            src = os.path.join(DATA, "round2-ingot.json")
            with open(src) as f:
                lm = json.load(f)
            lm["models"] = {"lm": dict(lm["models"]["mlp"], batch=8)}
            lm_src = os.path.join(tmp, "lm.json")
            with open(lm_src, "w") as f:
                json.dump(lm, f)
            ingot = self.fake_ingot(tmp, 'echo "$@" >> "$(dirname "$0")/argv.txt"\n'
                                         'while [ $# -gt 0 ]; do case "$1" in --json) j="$2";; --models) m="$2";; esac; '
                                         'shift; done\n'
                                         f'if [ "$m" = lm ]; then cp "{lm_src}" "$j"; else cp "{src}" "$j"; fi\n')
            p = run("--ingot", ingot, "--out", out, "--rounds", "1", "--frameworks", "ingot", "--models", "mlp,lm-large")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(tmp, "argv.txt")) as f:
                main, large = f.read().splitlines()
            self.assertIn("--models mlp ", main)
            self.assertIn("--variants", main)
            self.assertIn("--models lm ", large)
            self.assertIn("--lm-blocks 12", large)
            self.assertIn("--lm-width 768", large)
            self.assertIn("--lm-heads 12", large)
            self.assertNotIn("--variants", large)
            self.assertIn(os.path.join(out, "inputs-r1-lm-large"), large)
            self.assertTrue(os.path.isfile(os.path.join(out, "round1-ingot-lm-large.json")))
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
            models = report["aggregate"]["ingot"]["models"]
            self.assertEqual(sorted(models), ["cnn", "lm-large", "mlp"])
            self.assertEqual(models["lm-large"]["batch"], 8)
            self.assertEqual(models["lm-large"]["sizes"]["lm_blocks"], 12)
            with open(os.path.join(out, "report.md")) as f:
                md = f.read()
            self.assertIn("| lm-large | step ms (median) |", md)
            self.assertIn("lm-large: the LM with 12 blocks, width 768, 12 heads", md)
            # --report-only joins the two files of the round again.
            os.remove(os.path.join(out, "report.json"))
            p = run("--report-only", "--out", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(out, "report.md")) as f:
                self.assertIn("| lm-large | step ms (median) |", f.read())

    def test_report_only(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name in os.listdir(DATA):
                if name.endswith(".json"):
                    shutil.copy(os.path.join(DATA, name), tmp)
            p = run("--report-only", "--out", tmp)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(tmp, "report.md")) as f:
                md = f.read()
            self.assertIn("| mlp | step ms (median) | 3.000 | 6.000 | **0.50** |", md)
            self.assertIn("| jax | - | `-` | **missing**: no round*-jax.json in", md)
            os.remove(os.path.join(tmp, "round2-ingot.json"))
            os.remove(os.path.join(tmp, "report.json"))
            p = run("--report-only", "--out", tmp)
            self.assertEqual(p.returncode, 1)
            self.assertIn("no round<N>-ingot.json for every round", p.stderr)


if __name__ == "__main__":
    unittest.main()
