"""Tests of bench/peers/peers_report.py (the report of bench/fashion_mnist_peers.sh) on synthetic
reports shaped like `ingot train --metrics-json`, fashion_mnist_keras.py's and fashion_mnist_torch.py's
(no training; ctest label `bench`)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORT = os.path.join(BENCH, "peers", "peers_report.py")
sys.path.insert(0, os.path.join(BENCH, "peers"))
import peers_report  # noqa: E402


def ingot(epochs, acc, rss, step=1.0, overhead=0.1, seed=1337):
    return {"history": {}, "test": {"loss": 0.3, "accuracy": acc}, "epoch_seconds": epochs, "compile_seconds": 1.5,
            "timing": {"train_steps": 10, "step_ms": step, "overhead_ms": overhead}, "peak_rss_bytes": rss * 2**20,
            "allocator_peak_bytes": 50 * 2**20,
            "config": {"model": "mlp", "epochs": len(epochs), "train_samples": 54000, "lr_schedule": "cosine",
                       "seed": seed}}


def keras(epochs, acc, rss, step_total, seed=1337):
    return {"peer": "keras 3.13.0 (jax 0.10.2)", "history": {}, "test": {"loss": 0.31, "accuracy": acc},
            "epoch_seconds": epochs, "timing": {"train_steps": 10, "train_step_total_ms": step_total},
            "peak_rss_bytes": rss * 2**20,
            "config": {"model": "mlp", "epochs": len(epochs), "train_samples": 54000, "lr_schedule": "cosine",
                       "seed": seed}}


class PeersReport(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def write(self, name, report):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            json.dump(report, f)
        return path

    def args(self):
        return [f"ingot:mlp:{self.write('i1.json', ingot([5.0, 1.0, 1.2, 0.8], 0.89, 200))}",
                f"keras:mlp:{self.write('k1.json', keras([9.0, 2.0, 2.0], 0.888, 500, 4.0))}",
                f"ingot:mlp:{self.write('i2.json', ingot([4.0, 1.4, 1.4], 0.891, 210, step=1.2, seed=1338))}",
                f"keras:mlp:{self.write('k2.json', keras([8.0, 3.0, 3.0], 0.886, 480, 5.0, seed=1338))}",
                f"ingot:mlp:{self.write('i3.json', ingot([6.0, 1.1], 0.893, 190, step=0.9, seed=1339))}",
                f"keras:mlp:{self.write('k3.json', keras([8.5, 2.5], 0.887, 490, 4.5, seed=1339))}"]

    def test_medians_over_rounds(self):
        runs = peers_report.load_runs(self.args())
        i = peers_report.summarise(runs["mlp"]["ingot"])
        k = peers_report.summarise(runs["mlp"]["keras"])
        self.assertEqual(i["rounds"], 3)
        self.assertEqual(i["epoch_s"], 1.1)  # round medians after the first epoch: 1.0, 1.4, 1.1
        self.assertEqual(i["first_epoch_s"], 5.0)
        self.assertAlmostEqual(i["step_total_ms"], 1.1)  # step + overhead: 1.1, 1.3, 1.0
        self.assertEqual(i["accuracy"], 0.891)
        self.assertEqual(i["rss_mib"], 210)  # the largest round
        self.assertEqual(i["allocator_mib"], 50)
        self.assertEqual(k["epoch_s"], 2.5)
        self.assertEqual(k["step_total_ms"], 4.5)
        self.assertIsNone(k["compile_s"])
        self.assertEqual(k["label"], "keras 3.13.0 (jax 0.10.2)")

    def test_markdown_ratios(self):
        text = peers_report.report(peers_report.load_runs(self.args()), today="2026-12-02", machine="2 cores, test")
        row = next(l for l in text.splitlines() if l.startswith("| keras"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[1], "3")
        self.assertEqual(cells[9], "+0.40")  # 0.891 - 0.887, in points
        self.assertEqual(cells[10], f"{1.1 / 2.5:.2f}")
        self.assertEqual(cells[11], f"{1.1 / 4.5:.2f}")
        self.assertEqual(cells[12], f"{210 / 500:.2f}")
        ingot_row = next(l for l in text.splitlines() if l.startswith("| ingot"))
        self.assertIn("210 (allocator 50)", ingot_row)
        self.assertIn("| 0.8910 (0.8900-0.8930) |", ingot_row)  # median, then min-max over the seeds
        self.assertIn("Seeds (weights and shuffles): ingot 1337, 1338, 1339; keras 1337, 1338, 1339.", text)

    def test_one_seed_prints_no_range(self):
        text = peers_report.report(peers_report.load_runs(self.args()[:2]), today="2026-12-02", machine="2 cores")
        ingot_row = next(l for l in text.splitlines() if l.startswith("| ingot"))
        self.assertIn("| 0.8900 |", ingot_row)

    def test_bad_arguments_exit_2_with_one_line(self):
        keras_only = f"keras:mlp:{self.write('k.json', keras([1.0], 0.8, 1, 1.0))}"
        for argv, message in [(["no-colons"], "is not WHO:MODEL:FILE.json"),
                              ([keras_only], "has no ingot run"),
                              (["ingot:mlp:/nonexistent.json"], "cannot read the report")]:
            p = subprocess.run([sys.executable, REPORT, *argv], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 2, argv)
            self.assertIn(message, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
