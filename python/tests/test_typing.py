"""The package is typed (`py.typed` and stubs): a user's script over the
public API passes `mypy --strict`, and a misuse of it is caught. Skipped
where mypy is not installed."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy is not installed: typing not checked here")

SCRIPT = """
    import adapt
    import adapt.accelerate
    from adapt import datasets


    def train(root: str) -> int:
        data: datasets.CIFAR10 = datasets.CIFAR10(root)
        loader = adapt.DataLoader(data, batch_size=128, shuffle=True, num_workers=2,
                                  distributed="auto", output="u8",
                                  transform="random_crop(32,padding=4),hflip")
        seen = 0
        for epoch in range(2):
            loader.sampler.set_epoch(epoch)
            for images, labels in loader:
                seen += len(labels)
        state: dict[str, object] = loader.state_dict()
        loader.load_state_dict(state)
        stats = loader.stats()
        picks: dict[int, dict[str, object]] = adapt.tune(data, batch_size=(64, 128), progress=False)
        again = adapt.DataLoader.from_profile("profile.json", data, batch_size=128)
        hf = datasets.HuggingFace("saved", image="img", label=None)
        names: list[str] = hf.classes
        try:
            adapt.DataLoader(data, distributed=(0, 2)).close()
        except adapt.ConfigValueError as e:
            print(e, stats, picks, again, names)
        return seen + len(loader)
"""


def mypy(tmp_path, text):
    script = tmp_path / "user.py"
    script.write_text(textwrap.dedent(text))
    env = {**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-error-summary",
                           str(script)], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_a_users_script_passes_mypy_strict(tmp_path):
    run = mypy(tmp_path, SCRIPT)
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_misuse_is_caught(tmp_path):
    run = mypy(tmp_path, """
        import adapt
        loader = adapt.DataLoader(adapt.datasets.CIFAR10("x"), batch_size="128", output="f16")
        loader.set_epoch("one")
    """)
    assert run.returncode == 1, run.stdout
    for arg in ('"batch_size"', '"output"', '"set_epoch"'):
        assert arg in run.stdout, run.stdout
