"""Each study's search, in an Optuna journal: what to try next, what was found.

One journal file holds every study of a sweep folder (Optuna's
``JournalStorage`` with its file backend, safe for several processes on one
file system). A study's budget is its trials that ran (completed, or failed as
a run); a trial the sweep asked for but never launched (a kill between the two)
is closed as failed and not counted. A trial in flight when the sweep stopped
is still ``RUNNING`` in the journal: :meth:`Search.next_trial` hands it out
again with its values, so its job resumes in its own folder.

Proposals are reproducible: the sampler of the k-th trial of a study is seeded
from ``tune.sampler_seed`` and k, so the same seed proposes the same values
given the same results, whether or not the search was stopped and resumed
between them, and every study draws the same random start-up values (common
random numbers across variants).
"""
from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ablation.config.tuning import Protocol, rounded

log = logging.getLogger(__name__)

VALUES_ATTR = "values"  # a launched trial's values, as trained (rounded)


class Search:
    """The studies of one sweep folder, in the journal at ``journal``."""

    def __init__(self, journal: Path, protocol: Protocol):
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.protocol = protocol
        self.storage = JournalStorage(JournalFileBackend(str(journal)))

    @classmethod
    def existing(cls, journal: Path, protocol: Protocol) -> Search | None:
        """The search in ``journal`` to read, or None where there is no journal (or
        something other than a regular file stands there: never opened). Opening an
        existing journal writes nothing."""
        from ablation.files import is_regular

        return cls(journal, protocol) if is_regular(journal) else None

    def progress(self, study_id: str) -> tuple[int, tuple[int, dict[str, float], float] | None]:
        """(trials used, best trial as :meth:`best` gives it) of a study, read only:
        a study not in the journal has used none and has no best."""
        try:
            study = self._optuna.load_study(study_name=study_id, storage=self.storage)
        except KeyError:
            return 0, None
        used = self.used(study_id)  # the study exists: loading it again writes nothing
        try:
            best = study.best_trial
        except ValueError:  # no completed trial
            return used, None
        return used, (best.number, dict(best.user_attrs[VALUES_ATTR]), float(best.value))

    def _study(self, study_id: str, slot: int = 0):
        optuna = self._optuna
        seed = int(np.random.SeedSequence([self.protocol.sampler_seed, slot]).generate_state(1)[0])
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=max(1, math.ceil(self.protocol.trials / 2)))
        try:  # loading writes nothing; creating a study that exists would log an attempt
            return optuna.load_study(study_name=study_id, storage=self.storage, sampler=sampler)
        except KeyError:
            return optuna.create_study(study_name=study_id, storage=self.storage,
                                       direction="maximize", sampler=sampler, load_if_exists=True)

    def _trials(self, study_id: str):
        return self._study(study_id).get_trials(deepcopy=False)

    def used(self, study_id: str) -> int:
        """Trials of the study's budget that ran to an end (completed or failed)."""
        states = self._optuna.trial.TrialState
        return sum(1 for t in self._trials(study_id)
                   if t.state in (states.COMPLETE, states.FAIL) and VALUES_ATTR in t.user_attrs)

    def next_trial(self, study_id: str, ranges: dict[str, tuple[float, float]]
                   ) -> tuple[int, dict[str, float]]:
        """(number, values) of the study's next trial to run: one left in flight
        by a stopped sweep, else a new proposal within ``ranges``."""
        states = self._optuna.trial.TrialState
        study = self._study(study_id)
        for trial in study.get_trials(deepcopy=False, states=(states.RUNNING,)):
            if VALUES_ATTR in trial.user_attrs:
                return trial.number, dict(trial.user_attrs[VALUES_ATTR])
            study.tell(trial.number, state=states.FAIL)  # asked, never launched
        study = self._study(study_id, slot=self.used(study_id))
        from optuna.distributions import FloatDistribution

        trial = study.ask({key: FloatDistribution(low, high, log=True)
                           for key, (low, high) in ranges.items()})
        values = {key: rounded(value) for key, value in trial.params.items()}
        trial.set_user_attr(VALUES_ATTR, values)
        return trial.number, values

    def tell(self, study_id: str, number: int, value: float | None) -> None:
        """The trial's objective; ``None``: the run failed (it still counts)."""
        states = self._optuna.trial.TrialState
        study = self._study(study_id)
        if value is None:
            study.tell(number, state=states.FAIL)
        else:
            study.tell(number, value)

    def best(self, study_id: str) -> tuple[int, dict[str, float], float] | None:
        """(number, values, objective) of the study's best completed trial."""
        try:
            trial = self._study(study_id).best_trial
        except ValueError:  # no completed trial
            return None
        return trial.number, dict(trial.user_attrs[VALUES_ATTR]), float(trial.value)
