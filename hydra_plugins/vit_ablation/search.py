"""Each study's search, in an Optuna journal: what to try next, what was found.

One journal file (Optuna's ``JournalStorage``, safe for several processes) holds
every study of a sweep folder. A study's budget is its trials that ran; a trial
asked for but never launched (a kill between the two) is closed as failed and not
counted, and one in flight when the sweep stopped is handed out again
(:meth:`Search.next_trial`), so its job resumes in its own folder.

The k-th trial's sampler is seeded from ``tune.sampler_seed`` and k, so proposals
are the same whether or not the search was stopped and resumed, and every study
draws the same start-up values. A trial whose journal entry cannot be believed
(:func:`trial_problem`) is left out, with one warning.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ablation.config.tuning import SIGNIFICANT_DIGITS, Protocol, rounded

log = logging.getLogger(__name__)

VALUES_ATTR = "values"  # a launched trial's values, as trained (rounded)
# A value as proposed is rounded to a few significant digits, so it may sit just
# outside its range: by half a unit in the last digit kept, at most this fraction of it.
ROUNDING = 10.0 ** (1 - SIGNIFICANT_DIGITS) / 2

Ranges = Mapping[str, tuple[float, float]]


class DamagedJournal(ValueError):
    """The search journal cannot be read as Optuna's journal."""


def trial_problem(trial, ranges: Ranges) -> str | None:
    """Why ``trial``'s journal entry is not to be believed, or None: its values
    must name exactly the searched keys, each a finite number in its range, and a
    completed trial's score must be a finite fraction in [0, 1]."""
    values = trial.user_attrs.get(VALUES_ATTR)
    if not isinstance(values, dict) or set(values) != set(ranges):
        return f"its values name {sorted(values) if isinstance(values, dict) else values!r}, " \
               f"not the searched {sorted(ranges)}"
    for key, value in values.items():
        low, high = ranges[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not low * (1 - ROUNDING) <= value <= high * (1 + ROUNDING):
            return f"{key}={value!r} is outside the searched range [{low:.3g}, {high:.3g}]"
    from optuna.trial import TrialState

    score = trial.value
    if trial.state == TrialState.COMPLETE and not (
            isinstance(score, (int, float)) and 0 <= score <= 1):
        return f"its score {score!r} is not a fraction in [0, 1]"
    return None


class Search:
    """The studies of one sweep folder, in the journal at ``journal``."""

    def __init__(self, journal: Path, protocol: Protocol):
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.protocol, self.journal, self._warned = protocol, journal, set()
        try:
            self.storage = JournalStorage(JournalFileBackend(str(journal)))
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # JSON, UTF-8, layout
            raise DamagedJournal(
                f"the search journal {journal} cannot be read ({type(e).__name__}: "
                f"{str(e).splitlines()[0] if str(e) else 'damaged'}): move it aside to start "
                f"this sweep's search over") from None

    @classmethod
    def existing(cls, journal: Path, protocol: Protocol) -> Search | None:
        """The search in ``journal`` to read, or None where there is no journal (or
        something other than a regular file stands there: never opened). Opening an
        existing journal writes nothing."""
        from ablation.files import is_regular

        return cls(journal, protocol) if is_regular(journal) else None

    def progress(self, study_id: str, ranges: Ranges
                 ) -> tuple[int, tuple[int, dict[str, float], float] | None]:
        """(trials used, best trial as :meth:`best` gives it) of a study, read only:
        a study not in the journal has used none and has no best."""
        try:
            self._optuna.load_study(study_name=study_id, storage=self.storage)
        except KeyError:
            return 0, None
        # the study exists: loading it again writes nothing
        return self.used(study_id, ranges), self.best(study_id, ranges)

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

    def _trials(self, study_id: str, ranges: Ranges, states=None) -> list:
        """The study's trials (in ``states``) that the journal records believably;
        each other one is said once, in one line, and left out."""
        believed = []
        for trial in self._study(study_id).get_trials(deepcopy=False, states=states):
            if trial.state == self._optuna.trial.TrialState.RUNNING \
                    and VALUES_ATTR not in trial.user_attrs:
                believed.append(trial)  # asked, never launched: closed by next_trial
            elif (problem := trial_problem(trial, ranges)) is None:
                believed.append(trial)
            elif (study_id, trial.number) not in self._warned:
                self._warned.add((study_id, trial.number))
                log.warning("%s: trial %d of study %s is left out: %s", self.journal,
                            trial.number, study_id, problem)
        return believed

    def used(self, study_id: str, ranges: Ranges) -> int:
        """Trials of the study's budget that ran to an end (completed or failed)."""
        states = self._optuna.trial.TrialState
        return sum(1 for t in self._trials(study_id, ranges, (states.COMPLETE, states.FAIL))
                   if VALUES_ATTR in t.user_attrs)

    def next_trial(self, study_id: str, ranges: dict[str, tuple[float, float]]
                   ) -> tuple[int, dict[str, float]]:
        """(number, values) of the study's next trial to run: one left in flight
        by a stopped sweep, else a new proposal within ``ranges``."""
        states = self._optuna.trial.TrialState
        study = self._study(study_id)
        for trial in self._trials(study_id, ranges, (states.RUNNING,)):
            if VALUES_ATTR in trial.user_attrs:
                return trial.number, dict(trial.user_attrs[VALUES_ATTR])
            study.tell(trial.number, state=states.FAIL)  # asked, never launched
        study = self._study(study_id, slot=self.used(study_id, ranges))
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

    def best(self, study_id: str, ranges: Ranges,
             agrees: Callable[[int, dict, float], bool] | None = None
             ) -> tuple[int, dict[str, float], float] | None:
        """(number, values, objective) of the study's best believable completed trial
        (the first of equals, as Optuna chooses); with ``agrees``, the best whose
        (number, values, objective) it accepts (the trial's own record)."""
        done = self._trials(study_id, ranges, (self._optuna.trial.TrialState.COMPLETE,))
        for trial in sorted(done, key=lambda t: (-t.value, t.number)):
            found = trial.number, dict(trial.user_attrs[VALUES_ATTR]), float(trial.value)
            if agrees is None or agrees(*found):
                return found
        return None
