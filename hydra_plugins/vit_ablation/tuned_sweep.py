"""A tuned sweep: each variant searched on validation, then its final runs.

With a ``tune=...`` preset, the sweep's combinations are grouped into *studies*
(a combination without its seed). Every study gets ``tune.trials`` trial jobs at
values the search proposes for ``tune.params`` (log-uniform within ``tune.spread``
of the preset's), with ``tune.search_seed``, scored by final validation top-1 (the
test split is never read for a choice); then each requested seed trains at its
study's best values. Trials are launched in rounds, one per unfinished study.

The search (:mod:`hydra_plugins.vit_ablation.search`) keeps its state in an Optuna
journal in ``<sweep>/.tuning/``, so a stopped sweep resumes where it was; one
process tunes a sweep folder at a time (its ``.tuning`` lock).
"""
from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ablation.config.compose import sweep_job
from ablation.config.folders import override_key
from ablation.config.refusals import ConfigError
from ablation.config.settings import flatten, names_job_folder, settings
from ablation.config.switches import switches, variant_name
from ablation.config.tuning import OBJECTIVE, Protocol, rounded
from hydra_plugins.vit_ablation.outcomes import job_folder, outcome_of

log = logging.getLogger(__name__)

TUNING_FOLDER = ".tuning"        # in the sweep folder: the journal and its lock
JOURNAL_FILE = "journal.log"
LOCK_FILE = ".lock"


@dataclass
class Study:
    """One variant's search under the sweep's ``protocol``: its combination without
    the seed, and its final runs."""
    name: str                      # the variant, with any other swept setting: for people
    variant: str                   # its switches' name (``spt+lsa+temp``): its trials' run names
    overrides: list[str]           # the combination, seed left out
    centre: dict[str, float]       # the preset's values of the searched keys
    identity: dict[str, str]       # its settings and switches (seed aside): what it tunes
    protocol: Protocol
    finals: list[list[str]] = field(default_factory=list)  # one combination per final seed

    @property
    def id(self) -> str:
        """The study's name in the journal and its jobs' ``tune.study``, from its
        settings, switches and protocol: any command asking for the same search finds it."""
        text = json.dumps({"experiment": self.identity, **self.protocol.key()}, sort_keys=True)
        # a letter first: an override value of hex digits alone could parse as a number
        return "s" + hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def ranges(self) -> dict[str, tuple[float, float]]:
        spread = self.protocol.spread
        return {key: (value / spread, value * spread) for key, value in self.centre.items()}


def plan(protocol: Protocol, combinations: Sequence[Sequence[str]],
         config_of: Callable[[list[str]], Mapping]) -> list[Study]:
    """The studies of a sweep's ``combinations`` (each job's overrides, as the
    basic sweeper expands them); ``config_of`` composes a job's resolved config.
    What cannot be tuned fairly was refused before the sweep (:func:`check_jobs`)."""
    studies: dict[tuple[str, ...], Study] = {}
    for combination in combinations:
        config = config_of(list(combination))
        rest = [o for o in combination if override_key(o) != "seed"]
        study = studies.get(tuple(rest))
        if study is None:
            study = studies[tuple(rest)] = Study(
                name=_study_name(config, rest), variant=variant_name(switches(config)),
                overrides=rest, centre=_centre(protocol, config),
                identity={**settings(config), **{k: json.dumps(v)
                                                 for k, v in switches(config).items()}},
                protocol=protocol)
        study.finals.append(list(combination))
    return list(studies.values())


def _study_name(config: Mapping, rest: list[str]) -> str:
    others = [o for o in rest if names_job_folder(override_key(o))]
    return variant_name(switches(config)) + (f" ({', '.join(others)})" if others else "")


def _centre(protocol: Protocol, config: Mapping) -> dict[str, float]:
    flat = flatten(config)
    centre = {}
    for key in protocol.params:
        if key not in flat:
            raise ConfigError(f"tune.params names {key}, which is no key of the config")
        value = json.loads(flat[key])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(
                f"tune.params names {key}={value!r}: a searched value must be a positive "
                f"number (its range is log-uniform around it)")
        centre[key] = float(value)
    return centre


