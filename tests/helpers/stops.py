"""A stop as native code hands it back to Python, and a test that hangs (the ``alarm``
fixture)."""


def native_error(stop: BaseException) -> SystemError:
    """What CPython makes of a stop raised while native code runs (TensorFlow
    building a model): a SystemError caused by it."""
    try:
        try:
            raise stop
        except BaseException as e:
            raise SystemError("<built-in function TFE_Py_FastPathExecute> returned a result "
                              "with an exception set") from e
    except SystemError as e:
        return e


# How long a test under the ``alarm`` fixture (tests/conftest.py) may run.
ALARM_S = 300


class Hung(BaseException):  # not an Exception: nothing on the way may swallow it
    """Raised by the ``alarm`` fixture in a test still running after ALARM_S seconds."""
