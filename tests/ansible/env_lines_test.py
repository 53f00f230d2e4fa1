"""Unit tests of the role's expanse_env_lines module: its reading of daemon.env's logical
lines (docs/formats/env-file.md) and its refusals. Run by ctest as ansible.env_lines with
Debian's python3, which has Ansible's module_utils."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(HERE, "..", "..", "ansible", "roles", "expanse", "library",
                      "expanse_env_lines.py")

spec = importlib.util.spec_from_file_location("expanse_env_lines", MODULE)
env_lines = importlib.util.module_from_spec(spec)
spec.loader.exec_module(env_lines)

# An operator's file with what the format allows: CRLF and lone CR line breaks, a quoted value
# over three lines holding text that looks like an assignment, a backslash continuation, a
# Unicode line separator inside a value and a comment, and no final line break.
ODD = ("# operator's notes \u2028 still one line\r\n"
       "HTTPS_PROXY=http://proxy:3128\r\n"
       "EXPANSE_NOTE='first\nEXPANSE_PROFILING_ENABLE=1\nlast'\n"
       "EXPANSE_SITE=\"North \\\"A\\\"\nEXPANSE_LIVE_DETECTION=0\"\r"
       "LONG=part one \\\npart two\n"
       "  NO_PROXY = localhost,\u2028x\n"
       "EXPANSE_PROFILING_ENABLE=0")


class EntriesTest(unittest.TestCase):
    def test_pieces_join_back_to_the_text(self):
        for text in (ODD, "", "\n", "A=1", "# c\\\nB=2\n", "A=x\\\ny", "A=x\\\\\n"):
            self.assertEqual("".join(raw for _, raw in env_lines.entries(text)), text)

    def test_values_spanning_lines_are_one_entry(self):
        keys = [k for k, _ in env_lines.entries(ODD)]
        self.assertEqual(keys, [None, "HTTPS_PROXY", "EXPANSE_NOTE", "EXPANSE_SITE", "LONG",
                                "NO_PROXY", "EXPANSE_PROFILING_ENABLE"])


    def test_a_file_the_daemon_refuses_is_refused_here_too(self):
        # Rewriting around these would swallow or split every line after the broken value.
        for text, what in (("A=1\nB='x\nC=3\n", "line 2: unterminated single quote"),
                           ("A=\"x\\\"\nC=3\n", "line 1: unterminated double quote"),
                           ("A=1\nB=x\\\n", "line 2: the value of B ends in a line continuation"),
                           ("A=1\nB=x\\", "line 2: the value of B ends in a line continuation")):
            with self.assertRaises(env_lines.Malformed) as caught:
                env_lines.converge(text, {"C": "4"})
            self.assertIn(what, str(caught.exception))


class MaskedTest(unittest.TestCase):
    def test_secret_looking_values_are_hidden_and_the_rest_kept(self):
        text = ("HTTPS_PROXY=http://u:pw@proxy:3128\r\n"
                "EXPANSE_SITE=north\n"
                "https_proxy='http://u:pw@p\nx'\n"
                "EXPANSE_API_TOKEN=exp_at_x")
        self.assertEqual(env_lines.masked(text),
                         "HTTPS_PROXY=<hidden>\r\n"
                         "EXPANSE_SITE=north\n"
                         "https_proxy=<hidden>\n"
                         "EXPANSE_API_TOKEN=<hidden>")


class ConvergeTest(unittest.TestCase):
    def test_only_the_roles_keys_change(self):
        wanted = {"EXPANSE_PROFILING_ENABLE": "1", "EXPANSE_LIVE_DETECTION": "1",
                  "EXPANSE_SITE": None}
        after = env_lines.converge(ODD, wanted)
        self.assertEqual(after,
                         "# operator's notes \u2028 still one line\r\n"
                         "HTTPS_PROXY=http://proxy:3128\r\n"
                         "EXPANSE_NOTE='first\nEXPANSE_PROFILING_ENABLE=1\nlast'\n"
                         "LONG=part one \\\npart two\n"
                         "  NO_PROXY = localhost,\u2028x\n"
                         "EXPANSE_PROFILING_ENABLE=1\n"
                         "EXPANSE_LIVE_DETECTION=1\n")
        # A second run changes nothing.
        self.assertEqual(env_lines.converge(after, wanted), after)

    def test_unchanged_values_leave_the_text_alone(self):
        text = "A=1\r\nB='two\nlines'\n"
        self.assertEqual(env_lines.converge(text, {"C": None}), text)

    def test_values_that_need_quotes_are_quoted(self):
        self.assertEqual(env_lines.converge("", {"A": 'x "y" $HOME \\ `z`'}),
                         'A="x \\"y\\" \\$HOME \\\\ \\`z\\`"\n')


class ModuleRunTest(unittest.TestCase):
    def run_module(self, args):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
        try:
            done = subprocess.run([sys.executable, MODULE, f.name], capture_output=True,
                                  text=True, check=False)
        finally:
            os.unlink(f.name)
        return json.loads(done.stdout)

    def test_a_file_that_is_not_utf8_is_refused_untouched(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "daemon.env")
            with open(path, "wb") as f:
                f.write(b"A=\xff\xfe\n")
            out = self.run_module({"path": path, "lines": [{"key": "B", "value": "1"}]})
            self.assertTrue(out.get("failed"), out)
            self.assertIn("is not valid UTF-8 (byte 2)", out["msg"])
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"A=\xff\xfe\n")

    def test_a_line_break_in_a_value_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            out = self.run_module({"path": os.path.join(d, "daemon.env"),
                                   "lines": [{"key": "A", "value": "x\ny"}]})
            self.assertTrue(out.get("failed"), out)
            self.assertIn("has a line break", out["msg"])
            self.assertEqual(os.listdir(d), [])


if __name__ == "__main__":
    unittest.main()