def check_jobs(jobs: Sequence[Mapping]) -> None:
    """What a tuned sweep refuses before anything trains, from its jobs' resolved
    configs (those of its final runs): no Optuna, a config without a validation
    split, a search seed among the final seeds, a searched key that is not a
    positive number, or a range that reaches values the key may not take."""
    tune = jobs[0].get("tune") if jobs else None
    if not tune:
        return
    try:
        import optuna  # noqa: F401 - the search's storage and sampler
    except ImportError:
        raise ConfigError('tune=... needs Optuna: pip install "vit-ablation[tune]"') from None
    protocol = Protocol.of(tune)
    if protocol.search_seed in {int(job["seed"]) for job in jobs}:
        raise ConfigError(
            f"tune.search_seed={protocol.search_seed} is also a final seed: the search "
            f"must train with a seed apart from the final runs' (set tune.search_seed to "
            f"another value)")
    for job in jobs:
        if job["trainer"]["protocol"] != "holdout":
            raise ConfigError(
                f"tune=... needs a validation split to choose on, and "
                f"{variant_name(switches(job))} trains with trainer.protocol="
                f"{job['trainer']['protocol']} (no validation split): use trainer.protocol=holdout")
        _check_range(protocol, job, _centre(protocol, job))


def _check_range(protocol: Protocol, config: Mapping, centre: Mapping[str, float]) -> None:
    """Each end of each searched range, as a trial would train at it, passes the
    config's schema (a rate that reaches 1, a whole number searched as a float)."""
    from copy import deepcopy

    from ablation.config.schema import check_schema

    for key, value in centre.items():
        for end in (value / protocol.spread, value * protocol.spread):
            trial = deepcopy(dict(config))
            node = trial
            *groups, last = key.split(".")
            for group in groups:
                node = node[group]
            node[last] = rounded(end)
            try:
                check_schema(trial)
            except ConfigError as e:
                raise ConfigError(
                    f"tune.params: {key} is searched in [{rounded(value / protocol.spread):g}, "
                    f"{rounded(value * protocol.spread):g}] (tune.spread={protocol.spread:g} "
                    f"around {value:g}), which it cannot take all of: {e}") from None


def check_not_swept(overrides) -> None:
    """One search protocol per sweep: a ``tune`` value swept on the command line
    would run several protocols under one sweep's search."""
    for override in overrides:
        key = override.get_key_element()
        if override.is_sweep_override() and (key == "tune" or key.startswith("tune.")):
            raise ConfigError(f"{key} cannot be swept (one search protocol per sweep): "
                              f"run one sweep for each value")


def _assign(values: Mapping[str, float]) -> list[str]:
    return [f"{key}={rounded(value)!r}" for key, value in sorted(values.items())]


def _with(overrides: Sequence[str], added: list[str]) -> list[str]:
    """``overrides`` with ``added``, which replace any of the same keys (a key
    set twice would name the job folder twice)."""
    keys = {override_key(o) for o in added}
    return [*(o for o in overrides if override_key(o) not in keys), *added]


def trial_overrides(study: Study, number: int, values: Mapping[str, float]) -> list[str]:
    """A trial job's overrides: its study's combination at the proposed values,
    with the search's seed and epochs, named ``<variant>-s<search seed>-trial<number>``."""
    protocol = study.protocol
    return _with(study.overrides, [
        f"seed={protocol.search_seed}", *_assign(values),
        *([f"trainer.epochs={protocol.epochs}"] if protocol.epochs else []),
        f"run_name={study.variant}-s{protocol.search_seed}-trial{number}", "tune.role=trial",
        f"tune.study={study.id}", f"tune.trial={number}"])


def final_overrides(study: Study, combination: Sequence[str],
                    values: Mapping[str, float]) -> list[str]:
    """A final run's overrides: its combination at its study's chosen values."""
    return _with(combination, [*_assign(values), "tune.role=final", f"tune.study={study.id}"])


def planned_jobs(config, jobs: list[tuple[dict, Path]]) -> list[tuple[dict, Path]]:
    """What the sweep will train, as (config, folder) pairs in launch order, for its
    estimate: outside a tuned sweep, ``jobs``; in one, each study's trials still to run
    (stand-ins at the preset's values), then its final runs (at the chosen values where
    the search has ended; else counted whole). ``config``: the sweep's Hydra config;
    ``jobs``: its combinations composed, in order (``job_configs``). Should the plan
    fail, no estimate: with one warning, or none for a damaged journal, which the
    tuning then refuses in one line."""
    from hydra_plugins.vit_ablation.search import DamagedJournal

    tune = jobs[0][0].get("tune") if jobs else None
    if not tune or not jobs[0][0].get("estimate", True):
        return jobs
    try:
        return _planned_jobs(config, jobs, Protocol.of(tune))
    except DamagedJournal:
        return []
    except Exception as e:
        log.warning("no estimate: %s: %s", type(e).__name__, e)
        return []


