"""adapt.torch.tune's Python objective path, without torch: a fake loader
class whose time per configuration is known drives the Rust tuner."""

import json
import math
import time

import pytest

import adapt
import adapt.torch as at


class Timed:
    """A DataLoader stand-in: each batch sleeps a time that is least at 2
    workers and prefetch 8 (falling off by 40% and 30% a step), and 3
    workers fail as a broken worker would. It records what it was built
    with."""

    built = []

    def __init__(self, data, batch_size, num_workers, prefetch_factor, pin_memory,
                 persistent_workers, shuffle=False, **kwargs):
        Timed.built.append(dict(num_workers=num_workers, prefetch_factor=prefetch_factor,
                                pin_memory=pin_memory, persistent_workers=persistent_workers,
                                samples=len(data), shuffle=shuffle, **kwargs))
        if num_workers == 0:
            assert prefetch_factor is None and not persistent_workers, "PyTorch's rule"
        if num_workers == 3:
            raise RuntimeError("DataLoader worker (pid 4242) exited unexpectedly")
        self.batches = math.ceil(len(data) / batch_size)
        p = 0 if prefetch_factor is None else abs(math.log2(prefetch_factor) - 3)
        self.cost = 0.0004 * (1 + 0.4 * abs(num_workers - 2)) * (1 + 0.3 * p)

    def __iter__(self):
        for i in range(self.batches):
            time.sleep(self.cost)
            yield i


def tune(**kw):
    Timed.built = []
    args = dict(dataloader=Timed, trial_seconds=0.15, trial_samples=2048, final_repeats=1,
                noise_repeats=3, progress=False)
    args.update(kw)
    return at.tune(list(range(40_000)), 32, **args)


def test_the_search_finds_the_known_optimum_on_trials_sized_by_time():
    lines = []
    picks = tune(progress=lines.append)
    k = picks[32]
    assert (k["num_workers"], k["prefetch_factor"]) == (2, 8), at.tune.last_report["runs"][0]
    report = at.tune.last_report
    run = report["runs"][0]
    # Sized by time: grown from 2,048 samples until a trial of the
    # recommended configuration lasts the 0.15 s asked for.
    assert run["trial"]["samples"] > 2048
    sized = [b for b in Timed.built if b["samples"] == run["trial"]["samples"]]
    assert len(sized) > 10, "the search's trials all have the sized length"
    assert all(b["shuffle"] for b in Timed.built), "trials shuffle their subset"
    # The failing configuration is a failed trial named in the report.
    failed = [t for t in run["trace"] if t["config"]["num_workers"] == 3]
    assert failed and all("exited unexpectedly" in t["note"] for t in failed)
    assert all(t["seconds"] is None for t in failed)
    # Table 1's rows, and a line per trial with the best so far.
    assert run["speedup_vs_default"] > 1.0
    assert report["dataset"]["kind"] == "torch" and report["dataset"]["samples"] == 40_000
    assert any("best" in line and "trial" in line for line in lines)
    assert any("final comparison" in line for line in lines)


def test_the_picks_are_dataloader_kwargs_and_the_report_plots(tmp_path):
    picks = tune(strategy="avl", noise_repeats=0, trial_seconds=None, trial_samples=1024)
    kwargs = picks[32]
    assert set(kwargs) == {"num_workers", "prefetch_factor", "pin_memory", "persistent_workers"}
    assert kwargs["pin_memory"] is False, "no CUDA here: pin_memory stays off"
    assert sum(1 for _ in Timed(list(range(64)), 32, **kwargs)) == 2
    adapt.plot(at.tune.last_report, tmp_path / "search.svg")
    assert (tmp_path / "search.svg").read_text().lstrip().startswith("<svg")


