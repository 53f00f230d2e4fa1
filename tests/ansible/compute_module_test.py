"""Unit tests of the role's expanse_compute module: finding the sampler a job's Prolog left on a
worker no sampler install ran on, which `state: absent` must uninstall (and, once it is gone,
report unchanged). Run by ctest as ansible.compute_module with Debian's python3."""

import importlib.util
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "..", "..", "ansible", "roles", "expanse", "library",
                      "expanse_compute.py")

spec = importlib.util.spec_from_file_location("expanse_compute", MODULE)
compute = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compute)

OUR_UNIT = b"# Managed by `expanse compute install` (unit format 1).\n[Unit]\n"


class PrologSamplerTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        root = self.dir.name
        self.unit = os.path.join(root, "expanse-sampler.service")
        self.pid_file = os.path.join(root, "sampler.pid")
        self.proc = os.path.join(root, "proc")
        os.mkdir(self.proc)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, path, data):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def found(self):
        return compute.prolog_sampler(self.unit, self.pid_file, self.proc)

    def test_nothing_left_is_nothing_to_do(self):
        self.assertIsNone(self.found())

    def test_our_unit_is_found_and_an_operators_is_not(self):
        self.write(self.unit, OUR_UNIT)
        self.assertIn("unit a job's Prolog installed", self.found())
        self.write(self.unit, b"[Unit]\nDescription=the site's own\n")
        self.assertIsNone(self.found())

    def test_a_live_sampler_is_found_and_a_stale_pid_file_is_not(self):
        self.write(self.pid_file, b"4242 2049:1234:99:17000\n")
        self.assertIsNone(self.found(), "no such process")
        self.write(os.path.join(self.proc, "4242", "cmdline"),
                   b"/srv/expanse/bin/expanse-daemon\0--role\0sampler\0--hostname\0w1\0")
        self.assertIn("pid 4242", self.found())
        self.write(os.path.join(self.proc, "4242", "cmdline"), b"/usr/bin/python3\0job.py\0")
        self.assertIsNone(self.found(), "the pid was reused by another program")

    def test_a_fifo_or_a_link_for_a_pid_file_is_not_read(self):
        self.write(os.path.join(self.proc, "4242", "cmdline"), b"x\0--role\0sampler\0")
        os.mkfifo(self.pid_file)
        self.assertIsNone(self.found(), "a FIFO: not read, so no hang")
        os.unlink(self.pid_file)
        target = os.path.join(self.dir.name, "elsewhere")
        self.write(target, b"4242\n")
        os.symlink(target, self.pid_file)
        self.assertIsNone(self.found(), "a link: not followed")

    def test_a_damaged_pid_file_is_not_a_sampler(self):
        for text in (b"", b"not-a-pid\n", b"1 init\n"):
            self.write(self.pid_file, text)
            self.write(os.path.join(self.proc, "1", "cmdline"), b"x\0--role\0sampler\0")
            self.assertIsNone(self.found(), text)


class FakeModule:
    def __init__(self, **params):
        self.params = params

    def sha256(self, path):
        return ""


class RecordedSettingsTest(unittest.TestCase):
    """What the installer recorded against what the role asks for: a changed --cupti-variant or
    --bundled-pyspy is a reason to reinstall (it was not compared, so changing either in the
    inventory did nothing), and a state from an installer that did not record them reads as its
    defaults, not as a change."""

    def module(self, role, **changed):
        params = dict(role=role, shared_prefix="/nonexistent/prefix", user="slurm",
                      cupti_mode="auto", profiling_agent=True, cupti_variant="",
                      bundled_pyspy=True, systemd=True, sampler_bootstrap="", config="",
                      daemon_version="", daemon_binary="", patch_slurm_conf=False,
                      slurm_conf="")
        params.update(changed)
        return FakeModule(**params)

    def older_state(self, role):
        state = dict(compute.desired_settings(self.module(role)))
        del state["cupti_variant"]
        state.pop("bundled_pyspy", None)
        return state

    def test_an_older_state_with_the_defaults_is_no_change(self):
        for role in ("controller", "sampler"):
            module = self.module(role)
            self.assertEqual(compute.differences(module, self.older_state(role),
                                                 compute.desired_settings(module)), [], role)

    def test_a_changed_variant_or_bundled_pyspy_is_a_change(self):
        module = self.module("controller", cupti_variant="cuda1300", bundled_pyspy=False)
        diffs = compute.differences(module, self.older_state("controller"),
                                    compute.desired_settings(module))
        self.assertEqual(diffs, [("bundled_pyspy", True, False), ("cupti_variant", "", "cuda1300")])
        module = self.module("sampler", cupti_variant="cuda1300")
        diffs = compute.differences(module, self.older_state("sampler"),
                                    compute.desired_settings(module))
        self.assertEqual(diffs, [("cupti_variant", "", "cuda1300")])
        # Recorded as asked: nothing more to do.
        recorded = dict(compute.desired_settings(module))
        self.assertEqual(compute.differences(module, recorded, recorded), [])


if __name__ == "__main__":
    unittest.main()
