"""Self-test of the comparator (compare.py) on made-up results: it must find each kind of
difference, accept only allow-listed ones, and refuse stale or undocumented allow-list entries."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import conformance_common as common  # noqa: E402

DOCS = "# Differences\n\n## CSV header order\n\ntext\n"


class Fixture:
    """results/{lightning,volt}/<name>.json and work/{lightning,volt}/<name>/ for one configuration."""

    def __init__(self, root, name="cfg"):
        self.root, self.name = root, name
        self.results = os.path.join(root, "results")
        self.work = os.path.join(root, "work")

    def write(self, side, result=None, csv_text=None, ckpts=()):
        res = common.empty_result(self.name)
        res.update({"global_step": 10, "current_epoch": 1, "should_stop": False,
                    "train_batches_per_epoch": [10], "val_runs": [[0, 10, 10, 4]]})
        res.update(result or {})
        os.makedirs(os.path.join(self.results, side), exist_ok=True)
        with open(os.path.join(self.results, side, self.name + ".json"), "w") as f:
            json.dump(res, f)
        run = os.path.join(self.work, side, self.name)
        os.makedirs(os.path.join(run, "lightning_logs", "version_0", "checkpoints"), exist_ok=True)
        if csv_text is not None:
            with open(os.path.join(run, "lightning_logs", "version_0", "metrics.csv"), "w") as f:
                f.write(csv_text)
        for c in ckpts:
            open(os.path.join(run, "lightning_logs", "version_0", "checkpoints", c), "w").close()

    def run(self, known_entries=(), docs=DOCS):
        known, problems = compare.load_known_entries(list(known_entries), {self.name}, docs)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            ok = compare.compare_all([{"name": self.name}], self.results, self.work, known, problems)
        return ok, out.getvalue()


CSV = "epoch,step,train_loss,val_loss\n0,9,0.5,\n0,9,,0.75\n"


class ComparatorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.fx = Fixture(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_identical_observables_agree_even_with_different_train_loss_values(self):
        self.fx.write("lightning", csv_text=CSV, ckpts=["epoch=0-step=10.ckpt"])
        self.fx.write("volt", csv_text=CSV.replace("0.5", "0.4375"), ckpts=["epoch=0-step=10.ckpt"])
        ok, out = self.fx.run()
        self.assertTrue(ok, out)
        self.assertIn("agree   cfg", out)

    def test_a_different_global_step_fails_and_names_both_values(self):
        self.fx.write("lightning")
        self.fx.write("volt", {"global_step": 9})
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("global_step: lightning 10 | volt 9", out)

    def test_a_different_step_value_in_metrics_csv_is_shown_row_by_row(self):
        self.fx.write("lightning", csv_text=CSV)
        self.fx.write("volt", csv_text=CSV.replace("0,9,,0.75", "0,10,,0.75"))
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("row 1: lightning step=9.0 epoch=0.0 cols=val_loss vals=val_loss=0.75 | volt step=10.0", out)

    def test_a_deterministic_value_is_compared_but_nan_equals_nan(self):
        self.fx.write("lightning", csv_text=CSV.replace("0.75", "nan"))
        self.fx.write("volt", csv_text=CSV.replace("0.75", "nan"))
        self.assertTrue(self.fx.run()[0])
        self.fx.write("volt", csv_text=CSV.replace("0.75", "0.875"))
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("csv.rows", out)

    def test_header_order_alone_is_its_own_observable(self):
        self.fx.write("lightning", csv_text=CSV)
        self.fx.write("volt", csv_text="step,epoch,train_loss,val_loss\n9,0,0.5,\n9,0,,0.75\n")
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("csv.header_order", out)
        self.assertNotIn("csv.rows", out)

    def test_an_allow_listed_difference_passes_and_shows_its_reason(self):
        self.fx.write("lightning", csv_text=CSV)
        self.fx.write("volt", csv_text="step,epoch,train_loss,val_loss\n9,0,0.5,\n9,0,,0.75\n")
        entry = {"config": ["cfg"], "observable": "csv.header_order", "reason": "sorted vs first use",
                 "doc": "CSV header order"}
        ok, out = self.fx.run([entry])
        self.assertTrue(ok, out)
        self.assertIn("[known: sorted vs first use]", out)

    def test_the_json_report_lists_each_difference_and_whether_it_is_known(self):
        self.fx.write("lightning")
        self.fx.write("volt", {"global_step": 9, "current_epoch": 0})
        entry = {"config": "cfg", "observable": "current_epoch", "reason": "r", "doc": "CSV header order"}
        known, problems = compare.load_known_entries([entry], {"cfg"}, DOCS)
        path = os.path.join(self.tmp.name, "report.json")
        with contextlib.redirect_stdout(io.StringIO()):
            compare.compare_all([{"name": "cfg"}], self.fx.results, self.fx.work, known, problems, path)
        with open(path) as f:
            report = json.load(f)
        self.assertFalse(report["pass"])
        self.assertEqual([(d["observable"], d["known"]) for d in report["differences"]["cfg"]],
                         [("global_step", False), ("current_epoch", True)])

    def test_one_entry_may_name_several_observables_and_each_must_still_differ(self):
        self.fx.write("lightning")
        self.fx.write("volt", {"global_step": 9, "current_epoch": 0})
        entry = {"config": "cfg", "observable": ["global_step", "current_epoch"], "reason": "r",
                 "doc": "CSV header order"}
        self.assertTrue(self.fx.run([entry])[0])
        self.fx.write("volt", {"global_step": 9})
        ok, out = self.fx.run([entry])
        self.assertFalse(ok)
        self.assertIn("STALE   allow-list entry (cfg, current_epoch)", out)

    def test_a_stale_allow_list_entry_fails(self):
        self.fx.write("lightning")
        self.fx.write("volt")
        entry = {"config": "cfg", "observable": "global_step", "reason": "r", "doc": "CSV header order"}
        ok, out = self.fx.run([entry])
        self.assertFalse(ok)
        self.assertIn("STALE", out)

    def test_an_entry_without_its_docs_section_fails(self):
        self.fx.write("lightning")
        self.fx.write("volt", {"global_step": 9})
        entry = {"config": "cfg", "observable": "global_step", "reason": "r", "doc": "No such heading"}
        ok, out = self.fx.run([entry])
        self.assertFalse(ok)
        self.assertIn("does not contain 'No such heading'", out)
        ok, out = self.fx.run([entry], docs=None)
        self.assertFalse(ok)
        self.assertIn("does not exist", out)

    def test_refused_on_one_side_only_is_a_difference(self):
        self.fx.write("lightning", {"accepted": False, "error": "MisconfigurationException: bad"})
        self.fx.write("volt")
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("accepted: lightning refused (MisconfigurationException: bad) | volt accepted", out)

    def test_both_refused_agree_only_when_volt_throws_a_volt_error(self):
        self.fx.write("lightning", {"accepted": False, "error": "ValueError: x"})
        self.fx.write("volt", {"accepted": False, "error": "volt::ConfigError: y", "error_kind": "volt::ConfigError"})
        self.assertTrue(self.fx.run()[0])
        self.fx.write("volt", {"accepted": False, "error": "c10::Error", "error_kind": "not a volt::Error"})
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("error_kind", out)

    def test_a_missing_result_or_harness_error_fails(self):
        self.fx.write("lightning")
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("volt wrote no result", out)
        self.fx.write("volt", {"harness_error": "boom"})
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn("harness error: boom", out)

    def test_checkpoint_names_are_compared(self):
        self.fx.write("lightning", ckpts=["epoch=0-step=10.ckpt"])
        self.fx.write("volt", ckpts=["epoch=0-step=10-v1.ckpt"])
        ok, out = self.fx.run()
        self.assertFalse(ok)
        self.assertIn('only lightning ["lightning_logs/version_0/checkpoints/epoch=0-step=10.ckpt"]', out)


class RunnerTest(unittest.TestCase):
    def test_an_absent_oracle_skips_with_exit_77_and_names_where_it_looked(self):
        here = os.path.dirname(os.path.abspath(__file__))
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "no-oracle")
            proc = subprocess.run([sys.executable, os.path.join(here, "run_conformance.py"), "--volt", "unused",
                                   "--work", os.path.join(tmp, "work"), "--oracle-dest", os.path.join(tmp, "o")],
                                  env=dict(os.environ, VOLT_ORACLE_DIR=missing), capture_output=True, text=True)
            self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
            self.assertIn(f"SKIP: the Lightning oracle is absent (looked in {missing})", proc.stdout)
            self.assertEqual(os.listdir(tmp), [], "a skipped run writes nothing")


class ConfigFileTest(unittest.TestCase):
    def test_the_shipped_configurations_load_and_are_at_least_sixty(self):
        here = os.path.dirname(os.path.abspath(__file__))
        configs = common.load_configs(os.path.join(here, "configs.json"))
        self.assertGreaterEqual(len(configs), 60)

    def test_an_unknown_trainer_flag_is_refused_naming_it(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump([{"name": "x", "trainer": {"max_epoch": 1}}], f)
        try:
            with self.assertRaisesRegex(ValueError, "max_epoch"):
                common.load_configs(f.name)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
