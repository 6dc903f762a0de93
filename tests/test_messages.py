import pytest

from specperf.messages import one_line, shown_url


def test_one_line_names_the_root_cause_on_one_line():
    try:
        try:
            raise OSError("disk\n  full")
        except OSError as inner:
            raise RuntimeError("engine failed") from inner
    except RuntimeError as err:
        assert one_line(err) == "OSError: disk full"
    assert one_line(ValueError("x" * 400), limit=20) == "ValueError: xxxxx..."
    assert one_line(KeyError()) == "KeyError: KeyError()"


def test_field_paths_leave_out_what_names_no_field():
    from specperf.messages import field_path

    assert field_path(("cells", 0, "batch_sizes", 1)) == "cells[0].batch_sizes[1]"
    assert field_path(("metrics", "speedup", "value", "float")) == "metrics.speedup.value"
    assert field_path(("models", "[key]")) == "models"


@pytest.mark.parametrize(
    "url, shown",
    [
        (
            "postgresql://me:hunter2@127.0.0.1:1/h?sslpassword=s3cret&password=p4ss&sslmode=require",
            "postgresql://me:***@127.0.0.1:1/h?sslpassword=***&password=***&sslmode=require",
        ),
        ("sqlite+pysqlcipher://:KEY@//x/y.db", "sqlite+pysqlcipher://:***@//x/y.db"),
        ("postgresql://me:p@ss@h/db", "postgresql://me:***@h/db"),  # an @ in the password: to the last @
        ("http://h:8000/v1?api_key=zz&model=m", "http://h:8000/v1?api_key=***&model=m"),
        ("sqlite:////tmp/a@b/history.sqlite", "sqlite:////tmp/a@b/history.sqlite"),  # no password: as written
        ("postgresql://specperf@127.0.0.1:1/history", "postgresql://specperf@127.0.0.1:1/history"),
    ],
)
def test_a_url_is_shown_without_its_secrets(url, shown):
    assert shown_url(url) == shown
