"""`services.common.heap`: glibc takes the thresholds; elsewhere nothing is set."""

import sys

import pytest

from services.common import heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_glibc_takes_the_thresholds():
    assert heap.keep_freed_heap() is True


def test_other_platforms_are_left_alone(monkeypatch):
    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert heap.keep_freed_heap() is False
