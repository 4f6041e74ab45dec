"""#26: the soak from Python, briefly: a seeded mix of loaders, knobs,
resumes and broken-off epochs, every digest equal to the epoch read with no
workers, nothing left behind (threads, descriptors, child processes)."""

import adapt.soak


def test_a_short_soak_finds_nothing_wrong(tmp_path):
    report = adapt.soak.run(seconds=15, seed=11, root=str(tmp_path))
    assert not report["failed"], report
    assert report["epochs"] >= 10, report
    assert report["resumes"] > 0 and report["breaks"] > 0, report


def test_the_soak_sees_a_wrong_epoch(tmp_path, monkeypatch):
    # An epoch that loses its batches after a resume must count as a
    # mismatch: the check is live.
    real = adapt.soak._Soak.epoch

    def lossy(self, plan):
        if plan["resume"] is None:
            return real(self, plan)
        return adapt.soak._digest([])

    monkeypatch.setattr(adapt.soak._Soak, "epoch", lossy)
    report = adapt.soak.run(seconds=3, seed=11, root=str(tmp_path))
    assert report["digest_mismatches"] > 0 and report["failed"], report
