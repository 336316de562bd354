"""tilefuse.config: options from the environment. An empty variable means "not set" (the default),
for every option read from the environment; a value that does not parse is an error naming it."""

from __future__ import annotations

import importlib

import pytest

from tilefuse import config

# every option read from the environment: (variable, option, a value that sets it, what it parses to)
_ENV_OPTIONS = [
    ("TILEFUSE_FALLBACK_ON_ERROR", "fallback_on_error", "0", False),
    ("TILEFUSE_DEBUG_DIR", "debug_dir", "/tmp/tf_debug", "/tmp/tf_debug"),
    ("TILEFUSE_PERSISTENT_REDUCTION_THRESHOLD", "persistent_reduction_threshold", "1024", 1024),
    ("TILEFUSE_AUTOTUNE", "autotune", "off", False),
    ("TILEFUSE_AUTOTUNE_POINTWISE", "autotune_pointwise", "on", True),
    ("TILEFUSE_TINY_KERNEL_NUMEL", "tiny_kernel_numel", "0", 0),
    ("TILEFUSE_TILING", "tiling", "no", False),
    ("TILEFUSE_COMPILE_WORKERS", "compile_workers", "3", 3),
    ("TILEFUSE_COMPILE_POOL", "compile_pool", "thread", "thread"),
    ("TILEFUSE_SYMBOLIC_SHAPES", "symbolic_shapes", "false", False),
    ("TILEFUSE_GRAPH_CACHE", "graph_cache", "1", True),
    ("TILEFUSE_PAD_MM", "pad_mm", "0", False),
    ("TILEFUSE_CUDAGRAPHS", "cudagraphs", "on", True),
    ("TILEFUSE_REORDER_FOR_COMM_OVERLAP", "reorder_for_comm_overlap", "off", False),
]


