"""Each study's search, in an Optuna journal: what to try next, what was found.

One journal file (Optuna's ``JournalStorage``, safe for several processes) holds
every study of a sweep folder. A study's budget is its trials that ran; a trial
asked for but never launched (a kill between the two) is closed as failed and not
counted, and one in flight when the sweep stopped is handed out again
(:meth:`Search.next_trial`), so its job resumes in its own folder.

The k-th trial's sampler is seeded from ``tune.sampler_seed`` and k, so proposals
are the same whether or not the search was stopped and resumed, and every study
draws the same start-up values. A trial whose journal entry cannot be believed
(:func:`trial_problem`) is left out, with one warning: no read of the journal's
trials sees it after, the sampler's included. A last line cut short (a kill while
Optuna appended it) is cut off before the search writes (:func:`_mend`).
"""
from __future__ import annotations

import json
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
JOURNAL_CAP = 1 << 30  # bytes: the journal is read whole (as Optuna reads it)

Ranges = Mapping[str, tuple[float, float]]


class DamagedJournal(ValueError):
    """The search journal cannot be read as Optuna's journal."""


def _damaged(journal: Path, e: Exception) -> DamagedJournal:
    """The one-line refusal of ``journal``, which raised ``e`` when read."""
    return DamagedJournal(
        f"the search journal {journal} cannot be read ({type(e).__name__}: "
        f"{str(e).splitlines()[0] if str(e) else 'damaged'}): move it aside to start "
        f"this sweep's search over")


def _shown(value) -> str:
    """``value``'s repr, cut to 40 characters: a journal may hold a value of any length."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def trial_problem(trial, ranges: Ranges) -> str | None:
    """Why ``trial``'s journal entry is not to be believed, or None: its state must be
    one the search writes, its values (as trained) and params (as proposed: what the
    sampler reads) must name exactly the searched keys, each a number in its range,
    and a completed trial's score must be a fraction in [0, 1]."""
    from optuna.trial import TrialState

    if trial.state not in (TrialState.RUNNING, TrialState.COMPLETE, TrialState.FAIL):
        return f"its state {trial.state.name} is none the search writes"
    for name, given in (("values", trial.user_attrs.get(VALUES_ATTR)), ("params", trial.params)):
        if given is None:
            return f"it has no {name}"
        if not isinstance(given, dict) or set(given) != set(ranges):
            named = sorted(given) if isinstance(given, dict) else given
            return f"its {name} name {_shown(named)}, not the searched {sorted(ranges)}"
        for key, value in given.items():
            low, high = ranges[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"{key}={_shown(value)} is not a number"
            if not low * (1 - ROUNDING) <= value <= high * (1 + ROUNDING):
                return f"{key}={_shown(value)} is outside the searched range " \
                       f"[{low:.3g}, {high:.3g}]"
    score = trial.value
    if trial.state == TrialState.COMPLETE and not (
            isinstance(score, (int, float)) and 0 <= score <= 1):
        kind = "a fraction in [0, 1]" if isinstance(score, (int, float)) else "a number"
        return f"its score {_shown(score)} is not {kind}"
    return None


def _mend(journal: Path) -> None:
    """Before the search writes to ``journal``: a last line without its newline (what a
    kill while Optuna appended leaves; Optuna skips it, then would append onto it) is
    cut off (the journal rewritten whole, atomically), with one warning; a last line
    that ends but is no JSON is :class:`DamagedJournal` (Optuna would skip it too,
    then append after it)."""
    from ablation.files import atomic_write, is_regular, read_bytes

    if not is_regular(journal):
        return
    data = read_bytes(journal, JOURNAL_CAP)
    end = data.rfind(b"\n") + 1
    if end < len(data):
        atomic_write(journal, data[:end])
        log.warning("%s: its last line was cut short (a stop while it was written): dropped "
                    "%d bytes, %s; the search resumes from the complete lines", journal,
                    len(data) - end, _shown(data[end:]))
    if end:
        try:
            json.loads(data[data.rfind(b"\n", 0, end - 1) + 1:end])
        except ValueError as e:  # JSON, UTF-8
            raise _damaged(journal, e) from None


class Search:
    """The studies of one sweep folder, in the journal at ``journal``. ``reading``:
    for the sweep's estimate, which writes nothing and says nothing of the journal
    (the tuning that follows says it)."""

    def __init__(self, journal: Path, protocol: Protocol, *, reading: bool = False):
        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.protocol, self.journal, self.reading = protocol, journal, reading
        self.left_out: set[int] = set()  # the journal ids of trials not believed
        if not reading:
            _mend(journal)
        try:
            self.storage = JournalStorage(JournalFileBackend(str(journal)))
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # JSON, UTF-8, layout
            raise _damaged(journal, e) from None
        every = self.storage.get_all_trials  # what every read of trials, the sampler's, calls
        self.storage.get_all_trials = lambda study_id, deepcopy=True, states=None: [
            t for t in every(study_id, deepcopy, states) if t._trial_id not in self.left_out]

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
        each other one is said in one line (unless ``reading``) and left out of every
        later read."""
        from optuna.trial import TrialState

        believed = []
        for trial in self._study(study_id).get_trials(deepcopy=False, states=states):
            if trial.state in (TrialState.RUNNING, TrialState.FAIL) \
                    and VALUES_ATTR not in trial.user_attrs:
                believed.append(trial)  # asked, never launched: closed by next_trial, not counted
            elif (problem := trial_problem(trial, ranges)) is None:
                believed.append(trial)
            else:
                self.left_out.add(trial._trial_id)
                if not self.reading:
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
        # every trial judged first: the sampler below reads only the believed ones
        for trial in self._trials(study_id, ranges):
            if trial.state != states.RUNNING:
                continue
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
        failed = self._optuna.trial.TrialState.FAIL if value is None else None
        self._study(study_id).tell(number, value, state=failed)

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
