"""``decode_stack``'s argument records: one table (``decode_stack/layout.py``) for the Python side and the C++
kernel's ``layout.h``, which is written from it and must be current."""

from __future__ import annotations

from pathlib import Path

from deepseek_kernels.decode_stack import layout

HEADER = Path(layout.__file__).with_name("layout.h")


def test_the_committed_header_is_written_from_the_table():
    assert HEADER.read_text() == layout.header(), "run `python setup.py build_ext` in kernels/ (it writes layout.h)"


def test_the_records_are_dense_and_sized_as_the_op_checks():
    for enum in (layout.Weight, layout.Int, layout.Float, layout.Pool):
        assert [m.value for m in enum] == list(range(len(enum)))
    assert layout.WEIGHTS == len(layout.Weight) and layout.FLOATS == len(layout.Float)
    assert layout.POOLS == len(layout.Pool)
    assert layout.INTS == layout.Int.COPY_OFFSETS + layout.MAX_COPIES  # the copy offsets close the record


def test_every_field_is_in_the_header_under_its_cpp_name():
    text = HEADER.read_text()
    for enum, prefix in ((layout.Weight, "W_"), (layout.Int, "I_"), (layout.Float, "F_"), (layout.Pool, "P_")):
        for member in enum:
            assert f"{prefix}{member.name}," in text or f"{prefix}{member.name} }}" in text, member
