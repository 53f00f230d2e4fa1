"""The role's CLI tasks under the real ansible-playbook (Debian's), against localhost: where
the CLI is looked for by default for each install way, the refusal of a path the installer
cannot produce, and PREFIX handed to the control plane's installer so that it installs the CLI
at expanse_cli_path. Run by ctest as ansible.role_cli."""

import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROLE = os.path.normpath(os.path.join(HERE, "..", "..", "ansible", "roles", "expanse"))


def play(tmp, body, *extra):
    """Runs a one-play playbook on localhost; (exit code, output)."""
    path = os.path.join(tmp, "play.yml")
    with open(path, "w", encoding="utf-8") as f:
        f.write("- hosts: localhost\n  connection: local\n  gather_facts: false\n" + body)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "ansible-local"),
               ANSIBLE_REMOTE_TEMP=os.path.join(tmp, "ansible-remote"))
    run = subprocess.run(["ansible-playbook", "-i", "localhost,", path, *extra], env=env,
                         capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + run.stderr


class RoleCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="role-cli.")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_the_default_path_follows_the_install_way(self):
        body = ("  vars_files: [%s/defaults/main.yml]\n  tasks:\n"
                "    - ansible.builtin.debug: {msg: 'cli at {{ expanse_cli_path }}'}\n" % ROLE)
        for way, path in (("package", "/usr/bin/expanse"), ("installer", "/usr/local/bin/expanse"),
                          ("copy", "/usr/local/bin/expanse")):
            rc, out = play(self.tmp, body, "-e", "expanse_cli_install=" + way)
            self.assertEqual(rc, 0, out)
            self.assertIn("cli at " + path, out, way)

    def test_the_installer_gets_its_prefix_from_the_path(self):
        # A stand-in for the control plane's /install script: it installs where PREFIX says.
        script = os.path.join(self.tmp, "install.sh")
        with open(script, "w", encoding="utf-8") as f:
            f.write('#!/bin/sh\nset -e\n: "${PREFIX:?no PREFIX given}"\nmkdir -p "$PREFIX/bin"\n'
                    'printf "#!/bin/sh\\n" >"$PREFIX/bin/expanse"\n')
        cli = os.path.join(self.tmp, "site", "bin", "expanse")
        body = ("  vars:\n    expanse_cli_install: installer\n    expanse__network_env: {}\n"
                "    expanse_control_plane: https://cp.example\n"
                "    expanse_cli_installer_url: file://%s\n"
                "  tasks:\n    - ansible.builtin.include_tasks: %s/tasks/cli.yml\n"
                % (script, ROLE))
        rc, out = play(self.tmp, body, "-e", "expanse_cli_path=" + cli)
        self.assertEqual(rc, 0, out)
        self.assertTrue(os.path.isfile(cli), out)
        rc, out = play(self.tmp, body, "-e", "expanse_cli_path=" + cli)
        self.assertEqual(rc, 0, out)
        self.assertIn("changed=0", out)  # there already: not run again

        rc, out = play(self.tmp, body, "-e", "expanse_cli_path=" + os.path.join(self.tmp, "x"))
        self.assertNotEqual(rc, 0, out)
        self.assertIn("so the path must end in /bin/expanse", out)


if __name__ == "__main__":
    unittest.main()