@pytest.fixture
def reload_config(monkeypatch):
    """``load(**env)``: tilefuse.config re-read with those environment variables (and every other
    TILEFUSE_ option variable unset); the module is re-read from the real environment afterwards."""

    def load(**env):
        for var, *_ in _ENV_OPTIONS:
            monkeypatch.delenv(var, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        return importlib.reload(config)

    try:
        yield load
    finally:
        monkeypatch.undo()
        importlib.reload(config)


def test_empty_values_keep_the_defaults(reload_config):
    defaults = reload_config()
    want = {opt: getattr(defaults, opt) for _, opt, _, _ in _ENV_OPTIONS}
    for blank in ("", "  "):
        cfg = reload_config(**{var: blank for var, *_ in _ENV_OPTIONS})
        for _, opt, _, _ in _ENV_OPTIONS:
            assert getattr(cfg, opt) == want[opt], (opt, blank)
    assert want["pad_mm"] is True and want["fallback_on_error"] is True and want["debug_dir"] is None
    assert want["compile_pool"] == "process" and want["persistent_reduction_threshold"] == 4096


@pytest.mark.parametrize("var, opt, value, parsed", _ENV_OPTIONS)
def test_set_values_are_read(reload_config, var, opt, value, parsed):
    cfg = reload_config(**{var: value})
    assert getattr(cfg, opt) == parsed


def test_surrounding_blanks_are_dropped_and_the_pool_name_takes_any_case(reload_config, tmp_path):
    """Every value is read without surrounding blanks (otherwise a debug folder `` /x `` writes under
    a folder named with a leading blank), and the pool's name, like the booleans, in any case."""
    cfg = reload_config(TILEFUSE_DEBUG_DIR=f"  {tmp_path}  ", TILEFUSE_COMPILE_POOL=" Thread ")
    assert cfg.debug_dir == str(tmp_path) and cfg.compile_pool == "thread"


@pytest.mark.parametrize(
    "var, value",
    [
        ("TILEFUSE_PAD_MM", "maybe"),
        ("TILEFUSE_COMPILE_WORKERS", "four"),
        ("TILEFUSE_COMPILE_POOL", "fibers"),
        ("TILEFUSE_PERSISTENT_REDUCTION_THRESHOLD", "0"),
    ],
)
def test_values_that_do_not_parse_are_errors_naming_the_variable(reload_config, var, value):
    with pytest.raises(ValueError, match=var):
        reload_config(**{var: value})


def test_helpers_directly(monkeypatch):
    for v in ("", " ", "\t"):
        monkeypatch.setenv("TILEFUSE_TEST_OPT", v)
        assert config._env_value("TILEFUSE_TEST_OPT") is None
        assert config._env_bool("TILEFUSE_TEST_OPT", True) is True
        assert config._env_bool("TILEFUSE_TEST_OPT", False) is False
        assert config._env_int("TILEFUSE_TEST_OPT", 7) == 7
    monkeypatch.setenv("TILEFUSE_TEST_OPT", " Off ")
    assert config._env_bool("TILEFUSE_TEST_OPT", True) is False
    monkeypatch.setenv("TILEFUSE_TEST_OPT", " 12 ")
    assert config._env_int("TILEFUSE_TEST_OPT", 7) == 12
    monkeypatch.delenv("TILEFUSE_TEST_OPT")
    assert config._env_value("TILEFUSE_TEST_OPT") is None and config._env_bool("TILEFUSE_TEST_OPT", True) is True


def test_blank_debug_dir_option_means_off():
    """options={"debug_dir": "  "} is off, as an empty TILEFUSE_DEBUG_DIR (no directory named
    by blanks is created)."""
    assert config.validate({"debug_dir": "   "}) == {"debug_dir": None}
    assert config.validate({"debug_dir": ""}) == {"debug_dir": None}
    with config.patch(debug_dir="  "):
        assert config.debug_dir is None


def test_debug_dir_that_is_a_file_is_refused(tmp_path, reload_config):
    """A debug_dir naming an existing file is a ValueError when given (option or environment
    variable), not a compile failure later (which would also discard a good graph cache
    entry)."""
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(ValueError, match="'debug_dir' must be a directory"):
        config.validate({"debug_dir": str(f)})
    with pytest.raises(ValueError, match="TILEFUSE_DEBUG_DIR"):
        reload_config(TILEFUSE_DEBUG_DIR=str(f))
    assert config.validate({"debug_dir": str(tmp_path / "new")}) == {"debug_dir": str(tmp_path / "new")}


def test_process_wide_option_is_refused_per_compile_and_kept_out_of_the_graph_key():
    import torch

    from tilefuse.runtime import graph_cache

    # in place at the backend lookup, before torch.compile's options are read: an error naming
    # the environment variable, not an option silently ignored
    with pytest.raises(ValueError, match="TILEFUSE_TRITON_KEY_FROM_STAT"):
        config.validate({"triton_key_from_stat": False})
    with pytest.raises(Exception, match="TILEFUSE_TRITON_KEY_FROM_STAT"):
        torch.compile(
            lambda x: x + 1, backend="tilefuse", options={"triton_key_from_stat": False, "fallback_on_error": True}
        )(torch.ones(3))
    with pytest.raises(ValueError) as ei:
        config.validate({"no_such_option": 1})
    assert "triton_key_from_stat" not in str(ei.value) and "warmup" in str(ei.value)
    with config.patch(triton_key_from_stat=False):  # tests may still set it
        assert config.triton_key_from_stat is False
    assert config.triton_key_from_stat is True
    # it changes no generated code: not part of the graph cache key
    assert "triton_key_from_stat" in graph_cache._KEY_EXCLUDED_OPTIONS


def test_a_bool_option_takes_numpys_bool_and_refuses_other_types_naming_them():
    """``np.bool_`` (a comparison of arrays) is stored as a Python bool, as int options take numpy
    integers; ints, strings and tensors are refused, the error naming a non-builtin type."""
    np = pytest.importorskip("numpy")
    import torch

    from tilefuse import config

    got = config.validate({"pause_gc": np.bool_(False), "tiling": (np.arange(3) < 5).all()})
    assert got == {"pause_gc": False, "tiling": True} and all(type(v) is bool for v in got.values())
    with pytest.raises(TypeError, match=r"'pause_gc' must be True or False, got torch\.Tensor "):
        config.validate({"pause_gc": torch.tensor(True)})
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match="'pause_gc' must be True or False"):
            config.validate({"pause_gc": bad})


