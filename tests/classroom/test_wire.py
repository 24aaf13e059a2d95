"""What crosses between a graded kernel and the grader (classroom.wire): values, as they are."""
import numpy as np

from classroom import wire


def test_an_array_of_either_byte_order_crosses_with_its_values():
    """A fresh read's big-endian decode_result arrived with its bytes read as native ones, so
    the grader blamed the values ("came back different") instead of the byte order."""
    for dtype in (">f8", "<f8", ">u4", "<i8", "float32"):
        a = np.array([1.5, 2.0, 3.25]).astype(dtype)
        b = wire.loads(wire.dumps(a))
        assert b.dtype.isnative and b.dtype.kind == a.dtype.kind and b.dtype.itemsize == a.dtype.itemsize
        assert np.array_equal(b, a), (dtype, b)


def test_tuples_sets_dicts_and_bytes_cross_as_plain_data():
    value = {"a": (1, 2.5), "b": {3, 4}, "c": b"\x00\x01", "d": [np.int64(7), None, "x"]}
    assert wire.loads(wire.dumps(value)) == {"a": [1, 2.5], "b": {3, 4}, "c": b"\x00\x01", "d": [7, None, "x"]}
