"""A stop as native code hands it back to Python."""


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