def test_integer_options_take_any_integral_type_as_a_python_int():
    """An int option takes a numpy integer (``np.int64(100)``, e.g. computed from an array's size)
    and stores it as a Python int; floats, strings, bools, tensors and numpy bools stay refused."""
    np = pytest.importorskip("numpy")
    import torch

    got = config.validate({"tiny_kernel_numel": np.int64(100), "compile_workers": np.uint8(3)})
    assert got == {"tiny_kernel_numel": 100, "compile_workers": 3}
    assert all(type(v) is int for v in got.values())
    with config.patch(tiny_kernel_numel=np.int32(7)):
        assert config.tiny_kernel_numel == 7 and type(config.tiny_kernel_numel) is int
    for bad in (1.5, 65536.0, "65536", True, np.bool_(True), torch.tensor(5), None):
        with pytest.raises(TypeError, match="'tiny_kernel_numel' must be an int"):
            config.validate({"tiny_kernel_numel": bad})
    with pytest.raises(ValueError, match="'tiny_kernel_numel' must be >= 0, got -1"):
        config.validate({"tiny_kernel_numel": np.int64(-1)})


def test_choice_options_take_any_case_as_their_environment_variable_does():
    """``compile_pool`` given as an option is read as its environment variable is (any case,
    blanks stripped); an unknown choice stays a ValueError listing the choices."""
    assert config.validate({"compile_pool": "Thread"}) == {"compile_pool": "thread"}
    assert config.validate({"compile_pool": " PROCESS "}) == {"compile_pool": "process"}
    with pytest.raises(ValueError, match=r"must be one of \('process', 'thread'\), got 'fork'"):
        config.validate({"compile_pool": "Fork"})


# the runtime's tunables: (variable, config attribute, default)
_RUNTIME_TUNABLES = [
    ("TILEFUSE_AUTOTUNE_WARMUP_MS", "AUTOTUNE_WARMUP_MS", 1),
    ("TILEFUSE_AUTOTUNE_REP_MS", "AUTOTUNE_REP_MS", 4),
    ("TILEFUSE_FORKED_COMPILE_TIMEOUT_S", "FORKED_COMPILE_TIMEOUT_S", 300.0),
    ("TILEFUSE_WARMUP_SWITCH_INTERVAL_S", "WARMUP_SWITCH_INTERVAL_S", 2e-4),
]


@pytest.mark.parametrize("var, name, default", _RUNTIME_TUNABLES)
def test_runtime_tunables_take_positive_numbers_from_the_environment(reload_config, monkeypatch, var, name, default):
    """Unset or blank: the default; a positive number: that number; anything else an error naming
    the variable. They are not options (``patch`` refuses them)."""
    monkeypatch.delenv(var, raising=False)
    assert getattr(reload_config(), name) == default and var in config.ENVIRONMENT_VARIABLES
    assert getattr(reload_config(**{var: "  "}), name) == default
    assert getattr(reload_config(**{var: " 2.5 "}), name) == 2.5
    for bad in ("fast", "0", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match=var):
            reload_config(**{var: bad})
    with pytest.raises(ValueError, match="unknown tilefuse option"):
        with config.patch(**{name: default}):
            pass


def test_every_option_and_environment_variable_is_in_the_configuration_docs():
    # docs/configuration.md is where a user looks for them: each option (process-wide ones
    # included) and each TILEFUSE_ variable config.py reads is named there
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "configuration.md").read_text()
    source = (root / "python" / "tilefuse" / "config.py").read_text()
    missing = [o for o in config._OPTIONS if f"`{o}`" not in doc]
    read = set(re.findall(r'"(TILEFUSE_[A-Z0-9_]*[A-Z0-9])"', source))  # whole names, not prefixes
    missing += [v for v in sorted(read) if v not in doc]
    assert not missing, missing
