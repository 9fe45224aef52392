"""Configuration: socket path rules, environment overrides, bad input."""

import os

import pytest

from vramscope import _config
import vramscope


def test_default_socket_path_follows_the_go_side_rules():
    assert _config.default_socket_path({"VRAMSCOPE_SOCKET": "/x/y.sock",
                                        "XDG_RUNTIME_DIR": "/run/user/7"}) == "/x/y.sock"
    assert _config.default_socket_path({"XDG_RUNTIME_DIR": "/run/user/7"}) == \
        "/run/user/7/vramscope/vramscope.sock"
    assert _config.default_socket_path({"XDG_RUNTIME_DIR": ""}) == \
        "/tmp/vramscope-%d/vramscope.sock" % os.getuid()
    assert vramscope.default_socket_path is _config.default_socket_path


def test_environment_sets_defaults_and_arguments_win():
    # (VRAMSCOPE_RESET_PEAKS is retired: test_exact_peaks.py)
    env = {"VRAMSCOPE_SAMPLE_HZ": "10",
           "VRAMSCOPE_ACTIVATIONS_EVERY": "0", "VRAMSCOPE_SOCKET": "/e.sock"}
    c = _config.resolve(environ=env)
    assert (c.socket, c.sample_hz, c.reset_peaks, c.activations_every, c.disabled) == \
        ("/e.sock", 10.0, False, 0, False)
    c = _config.resolve(socket="/a.sock", sample_hz=5,
                        activations_every=7, environ=env)
    assert (c.socket, c.sample_hz, c.reset_peaks, c.activations_every) == \
        ("/a.sock", 5.0, False, 7)
    c = _config.resolve(environ={})
    assert (c.sample_hz, c.reset_peaks, c.activations_every, c.batch_size) == \
        (50.0, False, 100, None)
    assert _config.resolve(environ={"VRAMSCOPE_DISABLE": "1"}).disabled


@pytest.mark.parametrize("name,value", [("VRAMSCOPE_SAMPLE_HZ", "fast"),
                                        ("VRAMSCOPE_SAMPLE_HZ", "nan"),
                                        ("VRAMSCOPE_SAMPLE_HZ", "-3"),
                                        ("VRAMSCOPE_ACTIVATIONS_EVERY", "1.5")])
def test_a_bad_environment_value_warns_once_and_keeps_the_default(name, value):
    with pytest.warns(RuntimeWarning, match=name) as rec:
        c = _config.resolve(environ={name: value})
    assert len(rec) == 1 and "\n" not in str(rec[0].message)
    assert (c.sample_hz, c.activations_every, c.reset_peaks) == (50.0, 100, False)


@pytest.mark.parametrize("kw", [{"sample_hz": -1}, {"sample_hz": "x"}, {"sample_hz": 1e9},
                                {"activations_every": -2}, {"activations_every": 1.5},
                                {"batch_size": -1}, {"batch_size": True}])
def test_a_bad_argument_is_a_clear_value_error(kw):
    with pytest.raises(ValueError, match="vramscope: " + next(iter(kw))):
        _config.resolve(environ={}, **kw)