def _planned_jobs(config, jobs: list[tuple[dict, Path]], protocol: Protocol
                  ) -> list[tuple[dict, Path]]:
    from functools import partial

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from ablation.config.hydra_internals import sweep_jobs
    from ablation.files import is_regular
    from hydra_plugins.vit_ablation.search import Search

    compose = partial(sweep_job, GlobalHydra.instance().config_loader(), config)
    combinations = sweep_jobs(OverridesParser.create().parse_overrides(
        list(config.hydra.overrides.task)))
    composed = {tuple(c): job for c, (job, _) in zip(combinations, jobs)}
    studies = plan(protocol, combinations, lambda combination: composed[tuple(combination)])
    sweep_dir = Path(str(config.hydra.sweep.dir))
    journal = sweep_dir / TUNING_FOLDER / JOURNAL_FILE  # not opened where no file stands there
    search = Search(journal, protocol, reading=True) if is_regular(journal) else None
    unknown = sweep_dir / TUNING_FOLDER / "estimate"  # a folder never made: every epoch counts
    left, best = {}, {}
    for study in studies:
        used, best[study.name] = search.progress(study.id, study.ranges) if search else (0, None)
        left[study.name] = max(protocol.trials - used, 0)
    # a study's trials counted as one trial of it composed at the preset's values
    trial = {study.name: compose(trial_overrides(study, 0, study.centre))[0] for study in studies}
    trials = [(trial[study.name], unknown) for number in range(max(left.values(), default=0))
              for study in studies if left[study.name] > number]  # by rounds, as launched
    finals = []
    for study in studies:
        for combination in study.finals:
            if left[study.name]:
                finals.append((composed[tuple(combination)], unknown))
            elif best[study.name] is not None:
                finals.append(compose(final_overrides(study, combination, best[study.name][1])))
    return [*trials, *finals]


