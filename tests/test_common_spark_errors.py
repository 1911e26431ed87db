"""--engine spark without pyspark or Java: one clear line, exit 2 (no Spark needed to run these)."""
from __future__ import annotations

import sys

from conftest import require_realdata
from mqtool.spark.session import require_java


def test_missing_java_is_one_line(run_cli, monkeypatch, tmp_path):
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    import mqtool.spark.session as S

    monkeypatch.setattr(S, "require_pyspark", lambda: None)
    monkeypatch.setattr(S, "_active_session", lambda: None)
    monkeypatch.setattr(S, "_running_context", lambda: None)      # a Spark test module's may still run
    code, out, err = run_cli("verify", "store", store, "--engine", "spark")
    assert code == 2 and err.count("\n") == 1 and "Java 17+" in err and "Traceback" not in err


def test_old_java_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    import pytest

    from mqtool.errors import UsageError

    with pytest.raises(UsageError, match="Java 17\\+.*Java 11"):
        require_java()


def test_missing_pyspark_is_one_line(run_cli, monkeypatch, tmp_path):
    store = require_realdata("rocketmq", "gen-4.9.7-clean", "store")
    monkeypatch.setitem(sys.modules, "pyspark", None)
    code, out, err = run_cli("export", store, "--to", tmp_path / "out", "--engine", "spark")
    assert code == 2 and "pip install 'mqtool[spark]'" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_java_version_from_the_release_file(monkeypatch, tmp_path):
    """A JDK's ``release`` file gives its version without starting a JVM (one less per cold run): a java that
    records being run is not run; an old version there is refused as ``java -version`` would be."""
    import pytest

    from mqtool.errors import UsageError

    fake = tmp_path / "bin" / "java"
    fake.parent.mkdir()
    ran = tmp_path / "ran"
    fake.write_text(f'#!/bin/sh\ntouch {ran}\necho \'openjdk version "21.0.1"\' >&2\n')
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    (tmp_path / "release").write_text('IMPLEMENTOR="Test"\nJAVA_VERSION="17.0.15"\n')
    assert require_java() == str(fake) and not ran.exists()
    (tmp_path / "release").write_text('JAVA_VERSION="11.0.2"\n')
    with pytest.raises(UsageError, match="Java 17\\+.*Java 11"):
        require_java()
    assert not ran.exists()
    (tmp_path / "release").unlink()             # no release file: java -version decides
    assert require_java() == str(fake) and ran.exists()
