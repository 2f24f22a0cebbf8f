"""Ctrl-C while a checkpoint is written waits for the write to finish."""

import os
import signal

import pytest

from rlhp.experiment.stops import StopRequest, interrupts_held


@pytest.fixture(autouse=True)
def python_default_ctrl_c():
    """Python's own SIGINT handler for each test: a shell that starts the suite in the background hands it
    SIGINT ignored, and these tests are about what rlhp does to Python's default."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_ctrl_c_inside_the_block_is_raised_when_it_ends():
    finished = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            finished = True  # reached: the interrupt did not cut the block short
    assert finished
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_held_ctrl_c_becomes_a_stop_request_when_one_is_active():
    with StopRequest() as stop:
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            assert not stop
        assert stop.signal is signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_ctrl_c_no_interrupt():
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