class Tuner:
    """Runs a tuned sweep for the suite's sweeper (:mod:`hydra_plugins.vit_ablation.sweeper`):
    its ``config``, ``launcher``, ``hydra_context`` and ``folder_of``."""

    def __init__(self, sweeper):
        from omegaconf import OmegaConf

        self.sweeper, self.config = sweeper, sweeper.config
        self.loader = sweeper.hydra_context.config_loader
        self.protocol = Protocol.of(OmegaConf.to_container(self.config.tune, resolve=True))
        self.sweep_dir = Path(str(self.config.hydra.sweep.dir))
        self.job_idx = 0
        self.returns = []  # the JobReturns the sweep's end tallies

    def config_of(self, overrides: list[str]) -> dict:
        """A job's resolved config (``hydra`` aside), as the job will see it."""
        return sweep_job(self.loader, self.config, overrides)[0]

    def run(self, arguments: list[str]) -> list:
        """Search, then train the final runs; the returns of the jobs the sweep's end
        counts (every job but the failed trials)."""
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from ablation.config.hydra_internals import sweep_jobs
        from ablation.config.refusals import Refused
        from ablation.files import UnsafeFile, atomic_write, make_folder, own_file
        from ablation.runs.lock import JobBusy, job_lock
        from hydra_plugins.vit_ablation.search import DamagedJournal

        # no Optuna and what cannot be tuned were refused before the sweep (SweepStart)
        parser = OverridesParser.create(config_loader=self.loader)
        combinations = sweep_jobs(parser.parse_overrides(list(arguments)))
        studies = plan(self.protocol, combinations, self.config_of)
        tuning = self.sweep_dir / TUNING_FOLDER
        try:  # where the search keeps its files, checked before anything is written
            own_file(make_folder(tuning) / JOURNAL_FILE)
            with job_lock(tuning, name=LOCK_FILE):
                atomic_write(self.sweep_dir / "multirun.yaml", OmegaConf.to_yaml(self.config),
                             fsync=False)
                self._tune_then_train(studies)
        except (UnsafeFile, DamagedJournal) as e:  # a link, a FIFO, a journal not Optuna's
            raise Refused(e) from None
        except JobBusy as e:
            who = e.holder
            raise Refused(
                f"{self.sweep_dir} is being tuned by another process (host {who.get('host', '?')}, "
                f"pid {who.get('pid', '?')}, since {who.get('since', '?')}): wait for it to end, "
                f"then rerun this command to resume") from None
        return self.returns

    def _tune_then_train(self, studies: list[Study]) -> None:
        from ablation.runtime.sweep_context import update
        from hydra_plugins.vit_ablation.search import Search

        protocol = self.protocol
        search = Search(self.sweep_dir / TUNING_FOLDER / JOURNAL_FILE, protocol)
        left = {study.name: max(protocol.trials - search.used(study.id, study.ranges), 0)
                for study in studies}
        final_epochs = {tuple(f): int(self.config_of(f)["trainer"]["epochs"])
                        for study in studies for f in study.finals}
        trial_epochs = [protocol.epochs or final_epochs[tuple(study.finals[0])]
                        for r in range(max(left.values(), default=0))
                        for study in studies if left[study.name] > r]  # by rounds, as launched
        update(job_epochs=(*trial_epochs, *final_epochs.values()))
        log.info("tuning %s of %d variant(s): %d trials each (%d to run), then %d final run(s)",
                 ", ".join(protocol.params), len(studies), protocol.trials,
                 sum(left.values()), len(final_epochs))
        while pending := [s for s in studies if search.used(s.id, s.ranges) < protocol.trials]:
            batch = []
            for study in pending:
                number, values = search.next_trial(study.id, study.ranges)
                batch.append((study, number, trial_overrides(study, number, values)))
            results = self._launch([overrides for _, _, overrides in batch])
            unfinished = []
            for (study, number, _), result in zip(batch, results):
                folder = job_folder(result, self.sweeper.folder_of)
                status, value = objective(result)
                if status in ("completed", "failed"):
                    search.tell(study.id, number, value)
                if status == "failed":  # a search outcome (a diverged rate), not a failed sweep
                    log.warning("%s trial %d failed at %s; it counts against the budget (%s)",
                                study.name, number, folder.name, "see its run.json")
                    continue
                self.returns.append(result)
                if status != "completed":
                    unfinished.append(f"{study.name} trial {number}")
            if unfinished:  # the sweep's end lists them, with the command that resumes them
                log.warning("tuning stopped before its end (%s did not finish): no final runs; "
                            "rerun the same command to resume", ", ".join(unfinished))
                return
        finals = []
        for study in studies:
            best = search.best(study.id, study.ranges,
                               agrees=lambda *trial, study=study: self._agrees(study, *trial))
            if best is None:
                log.warning("%s: no trial completed, so no values to train the final runs at",
                            study.name)
                continue
            number, values, score = best
            log.info("%s: %s, the best of %d trials (trial %d: validation top-1 %.2f%%)",
                     study.name, ", ".join(f"{k}={v:g}" for k, v in values.items()),
                     protocol.trials, number, 100 * score)
            finals += [final_overrides(study, combination, values) for combination in study.finals]
        if finals:
            self.returns += self._launch(finals)

    def _agrees(self, study: Study, number: int, values: dict, score: float) -> bool:
        """Whether a trial's own record says what the journal says of it (its trial,
        values and validation top-1); a trial whose record disagrees is not chosen."""
        from ablation.runs.record import RecordError, read_record

        folder = self.sweeper.folder_of(
            trial_overrides(study, number, values))
        try:
            record = read_record(folder / "run.json")
        except (RecordError, OSError) as e:
            problem = f"its record cannot be read ({e})"
        else:
            tuning = record.get("tuning") or {}
            measured = (record.get("metrics") or {}).get(OBJECTIVE)
            if tuning.get("trial") != number or tuning.get("values") != values:
                problem = "its record was trained at other values than the journal says"
            elif measured is None or abs(float(measured) - score) > 1e-9:
                problem = f"its record's {OBJECTIVE} is {measured}, the journal's {score}"
            else:
                return True
        log.warning("%s: trial %d is not chosen: %s (%s)", study.name, number, problem, folder)
        return False

    def _launch(self, batch: list[list[str]]) -> list:
        """Run ``batch`` through the sweep's launcher; the jobs' ``JobReturn``\\ s."""
        self.sweeper.validate_batch_is_legal(batch)
        results = list(self.sweeper.launcher.launch(batch, initial_job_idx=self.job_idx))
        self.job_idx += len(batch)
        return results


def objective(ret) -> tuple[str, float | None]:
    """(status, validation top-1) of a trial, from its job's ``JobReturn``: ``completed``
    with its objective, ``failed`` (no value, still counted), or anything else (busy,
    raised, ended without handing back what it did: not finished)."""
    from ablation.runs.record import RecordError, read_record

    done = outcome_of(ret)
    if done is None:
        return "unfinished", None
    if done["status"] not in ("completed", "skipped"):
        return done["status"], None
    try:
        record = read_record(done["record"])
    except RecordError:
        return "missing", None
    value = (record.get("metrics") or {}).get(OBJECTIVE)
    return ("completed", float(value)) if value is not None else ("failed", None)