def test_the_report_page_has_the_comparison_and_says_why_it_has_no_stages(tmp_path):
    tune(noise_repeats=2, trial_seconds=None, trial_samples=1024, report=tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    run = at.tune.last_report["runs"][0]
    assert page.startswith("<!DOCTYPE html>") and f"{run['adapt']['seconds']:.3f}" in page
    assert "PyTorch&#x27;s DataLoader records no stages" in page or \
        "PyTorch's DataLoader records no stages" in page
    assert "src=" not in page and "href=" not in page


def test_other_dataloader_arguments_reach_every_trial_and_tuned_knobs_are_refused():
    tune(strategy="avl", noise_repeats=0, trial_seconds=None, trial_samples=512, drop_last=True,
         timeout=30, collate_fn=list)
    assert all(b["drop_last"] is True and b["timeout"] == 30 and b["collate_fn"] is list
               for b in Timed.built)
    with pytest.raises(adapt.ConfigValueError, match="num_workers is what adapt.torch.tune tunes"):
        tune(num_workers=2)
    with pytest.raises(adapt.ConfigValueError, match="batch_sampler"):
        tune(batch_sampler=[[0, 1]])
    with pytest.raises(adapt.ConfigValueError, match="step .* or step_ms"):
        tune(step=print, step_ms=1.0)


def test_a_ctrl_c_in_a_trial_ends_the_run_and_is_raised_again():
    calls = []

    class Interrupted(Timed):
        def __iter__(self):
            calls.append(1)
            if len(calls) == 4:
                raise KeyboardInterrupt
            yield from super().__iter__()

    with pytest.raises(KeyboardInterrupt):
        tune(dataloader=Interrupted)
    # Each trial iterates twice (two epochs); nothing ran after the stop.
    assert len(calls) == 4


def test_the_step_is_called_on_every_batch_of_timed_trials_and_not_in_the_warm_up():
    seen = []
    tune(step=seen.append, strategy="avl", noise_repeats=0, trial_seconds=None,
         trial_samples=320, final_repeats=1)
    warm_up = Timed.built[0]
    assert warm_up["num_workers"] == 0
    timed_batches = sum(2 * math.ceil(b["samples"] / 32) for b in Timed.built[1:]
                        if b["num_workers"] != 3)
    assert len(seen) == timed_batches


def test_the_profile_keeps_the_picks_per_dataset_identity_and_batch_size(tmp_path):
    path = tmp_path / "profile.json"
    picks = tune(strategy="avl", noise_repeats=0, trial_seconds=None, trial_samples=512,
                 profile=path, key="cifar-train")
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == 1
    assert entries[0]["key"]["dataset"] == "torch:builtins.list(len=40000)[cifar-train]"
    knobs, reason = at._saved(path, list(range(40_000)), "cifar-train", 32)
    assert reason is None and knobs == picks[32]
    # Another key, length or batch size has no entry, and says so.
    for data, key, batch in ((list(range(40_000)), "other", 32), (list(range(10)), "cifar-train", 32),
                             (list(range(40_000)), "cifar-train", 64)):
        knobs, reason = at._saved(path, data, key, batch)
        assert knobs == {} and "no entry" in reason
    # A second tune reuses the entry: no search runs.
    Timed.built = []
    at.tune(list(range(40_000)), 32, dataloader=Timed, profile=path, key="cifar-train",
            final_repeats=1, noise_repeats=0, progress=False)
    assert at.tune.last_report["runs"][0]["adapt_picked_by"] == "profile"


def test_the_spaces_list_their_configurations_as_kwargs():
    paper = at.space("paper")
    assert len(paper) == 1584, "33 worker counts x 12 prefetch factors x 2 x 2"
    assert sorted({k["num_workers"] for k in paper}) == [1] + list(range(2, 65, 2))
    assert {k["prefetch_factor"] for k in paper} == {2 ** i for i in range(12)}
    machine = at.space("machine")
    assert {"num_workers": 0, "prefetch_factor": None, "pin_memory": False,
            "persistent_workers": False} in machine
    with pytest.raises(adapt.ConfigError, match="machine or paper"):
        at.space("huge")


def test_both_runs_the_other_descent_with_the_same_race_and_says_which():
    tune(strategy="both", avl="plain", noise_repeats=0, trial_seconds=None, trial_samples=512,
         final_repeats=1)
    report = at.tune.last_report
    run = report["runs"][0]
    assert report["strategy"]["avl"] == "plain" and run["other_avl"] == "refined"
    assert run["other"] is not None and run["search"]["avl_other"]["trials"] > 0
    assert any(t["strategy"] == "avl-refined" for t in run["trace"])
    tune(strategy="avl", race=False, noise_repeats=0, trial_seconds=None, trial_samples=512,
         final_repeats=1)
    assert at.tune.last_report["strategy"]["noise_threshold"] == 0
    with pytest.raises(adapt.ConfigError, match="plain or refined"):
        tune(avl="greedy")


def test_clearly_losing_trials_are_cut_short_and_pruning_can_be_turned_off():
    class Sized(Timed):
        """A loader that says its length, as torch's does: trials of it
        can stop early."""

        def __len__(self):
            return self.batches

    picks = tune(dataloader=Sized)
    assert (picks[32]["num_workers"], picks[32]["prefetch_factor"]) == (2, 8)
    run = at.tune.last_report["runs"][0]
    assert at.tune.last_report["strategy"]["prune"] is True
    cut = [t for t in run["trace"] if "cut short" in (t.get("note") or "")]
    assert cut, "the slowest configurations stop early"
    assert all(t["seconds"] > 0 for t in cut), "with their whole time estimated"
    skipped = [t for t in run["trace"] if (t.get("note") or "").startswith("skipped (pruned)")]
    assert all(t["seconds"] is None for t in skipped)
    tune(dataloader=Sized, prune=False)
    run = at.tune.last_report["runs"][0]
    assert at.tune.last_report["strategy"]["prune"] is False
    assert not any("cut short" in (t.get("note") or "") or "skipped" in (t.get("note") or "")
                   for t in run["trace"])
