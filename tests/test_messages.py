from specperf.messages import one_line


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
